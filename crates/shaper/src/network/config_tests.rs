//! `[network.NAME]` tables read from whole config files: what they carry, and each refusal
//! naming the line and the table.

use std::path::Path;

use unbloat_units::{IfName, Rate};

use crate::config::{ConfigError, ConfigFile};
use crate::network::{recognise, Mac, Networks, Sighting, UnknownNetwork};

fn gateway(m: &str) -> Sighting {
    Sighting {
        gateway: Some(m.parse().unwrap()),
        ..Sighting::default()
    }
}

fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
    ConfigFile::parse(text, Path::new("/etc/unbloat/unbloat.toml"))
}

const BASE: &str = "[interface.wlan0]\ndown = \"20mbit\"\nup = \"5mbit\"\n\n[interface.eth0]\ndown = \"50mbit\"\nup = \"10mbit\"\n";

#[test]
fn networks_merge_over_their_interfaces_and_are_recognised_by_gateway() {
    let text = format!(
        "{BASE}\n[network.home]\ngateway = \"AA:bb:cc:dd:ee:01\"\ndown = \"78mbit\"\n\n[network.office]\ngateway = [\"aa:bb:cc:dd:ee:02\", \"aa:bb:cc:dd:ee:03\"]\ninterface = \"eth0\"\nup = \"40mbit\"\n"
    );
    let c = parse(&text).unwrap();
    let n = &c.networks;
    assert_eq!(n.tables.len(), 2);
    assert_eq!(n.tables[0].line, 9);
    assert_eq!(n.tables[1].line, 13);
    let wlan0: IfName = "wlan0".parse().unwrap();
    let eth0: IfName = "eth0".parse().unwrap();
    let (home, _) = recognise(n, &wlan0, &gateway("aa:bb:cc:dd:ee:01")).unwrap();
    let on_wlan0 = Networks::options(home, &c.interface(&wlan0).unwrap().options);
    assert_eq!(on_wlan0.down, Some(Rate::from_mbit(78)));
    assert_eq!(on_wlan0.up, Some(Rate::from_mbit(5)));
    let (office, _) = recognise(n, &eth0, &gateway("aa:bb:cc:dd:ee:03")).unwrap();
    let on_eth0 = Networks::options(office, &c.interface(&eth0).unwrap().options);
    assert_eq!(
        (on_eth0.down, on_eth0.up),
        (Some(Rate::from_mbit(50)), Some(Rate::from_mbit(40)))
    );
    assert!(recognise(n, &wlan0, &gateway("aa:bb:cc:dd:ee:03")).is_none());
    assert_eq!(n.unknown(&wlan0), UnknownNetwork::Interface);
}

#[test]
fn unknown_network_is_taken_from_the_interface_table() {
    let text = BASE.replace(
        "[interface.wlan0]\n",
        "[interface.wlan0]\nunknown_network = \"none\"\n",
    );
    let c = parse(&text).unwrap();
    let wlan0: IfName = "wlan0".parse().unwrap();
    assert_eq!(c.networks.unknown(&wlan0), UnknownNetwork::None);
    // The rest of the table is still the interface's shaping.
    assert_eq!(
        c.interface(&wlan0).unwrap().options.down,
        Some(Rate::from_mbit(20))
    );
    let bad = BASE.replace(
        "[interface.wlan0]\n",
        "[interface.wlan0]\nunknown_network = \"autorate\"\n",
    );
    assert_eq!(
        parse(&bad).unwrap_err().to_string(),
        "/etc/unbloat/unbloat.toml:2:19: [interface.wlan0]: key `unknown_network`: \"interface\" or \"none\" please"
    );
}

#[test]
fn bad_network_entries_name_the_line_and_the_table() {
    for (table, want) in [
        ("[network.home]\ngateway = \"aa:bb:cc:dd:ee\"\n", "10:11: [network.home]: key `gateway`: \"aa:bb:cc:dd:ee\" is not a MAC address"),
        ("[network.home]\ngateway = \"\"\n", "10:11: [network.home]: key `gateway`: empty"),
        ("[network.home]\ngateway = []\n", "10:11: [network.home]: key `gateway`: an empty list recognises nothing"),
        ("[network.home]\ngateway = [\"aa:bb:cc:dd:ee:01\", \"nope\"]\n", "10:33: [network.home]: key `gateway`: \"nope\" is not a MAC"),
        ("[network.home]\ngateway = 7\n", "10:11: [network.home]: key `gateway`: a MAC address in quotes"),
        ("[network.home]\ndown = \"10mbit\"\n", "9:10: [network.home]: no `gateway`, `ssid` or `bssid`"),
        ("[network.home]\nssid = \"\"\n", "10:8: [network.home]: key `ssid`: empty; write a Wi-Fi network's name in quotes"),
        ("[network.home]\nssid = []\n", "10:8: [network.home]: key `ssid`: an empty list recognises nothing"),
        ("[network.home]\nssid = [\"Home\", 5]\n", "10:17: [network.home]: key `ssid`: a Wi-Fi network's name in quotes, or a list of them"),
        ("[network.home]\nssid = \"0123456789abcdef0123456789abcdefX\"\n", "10:8: [network.home]: key `ssid`: \"0123456789abcdef0123456789abcdefX\" is 33 bytes; an SSID is at most 32"),
        ("[network.home]\nbssid = \"02:00:00:00:00\"\n", "10:9: [network.home]: key `bssid`: \"02:00:00:00:00\" is not a MAC address"),
        ("[network.home]\nbssid = \"ff:ff:ff:ff:ff:ff\"\n", "10:9: [network.home]: key `bssid`: ff:ff:ff:ff:ff:ff: a multicast or all-zero address is never a gateway's or an access point's"),
        ("[network.home]\nssid = \"Home\"\n[network.cafe]\nssid = [\"Cafe\", \"Home\"]\n", "12:17: [network.cafe]: ssid \"Home\" is [network.home]'s too, on wlan0"),
        ("[network.home]\nbssid = \"02:00:00:00:01:00\"\n[network.cafe]\nssid = \"Cafe\"\nbssid = \"02:00:00:00:01:00\"\n", "13:9: [network.cafe]: bssid 02:00:00:00:01:00 is [network.home]'s too, on wlan0"),
        ("[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\ninterface = \"\"\n", "11:13: [network.home]: key `interface`: the name of an interface"),
        ("[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\ninterface = \"wwan0\"\n", "11:13: [network.home]: interface wwan0: the file has no [interface.wwan0] table"),
        ("[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\ndown = \"78mbitz\"\n", "11:8: [network.home]: key `down`: "),
        ("[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\nfoo = 1\n", "11:1: [network.home]: key `foo`: unknown field `foo`"),
        ("[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\noverhead = 300\n", "9:10: [network.home]: on wlan0: --overhead 300: out of range"),
        ("[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\n[network.cafe]\ngateway = [\"aa:bb:cc:dd:ee:02\", \"AA:bb:cc:dd:ee:01\"]\n", "12:33: [network.cafe]: gateway aa:bb:cc:dd:ee:01 is [network.home]'s too, on wlan0"),
    ] {
        let m = parse(&format!("{BASE}\n{table}")).unwrap_err().to_string();
        let want = format!("/etc/unbloat/unbloat.toml:{want}");
        assert!(m.starts_with(&want), "{table}:\n{m}\nwants\n{want}");
    }
    let m = parse(&format!("network = 3\n{BASE}"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        m,
        "/etc/unbloat/unbloat.toml:1:11: network: expected tables, one per name ([network.NAME])"
    );
}

#[test]
fn wifi_networks_are_recognised_by_ssid_or_bssid_with_or_without_a_gateway() {
    let text = format!(
        "{BASE}\n[network.home]\nssid = \"Home\"\ngateway = \"aa:bb:cc:dd:ee:01\"\ndown = \"78mbit\"\n\n[network.hotspot]\nbssid = [\"02:00:00:00:01:00\", \"02:00:00:00:02:00\"]\ninterface = \"wlan0\"\ndown = \"8mbit\"\n"
    );
    let c = parse(&text).unwrap();
    let n = &c.networks;
    assert_eq!(n.tables[0].ssids, vec!["Home".parse().unwrap()]);
    assert_eq!(n.tables[1].bssids.len(), 2);
    let wlan0: IfName = "wlan0".parse().unwrap();
    let seen = |ssid: Option<&str>, bssid: Option<&str>| Sighting {
        gateway: None,
        ssid: ssid.map(|s| s.parse().unwrap()),
        bssid: bssid.map(|m| m.parse::<Mac>().unwrap()),
    };
    let name =
        |s: &Sighting| recognise(n, &wlan0, s).map(|(n, by)| (n.name.clone(), by.to_string()));
    assert_eq!(
        name(&seen(Some("Home"), Some("02:00:00:00:09:00"))),
        Some(("home".into(), "Wi-Fi \"Home\"".into()))
    );
    assert_eq!(
        name(&seen(Some("AndroidAP"), Some("02:00:00:00:02:00"))),
        Some(("hotspot".into(), "access point 02:00:00:00:02:00".into()))
    );
    assert_eq!(name(&seen(Some("Office"), None)), None);
}

#[test]
fn one_gateway_in_two_networks_for_different_interfaces_is_fine() {
    let text = format!(
        "{BASE}\n[network.home-wifi]\ngateway = \"aa:bb:cc:dd:ee:01\"\ninterface = \"wlan0\"\n[network.home-wired]\ngateway = \"aa:bb:cc:dd:ee:01\"\ninterface = \"eth0\"\n"
    );
    let c = parse(&text).unwrap();
    let seen = gateway("aa:bb:cc:dd:ee:01");
    let on =
        |i: &str| recognise(&c.networks, &i.parse().unwrap(), &seen).map(|(n, _)| n.name.clone());
    assert_eq!(on("wlan0").as_deref(), Some("home-wifi"));
    assert_eq!(on("eth0").as_deref(), Some("home-wired"));
}

/// The example's networks are commented out (the router build reads the same file and has no
/// networks): with the comment marks taken off, they load.
#[test]
fn the_shipped_examples_networks_load_once_uncommented() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/unbloat.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("# [interface.wlan0]")
        .expect("the example has networks");
    let uncommented: String = text[start..]
        .lines()
        .map(|l| l.strip_prefix("# ").unwrap_or(l.trim_start_matches('#')))
        .map(|l| format!("{l}\n"))
        .collect();
    let c = parse(&format!("{}{uncommented}", &text[..start])).unwrap();
    assert_eq!(c.networks.tables.len(), 2);
    let wlan0: IfName = "wlan0".parse().unwrap();
    assert_eq!(c.networks.unknown(&wlan0), UnknownNetwork::Interface);
    let (home, _) = recognise(&c.networks, &wlan0, &gateway("aa:bb:cc:dd:ee:ff")).unwrap();
    assert_eq!(
        Networks::options(home, &c.interface(&wlan0).unwrap().options).down,
        Some(Rate::from_mbit(78))
    );
    assert!(c.specs(&Default::default()).is_ok());
}
