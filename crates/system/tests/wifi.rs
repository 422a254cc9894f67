//! nl80211 against a real kernel with real 802.11: two of mac80211_hwsim's simulated radios in
//! the lab's kernel, Debian's `hostapd` serving an open network on one and `wpa_supplicant`
//! associating the other with it. What the daemon reads of a Wi-Fi network (the SSID and the
//! access point's BSSID) and the events that wake it.
#![cfg(feature = "networks")]

use std::process::Command;
use std::time::{Duration, Instant};

use unbloat_system::wifi::Nl80211;
use unbloat_testbed::kernel::run_test_in_uml;

fn sh(cmd: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(out.status.success(), "`{cmd}`: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn index(name: &str) -> u32 {
    sh(&format!("cat /sys/class/net/{name}/ifindex"))
        .trim()
        .parse()
        .unwrap()
}

/// In User-Mode Linux whatever this kernel has: it loads mac80211_hwsim, whose radios must not
/// appear on the host.
#[test]
fn a_station_reads_its_ssid_and_bssid_and_hears_its_association() {
    if !run_test_in_uml(
        concat!(
            module_path!(),
            "::a_station_reads_its_ssid_and_bssid_and_hears_its_association"
        ),
        &[],
    ) {
        return; // it ran, and passed, in a guest
    }
    let modules = std::env::var(unbloat_testbed::kernel::MODULES_ENV)
        .expect("a guest of the lab's kernel, which has mac80211_hwsim as a module");
    let mut nl = Nl80211::open()
        .unwrap()
        .expect("nl80211 in a kernel with cfg80211");
    let lo = index("lo");
    assert_eq!(nl.association(lo).unwrap(), None, "lo is not Wi-Fi");
    assert_eq!(nl.association(999_999).unwrap(), None, "no such device");

    sh(&format!("modprobe -d {modules} mac80211_hwsim radios=2"));
    let dir = std::env::temp_dir().join(format!("unbloat-wifi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ap_mac = "02:aa:00:00:01:00";
    sh(&format!("ip link set wlan0 address {ap_mac}"));
    std::fs::write(
        dir.join("hostapd.conf"),
        "interface=wlan0\ndriver=nl80211\nssid=Caf\u{e9} \"1\"\nhw_mode=g\nchannel=6\n",
    )
    .unwrap();
    // wpa_supplicant's quoted string runs to the last quote: inner quotes need no escape.
    std::fs::write(
        dir.join("wpa.conf"),
        "network={\n  ssid=\"Caf\u{e9} \"1\"\"\n  key_mgmt=NONE\n}\n",
    )
    .unwrap();
    let sta = index("wlan1");
    assert_eq!(nl.association(sta).unwrap(), None, "not associated yet");
    let mut events = Nl80211::open()
        .unwrap()
        .unwrap()
        .events()
        .unwrap()
        .expect("nl80211 has an mlme group");

    sh(&format!(
        "hostapd -B -P {0}/hostapd.pid {0}/hostapd.conf",
        dir.display()
    ));
    let t0 = Instant::now();
    sh(&format!(
        "wpa_supplicant -B -i wlan1 -D nl80211 -c {0}/wpa.conf -P {0}/wpa.pid",
        dir.display()
    ));
    let mut heard = None;
    while heard.is_none() && t0.elapsed() < Duration::from_secs(30) {
        if events.next(Duration::from_secs(1)).unwrap() {
            heard = Some(t0.elapsed());
        }
    }
    assert!(
        heard.is_some(),
        "no association event within 30 s: {}",
        sh("iw dev wlan1 link")
    );
    let mut got = None;
    while got.is_none() && t0.elapsed() < Duration::from_secs(30) {
        got = nl.association(sta).unwrap().filter(|a| a.bssid.is_some());
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = got.unwrap_or_else(|| panic!("no association read: {}", sh("iw dev wlan1 link")));
    assert_eq!(
        got.ssid.map(|s| s.to_string()).as_deref(),
        Some("Café \"1\"")
    );
    assert_eq!(got.bssid.map(|b| b.to_string()).as_deref(), Some(ap_mac));
    // The access point's own interface is not a station: no association of its own.
    assert_eq!(nl.association(index("wlan0")).unwrap(), None);
    eprintln!(
        "event after {heard:?}; association read after {:?}",
        t0.elapsed()
    );

    // Leaving: the disconnect is heard, and nothing is associated any more.
    sh(&format!("kill $(cat {}/hostapd.pid)", dir.display()));
    let t1 = Instant::now();
    let mut gone = false;
    while !gone && t1.elapsed() < Duration::from_secs(20) {
        let _ = events.next(Duration::from_millis(500)).unwrap();
        gone = nl.association(sta).unwrap().is_none();
    }
    assert!(gone, "still associated: {}", sh("iw dev wlan1 link"));
    let _ = sh(&format!("kill $(cat {}/wpa.pid)", dir.display()));
    let _ = std::fs::remove_dir_all(&dir);
}
