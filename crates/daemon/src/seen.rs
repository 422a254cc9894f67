//! Which network an interface is on, and why (issue 56, feature `networks`): the daemon's pure
//! decision from the gateway the kernel reports, and the record status, the page and the
//! metrics show. It imports nothing of the daemon's, so the keeper, the control socket and the
//! metrics can all import it.
//!
//! What a laptop can rely on: a known gateway MAC, SSID or BSSID gets its network's shaping (the
//! most particular key first: [`recognise`]); a resolved gateway that no table knows gets the
//! interface's `unknown_network` choice. While the interface has no gateway (suspended, between
//! two networks) or the gateway's MAC is not resolved yet, and no Wi-Fi key recognises the
//! network, what it had stays: a resume on the same network changes nothing, and a new one is
//! recognised as soon as the kernel has its gateway's MAC (a neighbour event wakes the daemon
//! then) or, on Wi-Fi, as soon as it is associated with a known SSID or access point.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use unbloat_shaper::network::{recognise, By, Networks, Sighting, UnknownNetwork};
use unbloat_system::rtnl::gateway::Gateway;
use unbloat_system::wifi::Association;
use unbloat_units::IfName;

/// What shaping an interface gets on the network it is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shaping {
    /// Its `[network.NAME]` table merged over the interface's.
    Network,
    /// The interface's own table (with autorate when it has an `[autorate.NAME]` table).
    Interface,
    /// None: an unknown network, and `unknown_network = "none"`.
    None,
}

/// An interface's network as the daemon recognised it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// The `[network.NAME]` it is on; `None`: an unknown network (or none seen yet).
    pub network: Option<String>,
    pub shaping: Shaping,
    /// The gateway the kernel reports now, and its MAC when resolved.
    pub gateway: Option<IpAddr>,
    pub mac: Option<String>,
    /// On Wi-Fi, the network's name and the access point's MAC it is associated with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bssid: Option<String>,
    /// Why, in words: "gateway 192.168.1.1 is aa:bb:cc:dd:ee:ff, [network.home]'s".
    pub why: String,
}

impl Seen {
    /// Whether `other` calls for other shaping than `self`.
    pub fn differs(&self, other: &Seen) -> bool {
        (&self.network, self.shaping) != (&other.network, other.shaping)
    }

    /// The network in a few words, for status and the log.
    pub fn describe(&self) -> String {
        let what = match (&self.network, self.shaping) {
            (Some(n), _) => format!("network {n}"),
            (None, Shaping::Interface) => "an unknown network: its own table".into(),
            (None, _) => "an unknown network: not shaped (unknown_network = \"none\")".into(),
        };
        format!("{what} ({})", self.why)
    }
}

/// What `iface` is on, given the gateway the kernel reports (`None`: no route through one), its
/// Wi-Fi association (`None`: not Wi-Fi, or not associated) and what it was on before.
pub fn decide(
    networks: &Networks,
    iface: &IfName,
    gateway: Option<Gateway>,
    wifi: Option<Association>,
    before: Option<&Seen>,
) -> Seen {
    let addr = gateway.map(|g| g.addr);
    let mac = gateway.and_then(|g| g.mac);
    let (ssid, bssid) = wifi.map_or((None, None), |w| (w.ssid, w.bssid));
    let seen = |network: Option<String>, shaping: Shaping, why: String| Seen {
        network,
        shaping,
        gateway: addr,
        mac: mac.map(|m| m.to_string()),
        ssid: ssid.as_ref().map(|s| s.to_string()),
        bssid: bssid.map(|b| b.to_string()),
        why,
    };
    let unknown_shaping = match networks.unknown(iface) {
        UnknownNetwork::Interface => Shaping::Interface,
        UnknownNetwork::None => Shaping::None,
    };
    let wifi_words = ssid.as_ref().map(|s| format!("Wi-Fi \"{s}\""));
    let sighting = Sighting {
        gateway: mac,
        ssid: ssid.clone(),
        bssid,
    };
    if let Some((n, by)) = recognise(networks, iface, &sighting) {
        let key = match (&by, addr) {
            (By::Gateway(m), Some(a)) => format!("gateway {a} is {m}"),
            (By::Bssid(b), _) => match &wifi_words {
                Some(w) => format!("{w}, access point {b}"),
                None => format!("access point {b}"),
            },
            _ => by.to_string(),
        };
        let why = format!("{key}, [network.{}]'s", n.name);
        return seen(Some(n.name.clone()), Shaping::Network, why);
    }
    let on_wifi = wifi_words.map(|w| format!("{w}, ")).unwrap_or_default();
    match (addr, mac) {
        (Some(a), Some(m)) => seen(
            None,
            unknown_shaping,
            format!("{on_wifi}gateway {a} is {m}, no network's"),
        ),
        _ => {
            let why = match addr {
                Some(a) => format!("{on_wifi}gateway {a}, its MAC not resolved yet"),
                None => format!("{on_wifi}no gateway"),
            };
            match before {
                // Suspended, roaming, or between networks: no reason to change anything yet.
                Some(b) => Seen {
                    why: format!("{why}; kept"),
                    ..seen(b.network.clone(), b.shaping, String::new())
                },
                None => seen(None, unknown_shaping, why),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use unbloat_shaper::config::ConfigFile;
    use unbloat_shaper::network::Mac;

    fn networks(unknown: &str) -> Networks {
        let text = format!(
            "[interface.wlan0]\ndown = \"20mbit\"\nup = \"5mbit\"\nunknown_network = \"{unknown}\"\n\n[network.home]\ngateway = \"aa:bb:cc:dd:ee:01\"\ndown = \"78mbit\"\n"
        );
        ConfigFile::parse(&text, Path::new("t.toml"))
            .unwrap()
            .networks
    }

    fn wifi(ssid: &str, bssid: &str) -> Option<Association> {
        Some(Association {
            ssid: Some(ssid.parse().unwrap()),
            bssid: Some(bssid.parse().unwrap()),
        })
    }

    fn gw(addr: &str, mac: Option<&str>) -> Option<Gateway> {
        Some(Gateway {
            addr: addr.parse().unwrap(),
            mac: mac.map(|m| m.parse::<Mac>().unwrap()),
        })
    }

    #[test]
    fn a_known_gateway_is_its_network_and_another_the_fallback() {
        let n = networks("interface");
        let wlan0: IfName = "wlan0".parse().unwrap();
        let home = decide(
            &n,
            &wlan0,
            gw("192.168.1.1", Some("aa:bb:cc:dd:ee:01")),
            None,
            None,
        );
        assert_eq!(home.network.as_deref(), Some("home"));
        assert_eq!(home.shaping, Shaping::Network);
        assert_eq!(
            home.describe(),
            "network home (gateway 192.168.1.1 is aa:bb:cc:dd:ee:01, [network.home]'s)"
        );
        let cafe = decide(
            &n,
            &wlan0,
            gw("10.0.0.1", Some("aa:bb:cc:dd:ee:09")),
            None,
            Some(&home),
        );
        assert_eq!(
            (cafe.network.as_deref(), cafe.shaping),
            (None, Shaping::Interface)
        );
        assert!(cafe.differs(&home));
        let none = networks("none");
        let cafe = decide(
            &none,
            &wlan0,
            gw("10.0.0.1", Some("aa:bb:cc:dd:ee:09")),
            None,
            None,
        );
        assert_eq!(cafe.shaping, Shaping::None);
    }

    #[test]
    fn no_gateway_or_an_unresolved_one_keeps_what_it_had() {
        let n = networks("none");
        let wlan0: IfName = "wlan0".parse().unwrap();
        let home = decide(
            &n,
            &wlan0,
            gw("192.168.1.1", Some("aa:bb:cc:dd:ee:01")),
            None,
            None,
        );
        let asleep = decide(&n, &wlan0, None, None, Some(&home));
        assert!(!asleep.differs(&home));
        assert_eq!(asleep.why, "no gateway; kept");
        let waking = decide(&n, &wlan0, gw("192.168.1.1", None), None, Some(&asleep));
        assert!(!waking.differs(&home));
        // At the daemon's start there is nothing to keep: the fallback.
        let first = decide(&n, &wlan0, gw("192.168.1.1", None), None, None);
        assert_eq!((first.network, first.shaping), (None, Shaping::None));
    }

    #[test]
    fn wifi_is_recognised_before_dhcp_and_an_unknown_ssid_waits_for_the_gateway() {
        let text = "[interface.wlan0]\ndown = \"20mbit\"\nup = \"5mbit\"\n\n[network.home]\nssid = \"Home\"\ndown = \"78mbit\"\n\n[network.phone]\nbssid = \"02:00:00:00:07:00\"\ndown = \"8mbit\"\n";
        let n = ConfigFile::parse(text, Path::new("t.toml"))
            .unwrap()
            .networks;
        let wlan0: IfName = "wlan0".parse().unwrap();
        // Associated, no address yet: the SSID alone says home.
        let home = decide(&n, &wlan0, None, wifi("Home", "02:00:00:00:01:00"), None);
        assert_eq!(home.network.as_deref(), Some("home"));
        assert_eq!(home.why, "Wi-Fi \"Home\", [network.home]'s");
        assert_eq!(home.ssid.as_deref(), Some("Home"));
        assert_eq!(home.bssid.as_deref(), Some("02:00:00:00:01:00"));
        // The phone's hotspot by its access point, whatever it calls itself today.
        let phone = decide(
            &n,
            &wlan0,
            gw("172.20.10.1", Some("02:00:00:00:07:00")),
            wifi("Pixel_1234", "02:00:00:00:07:00"),
            Some(&home),
        );
        assert_eq!(phone.network.as_deref(), Some("phone"));
        assert_eq!(
            phone.why,
            "Wi-Fi \"Pixel_1234\", access point 02:00:00:00:07:00, [network.phone]'s"
        );
        // A café: unknown SSID, the gateway not resolved yet: kept until it is.
        let arriving = decide(
            &n,
            &wlan0,
            None,
            wifi("Cafe", "02:00:00:00:09:00"),
            Some(&phone),
        );
        assert!(!arriving.differs(&phone));
        assert_eq!(arriving.why, "Wi-Fi \"Cafe\", no gateway; kept");
        let cafe = decide(
            &n,
            &wlan0,
            gw("10.0.0.1", Some("aa:bb:cc:dd:ee:09")),
            wifi("Cafe", "02:00:00:00:09:00"),
            Some(&arriving),
        );
        assert_eq!((cafe.network, cafe.shaping), (None, Shaping::Interface));
        assert_eq!(
            cafe.why,
            "Wi-Fi \"Cafe\", gateway 10.0.0.1 is aa:bb:cc:dd:ee:09, no network's"
        );
    }
}
