//! Networks: shaping that follows the network behind an interface (issue 56). A laptop's
//! `wlan0` is home's DSL in the evening and the office's fibre by day; each `[network.NAME]`
//! table says how to recognise one and the shaping it gets there.
//!
//! ```toml
//! [interface.wlan0]
//! down = "20mbit"               # what an unknown network gets (with [autorate.wlan0]: autorate)
//! up = "5mbit"
//! unknown_network = "interface" # or "none": leave an unknown network unshaped
//!
//! [network.home]
//! gateway = "aa:bb:cc:dd:ee:ff" # the default gateway's MAC; or a list of them
//! ssid = "Home"                 # and/or the Wi-Fi network's name; or a list of them
//! bssid = "aa:bb:cc:dd:ee:01"   # and/or its access points' MACs; or a list of them
//! interface = "wlan0"           # optional: without it, for every interface the file shapes
//! down = "78mbit"               # any key of an interface table, merged over that table
//! up = "19950kbit"
//! ```
//!
//! A network is recognised by what the machine sees without asking anyone: its default
//! gateway's MAC address (the neighbour table: the same router answers at home whatever address
//! DHCP hands out, and a café's is another box), and on Wi-Fi the SSID and the access point's
//! BSSID it is associated with (nl80211). A table needs at least one of the three. When
//! several tables match, the most particular key wins: a BSSID (one access point) over a
//! gateway (one router) over an SSID (a name that many places share: "eduroam", a phone
//! maker's default).
//!
//! Callers can rely on: [`recognise`] is pure (an interface and what is seen of its network
//! in, the network and the key that matched, or none, out); every network in a loaded
//! [`Networks`] names an interface the file shapes, carries options
//! [`crate::spec::Spec::new`] accepts, and no two networks for the same interface share a
//! gateway, an SSID or a BSSID, so recognition is never ambiguous. The file's own reading is
//! [`read`]; [`save`] writes a tune run into it (`unbloat tune --save-as`).

pub mod read;
pub mod save;
pub mod ssid;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use unbloat_units::IfName;

use crate::clip::clip;
use crate::options::ShapeOptions;
pub use ssid::Ssid;

/// An Ethernet (EUI-48) address, as `ip neigh` prints it: `aa:bb:cc:dd:ee:ff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl FromStr for Mac {
    type Err = String;

    /// Six pairs of hex digits separated by `:`, either case. A multicast or all-zero address
    /// cannot be a gateway's (IEEE 802: the group bit is the first octet's lowest), so it is a
    /// mistake, not a network.
    fn from_str(s: &str) -> Result<Mac, String> {
        let bad = || {
            format!(
                "{:?} is not a MAC address; write six pairs of hex digits, e.g. \"aa:bb:cc:dd:ee:ff\" (`ip neigh` shows the gateway's)",
                clip(s)
            )
        };
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(bad());
        }
        let mut mac = [0u8; 6];
        for (byte, part) in mac.iter_mut().zip(parts) {
            if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if mac == [0; 6] || mac[0] & 1 == 1 {
            return Err(format!(
                "{s}: a multicast or all-zero address is never a gateway's or an access point's; is it a typo?"
            ));
        }
        Ok(Mac(mac))
    }
}

impl Serialize for Mac {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Mac {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Mac, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What an interface gets on a network no table recognises.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownNetwork {
    /// Its own `[interface.NAME]` table: fixed rates, or autorate within bounds when it has an
    /// `[autorate.NAME]` table.
    #[default]
    Interface,
    /// No shaping at all.
    None,
}

impl UnknownNetwork {
    pub const WORDS: &'static str = "\"interface\" or \"none\"";
}

/// One `[network.NAME]` table, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkConfig {
    pub name: String,
    /// Where the table's name is, for messages.
    pub line: usize,
    /// Its gateways' MACs, its Wi-Fi SSIDs and its access points' BSSIDs: any of them
    /// recognises it; at least one of the three lists has one.
    pub gateways: Vec<Mac>,
    pub ssids: Vec<Ssid>,
    pub bssids: Vec<Mac>,
    /// The interface it is for; `None`: every interface the file shapes.
    pub interface: Option<IfName>,
    /// Its own keys only; [`Networks::options`] merges them over an interface's table.
    pub table: ShapeOptions,
}

impl NetworkConfig {
    pub fn is_for(&self, iface: &IfName) -> bool {
        self.interface.as_ref().is_none_or(|i| i == iface)
    }
}

/// The file's networks and what each interface gets on an unknown one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Networks {
    /// In the order of the file.
    pub tables: Vec<NetworkConfig>,
    /// Per interface that says `unknown_network`; the others get [`UnknownNetwork::Interface`].
    pub unknown: Vec<(IfName, UnknownNetwork)>,
}

impl Networks {
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// The networks `iface` can be on.
    pub fn for_iface<'a>(&'a self, iface: &'a IfName) -> impl Iterator<Item = &'a NetworkConfig> {
        self.tables.iter().filter(move |n| n.is_for(iface))
    }

    /// What `iface` gets on an unknown network.
    pub fn unknown(&self, iface: &IfName) -> UnknownNetwork {
        self.unknown
            .iter()
            .find(|(i, _)| i == iface)
            .map_or(UnknownNetwork::Interface, |(_, u)| *u)
    }

    /// The options of `network` on an interface whose own (merged over `[defaults]`) are
    /// `iface`: the network's keys win.
    pub fn options(network: &NetworkConfig, iface: &ShapeOptions) -> ShapeOptions {
        ShapeOptions::merge(iface, &network.table)
    }
}

/// What the machine sees of the network behind an interface: its gateway's MAC once resolved,
/// and on Wi-Fi the SSID and BSSID it is associated with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sighting {
    pub gateway: Option<Mac>,
    pub ssid: Option<Ssid>,
    pub bssid: Option<Mac>,
}

/// The key that recognised a network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum By {
    Bssid(Mac),
    Gateway(Mac),
    Ssid(Ssid),
}

impl fmt::Display for By {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            By::Bssid(m) => write!(f, "access point {m}"),
            By::Gateway(m) => write!(f, "gateway {m}"),
            By::Ssid(s) => write!(f, "Wi-Fi \"{s}\""),
        }
    }
}

/// The network `iface` is on, seen as `seen`: the one table for this interface that lists its
/// BSSID, else its gateway, else its SSID (the most particular first), with the key that
/// matched; `None`: unknown. Pure: the caller reads what is seen.
pub fn recognise<'a>(
    networks: &'a Networks,
    iface: &IfName,
    seen: &Sighting,
) -> Option<(&'a NetworkConfig, By)> {
    let mine = || networks.tables.iter().filter(|n| n.is_for(iface));
    let by_bssid = seen.bssid.and_then(|b| {
        mine()
            .find(|n| n.bssids.contains(&b))
            .map(|n| (n, By::Bssid(b)))
    });
    let by_gateway = || {
        seen.gateway.and_then(|g| {
            mine()
                .find(|n| n.gateways.contains(&g))
                .map(|n| (n, By::Gateway(g)))
        })
    };
    let by_ssid = || {
        seen.ssid.as_ref().and_then(|s| {
            mine()
                .find(|n| n.ssids.contains(s))
                .map(|n| (n, By::Ssid(s.clone())))
        })
    };
    by_bssid.or_else(by_gateway).or_else(by_ssid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(s: &str) -> Mac {
        s.parse().unwrap()
    }

    fn net(name: &str, gateways: &[&str], iface: Option<&str>) -> NetworkConfig {
        NetworkConfig {
            name: name.into(),
            line: 1,
            gateways: gateways.iter().map(|g| mac(g)).collect(),
            ssids: vec![],
            bssids: vec![],
            interface: iface.map(|i| i.parse().unwrap()),
            table: ShapeOptions::default(),
        }
    }

    fn gateway(m: &str) -> Sighting {
        Sighting {
            gateway: Some(mac(m)),
            ..Sighting::default()
        }
    }

    #[test]
    fn macs_parse_in_either_case_and_print_as_ip_neigh_does() {
        assert_eq!(mac("AA:bb:0C:dd:ee:0f").to_string(), "aa:bb:0c:dd:ee:0f");
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa-bb-cc-dd-ee-ff",
            "aa:bb:cc:dd:ee:f",
            "aa:bb:cc:dd:ee:fg",
            "aa:bb:cc:dd:ee:+f",
            "aabb:cc:dd:ee:ff:",
        ] {
            let e = bad.parse::<Mac>().unwrap_err();
            assert!(e.contains("is not a MAC address"), "{bad}: {e}");
        }
        for never in [
            "00:00:00:00:00:00",
            "01:00:5e:00:00:01",
            "ff:ff:ff:ff:ff:ff",
        ] {
            let e = never.parse::<Mac>().unwrap_err();
            assert!(e.contains("never a gateway's"), "{never}: {e}");
        }
    }

    #[test]
    fn a_gateway_is_recognised_only_on_the_interfaces_its_network_is_for() {
        let networks = Networks {
            tables: vec![
                net("home", &["aa:bb:cc:dd:ee:01", "aa:bb:cc:dd:ee:02"], None),
                net("office", &["aa:bb:cc:dd:ee:03"], Some("eth0")),
            ],
            unknown: vec![],
        };
        let wlan0: IfName = "wlan0".parse().unwrap();
        let eth0: IfName = "eth0".parse().unwrap();
        let name = |i, m| recognise(&networks, i, &gateway(m)).map(|(n, _)| n.name.as_str());
        assert_eq!(name(&wlan0, "aa:bb:cc:dd:ee:02"), Some("home"));
        assert_eq!(name(&eth0, "aa:bb:cc:dd:ee:01"), Some("home"));
        assert_eq!(name(&eth0, "aa:bb:cc:dd:ee:03"), Some("office"));
        // The office's gateway seen through wlan0 is not the office network's interface.
        assert_eq!(name(&wlan0, "aa:bb:cc:dd:ee:03"), None);
        assert_eq!(name(&wlan0, "aa:bb:cc:dd:ee:04"), None);
    }

    #[test]
    fn a_bssid_wins_over_a_gateway_and_a_gateway_over_an_ssid() {
        let mut eduroam = net("eduroam", &[], None);
        eduroam.ssids = vec!["eduroam".parse().unwrap()];
        let mut library = net("library", &[], None);
        library.bssids = vec![mac("02:00:00:00:01:00")];
        let campus = net("campus", &["aa:bb:cc:dd:ee:01"], None);
        let networks = Networks {
            tables: vec![eduroam, library, campus],
            unknown: vec![],
        };
        let wlan0: IfName = "wlan0".parse().unwrap();
        let at = |gateway: Option<&str>, ssid: Option<&str>, bssid: Option<&str>| {
            let seen = Sighting {
                gateway: gateway.map(mac),
                ssid: ssid.map(|s| s.parse().unwrap()),
                bssid: bssid.map(mac),
            };
            recognise(&networks, &wlan0, &seen).map(|(n, by)| (n.name.clone(), by.to_string()))
        };
        let all = at(
            Some("aa:bb:cc:dd:ee:01"),
            Some("eduroam"),
            Some("02:00:00:00:01:00"),
        );
        assert_eq!(
            all,
            Some(("library".into(), "access point 02:00:00:00:01:00".into()))
        );
        let roamed = at(
            Some("aa:bb:cc:dd:ee:01"),
            Some("eduroam"),
            Some("02:00:00:00:02:00"),
        );
        assert_eq!(
            roamed,
            Some(("campus".into(), "gateway aa:bb:cc:dd:ee:01".into()))
        );
        let elsewhere = at(Some("aa:bb:cc:dd:ee:09"), Some("eduroam"), None);
        assert_eq!(
            elsewhere,
            Some(("eduroam".into(), "Wi-Fi \"eduroam\"".into()))
        );
        // Before DHCP has a gateway: the SSID alone.
        assert_eq!(at(None, Some("eduroam"), None).unwrap().0, "eduroam");
        assert_eq!(at(None, Some("Eduroam"), None), None);
        assert_eq!(at(None, None, None), None);
    }

    #[test]
    fn an_interface_gets_its_own_table_on_an_unknown_network_unless_it_says_none() {
        let wlan0: IfName = "wlan0".parse().unwrap();
        let eth0: IfName = "eth0".parse().unwrap();
        let networks = Networks {
            tables: vec![],
            unknown: vec![(wlan0.clone(), UnknownNetwork::None)],
        };
        assert_eq!(networks.unknown(&wlan0), UnknownNetwork::None);
        assert_eq!(networks.unknown(&eth0), UnknownNetwork::Interface);
    }
}

#[cfg(test)]
#[path = "network/config_tests.rs"]
mod config_tests;
