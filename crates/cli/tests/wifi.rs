//! Shaping that follows a Wi-Fi network (issue 56), in a real kernel with real 802.11: two of
//! mac80211_hwsim's simulated radios, one in the laptop's namespace as its `wlan0` under Debian's
//! `wpa_supplicant`, the other in the access point's namespace under `hostapd`, which is also the
//! gateway (a home router). The daemon reads the SSID and the access point's BSSID over nl80211
//! and wakes on its association events.
//!
//! - Home and the office are the same box and the same gateway MAC under two SSIDs: only the
//!   SSID tells them apart, and each gets its rates (a change of SSID moves no route).
//! - A café (an unknown SSID, another gateway): what home had is kept until the gateway's MAC is
//!   resolved, then the interface's own table.
//! - A phone's hotspot is recognised by its access point's BSSID whatever its SSID.
//! - `unbloat status` and `--json` name the SSID and the BSSID.
//! - An empty SSID and a malformed BSSID are refused by `config check` and a reload, with the
//!   line and the table, and the kernel keeps what it had.
#![cfg(feature = "networks")]

mod common;

use common::daemon::Daemon;
use common::{must, sh, text, wait_until, Netns};
use std::path::{Path, PathBuf};
use std::time::Duration;
use unbloat_testbed::kernel::run_test_in_uml;

/// The access point's MACs (its BSSID, and the gateway's MAC: one box). Not hwsim's own
/// (02:00:00:00:NN:00 for radio NN): the station's must differ from its access point's.
const HOME_AP: &str = "02:aa:00:00:01:00";
const CAFE_AP: &str = "02:aa:00:00:0c:00";
const PHONE_AP: &str = "02:aa:00:00:07:00";

fn config() -> String {
    format!(
        "[interface.wlan0]\ndown = \"20mbit\"\nup = \"5mbit\"\n\n\
         [network.home]\nssid = \"Home\"\ndown = \"30mbit\"\nup = \"6mbit\"\n\n\
         [network.office]\nssid = [\"Office\", \"Office-5G\"]\ndown = \"40mbit\"\nup = \"7mbit\"\n\n\
         [network.phone]\nbssid = \"{PHONE_AP}\"\ndown = \"8mbit\"\nup = \"2mbit\"\n"
    )
}

/// The access point's namespace; hostapd is stopped and the namespace removed on drop.
struct Ap {
    ns: String,
    dir: PathBuf,
}

impl Ap {
    fn pid_file(&self) -> PathBuf {
        self.dir.join("hostapd.pid")
    }

    /// hostapd on `ap0` with this SSID and BSSID (the interface's MAC, set while it is down).
    fn serve(&self, ssid: &str, bssid: &str) {
        self.stop();
        let ns = &self.ns;
        must(&format!("ip -n {ns} link set ap0 down"));
        must(&format!("ip -n {ns} link set ap0 address {bssid}"));
        let conf = self.dir.join("hostapd.conf");
        std::fs::write(
            &conf,
            format!("interface=ap0\ndriver=nl80211\nssid={ssid}\nhw_mode=g\nchannel=1\n"),
        )
        .unwrap();
        must(&format!(
            "ip netns exec {ns} hostapd -B -P {} -f {} {}",
            self.pid_file().display(),
            self.dir.join("hostapd.log").display(),
            conf.display()
        ));
        must(&format!("ip -n {ns} addr replace 192.168.1.1/24 dev ap0"));
    }

    fn stop(&self) {
        if let Ok(pid) = std::fs::read_to_string(self.pid_file()) {
            let _ = sh(&format!("kill {}", pid.trim()));
            let pid = pid.trim().to_string();
            wait_until(Duration::from_secs(5), || {
                !Path::new(&format!("/proc/{pid}")).exists()
            });
            let _ = std::fs::remove_file(self.pid_file());
        }
    }
}

impl Drop for Ap {
    fn drop(&mut self) {
        self.stop();
        let _ = sh(&format!("ip netns del {}", self.ns));
    }
}

/// wpa_supplicant, stopped on drop.
struct Station(PathBuf);

impl Drop for Station {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            let _ = sh(&format!("kill {}", pid.trim()));
        }
    }
}

/// Two simulated radios: the first moved into the access point's namespace as `ap0`, the
/// second into the laptop's as `wlan0` under wpa_supplicant, which knows every SSID here.
fn radios(ns: &Netns) -> (Ap, Station) {
    let modules = std::env::var(unbloat_testbed::kernel::MODULES_ENV)
        .expect("a guest of the lab's kernel, which has mac80211_hwsim as a module");
    must(&format!("modprobe -d {modules} mac80211_hwsim radios=2"));
    let mut phys: Vec<String> = std::fs::read_dir("/sys/class/ieee80211")
        .expect("cfg80211 in the kernel")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    phys.sort();
    assert_eq!(phys.len(), 2, "two radios: {phys:?}");
    let netdev = |phy: &str| -> String {
        let dir = format!("/sys/class/ieee80211/{phy}/device/net");
        std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .next()
            .expect("a radio's interface")
    };
    let ap = Ap {
        ns: format!("{}-ap", ns.name),
        dir: ns.run_dir.join("ap"),
    };
    std::fs::create_dir_all(&ap.dir).unwrap();
    must(&format!("ip netns add {}", ap.ns));
    let (ap_if, sta_if) = (netdev(&phys[0]), netdev(&phys[1]));
    must(&format!("iw phy {} set netns name {}", phys[0], ap.ns));
    must(&format!("iw phy {} set netns name {}", phys[1], ns.name));
    must(&format!("ip -n {} link set {ap_if} name ap0", ap.ns));
    ns.must(&format!("ip link set {sta_if} name wlan0"));
    let conf = ns.run_dir.join("wpa_supplicant.conf");
    let networks: String = ["Home", "Office", "Cafe", "AndroidAP"]
        .iter()
        .map(|s| format!("network={{\n  ssid=\"{s}\"\n  key_mgmt=NONE\n}}\n"))
        .collect();
    std::fs::write(&conf, networks).unwrap();
    let station = Station(ns.run_dir.join("wpa_supplicant.pid"));
    ns.must(&format!(
        "wpa_supplicant -B -i wlan0 -D nl80211 -c {} -P {} -f {}",
        conf.display(),
        station.0.display(),
        ns.run_dir.join("wpa_supplicant.log").display()
    ));
    ns.must("ip addr add 192.168.1.2/24 dev wlan0");
    (ap, station)
}

/// The SSID `wlan0` is associated with, as `iw` says.
fn associated(ns: &Netns) -> Option<String> {
    let link = text(&ns.sh("iw dev wlan0 link"));
    link.lines()
        .find_map(|l| l.trim().strip_prefix("SSID: "))
        .map(str::to_string)
}

fn associate(ns: &Netns, ssid: &str) {
    let got = wait_until(Duration::from_secs(40), || {
        associated(ns).as_deref() == Some(ssid)
    });
    assert!(
        got.is_some(),
        "wlan0 did not associate with {ssid}: {}\n{}",
        text(&ns.sh("iw dev wlan0 link")),
        std::fs::read_to_string(ns.run_dir.join("wpa_supplicant.log")).unwrap_or_default()
    );
}

/// `wlan0`'s egress and ingress rates: `Some(("6Mbit", "30Mbit"))`.
fn rates(ns: &Netns) -> Option<(String, String)> {
    common::rates(ns, "wlan0")
}

fn shaped_at(ns: &Netns, up: &str, down: &str, limit: Duration) -> Option<Duration> {
    common::shaped_at(ns, "wlan0", (up, down), limit)
}

/// In User-Mode Linux whatever this kernel has: it loads mac80211_hwsim, whose radios must not
/// appear on the host.
#[test]
fn the_daemon_follows_wifi_networks_by_ssid_and_by_access_point() {
    if !run_test_in_uml(
        concat!(
            module_path!(),
            "::the_daemon_follows_wifi_networks_by_ssid_and_by_access_point"
        ),
        &["cake", "ingress", "ifb", "mirred", "u32"],
    ) {
        return; // it ran, and passed, in a guest
    }
    let ns = Netns::new();
    std::fs::create_dir_all(&ns.run_dir).unwrap();
    let (ap, station) = radios(&ns);
    let path = ns.run_dir.join("unbloat.toml");
    let path_s = path.to_str().unwrap().to_string();
    std::fs::write(&path, config()).unwrap();

    ap.serve("Home", HOME_AP);
    associate(&ns, "Home");
    // DHCP's part, by hand, once: the address and the route stay through every move below (one
    // box, one subnet), so no route event wakes the daemon: the association must.
    ns.must("ip route replace default via 192.168.1.1 dev wlan0");
    let _daemon = Daemon::start(&ns, &[&path_s], &[]);
    assert!(
        shaped_at(&ns, "6Mbit", "30Mbit", Duration::from_secs(20)).is_some(),
        "home's rates at start: {:?}",
        rates(&ns)
    );
    let status = text(&ns.unbloat(&["status"]));
    assert!(
        status.contains("wlan0: on network home (Wi-Fi \"Home\", [network.home]'s)"),
        "{status}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&ns.unbloat(&["status", "--json"]).stdout).expect("status --json");
    let wlan0 = json
        .as_array()
        .and_then(|a| a.iter().find(|s| s["device"] == "wlan0"))
        .expect("wlan0 in status --json");
    assert_eq!(
        (&wlan0["network"]["ssid"], &wlan0["network"]["bssid"]),
        (&serde_json::json!("Home"), &serde_json::json!(HOME_AP)),
        "{wlan0}"
    );

    // The same box, the same gateway, another SSID: only nl80211 says it is the office.
    // Times from the association (`iw` polled) to the new rates in the kernel.
    let mut times = vec![];
    ap.serve("Office", HOME_AP);
    associate(&ns, "Office");
    let got = shaped_at(&ns, "7Mbit", "40Mbit", Duration::from_secs(10));
    assert!(
        got.is_some(),
        "the office's rates: {:?}\n{}",
        rates(&ns),
        text(&ns.unbloat(&["status"]))
    );
    times.push(("Office", got));

    // A café: unknown SSID, another gateway. Until its MAC is resolved the office's shaping
    // stays; then the interface's own table.
    ap.serve("Cafe", CAFE_AP);
    associate(&ns, "Cafe");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        rates(&ns),
        Some(("7Mbit".into(), "40Mbit".into())),
        "kept until the gateway is known"
    );
    let status = text(&ns.unbloat(&["status"]));
    assert!(
        status.contains("Wi-Fi \"Cafe\", gateway 192.168.1.1, its MAC not resolved yet; kept"),
        "{status}"
    );
    ns.must("ping -c 1 -W 2 192.168.1.1");
    let got = shaped_at(&ns, "5Mbit", "20Mbit", Duration::from_secs(10));
    assert!(
        got.is_some(),
        "the café's fallback: {:?}\n{}",
        rates(&ns),
        text(&ns.unbloat(&["status"]))
    );
    times.push(("Cafe, from the ping that resolved its gateway", got));

    // A phone's hotspot, by its access point.
    ap.serve("AndroidAP", PHONE_AP);
    associate(&ns, "AndroidAP");
    let got = shaped_at(&ns, "2Mbit", "8Mbit", Duration::from_secs(10));
    assert!(
        got.is_some(),
        "the hotspot's rates: {:?}\n{}",
        rates(&ns),
        text(&ns.unbloat(&["status"]))
    );
    times.push(("AndroidAP", got));
    let status = text(&ns.unbloat(&["status"]));
    assert!(status.contains(&format!("wlan0: on network phone (Wi-Fi \"AndroidAP\", access point {PHONE_AP}, [network.phone]'s)")), "{status}");
    eprintln!("from the association to the new rates in the kernel: {times:?}");

    // Bad Wi-Fi entries: refused with the line and the table; the kernel keeps what it had.
    let before = ns.snapshot();
    for (bad, says) in [
        (
            config().replace("ssid = \"Home\"", "ssid = \"\""),
            ":6:8: [network.home]: key `ssid`: empty",
        ),
        (
            config().replace(PHONE_AP, "02:aa:00:00:07"),
            ":16:9: [network.phone]: key `bssid`: \"02:aa:00:00:07\" is not a MAC address",
        ),
        (
            config().replace("\"Office-5G\"", "\"Home\""),
            ":11:19: [network.office]: ssid \"Home\" is [network.home]'s too, on wlan0",
        ),
    ] {
        std::fs::write(&path, &bad).unwrap();
        let out = ns.unbloat(&["config", "check", &path_s]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{t}");
        assert!(t.contains(&format!("{path_s}{says}")), "{t}");
        let out = ns.unbloat(&["reload"]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{t}");
        assert!(t.contains("running setup stays") && t.contains(says), "{t}");
        assert_eq!(
            ns.snapshot(),
            before,
            "a refused network entry changed the kernel"
        );
    }
    drop(station);
    drop(ap);
}
