//! Which network an interface is on, and why (issue 56, feature `networks`): the daemon's pure
//! decision from the gateway the kernel reports, and the record status, the page and the
//! metrics show. It imports nothing of the daemon's, so the keeper, the control socket and the
//! metrics can all import it.
//!
//! What a laptop can rely on: a known gateway MAC gets its network's shaping; any other gets
//! the interface's `unknown_network` choice. While the interface has no gateway (suspended,
//! between two networks, Wi-Fi roaming) or the gateway's MAC is not resolved yet, what it had
//! stays: a resume on the same network changes nothing, and a new one is recognised as soon as
//! the kernel has its gateway's MAC (a neighbour event wakes the daemon then).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use unbloat_shaper::network::{recognise, Networks, UnknownNetwork};
use unbloat_system::rtnl::gateway::Gateway;
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

/// What `iface` is on, given the gateway the kernel reports (`None`: no route through one) and
/// what it was on before.
pub fn decide(
    networks: &Networks,
    iface: &IfName,
    gateway: Option<Gateway>,
    before: Option<&Seen>,
) -> Seen {
    let addr = gateway.map(|g| g.addr);
    let mac = gateway.and_then(|g| g.mac);
    let unknown = |why: String| Seen {
        network: None,
        shaping: match networks.unknown(iface) {
            UnknownNetwork::Interface => Shaping::Interface,
            UnknownNetwork::None => Shaping::None,
        },
        gateway: addr,
        mac: mac.map(|m| m.to_string()),
        why,
    };
    match (addr, mac) {
        (Some(a), Some(m)) => match recognise(networks, iface, &m) {
            Some(n) => Seen {
                network: Some(n.name.clone()),
                shaping: Shaping::Network,
                gateway: addr,
                mac: Some(m.to_string()),
                why: format!("gateway {a} is {m}, [network.{}]'s", n.name),
            },
            None => unknown(format!("gateway {a} is {m}, no network's")),
        },
        _ => {
            let why = match addr {
                Some(a) => format!("gateway {a}, its MAC not resolved yet"),
                None => "no gateway".to_string(),
            };
            match before {
                // Suspended, roaming, or between networks: no reason to change anything yet.
                Some(b) => Seen {
                    gateway: addr,
                    mac: None,
                    why: format!("{why}; kept"),
                    ..b.clone()
                },
                None => unknown(why),
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
        );
        let asleep = decide(&n, &wlan0, None, Some(&home));
        assert!(!asleep.differs(&home));
        assert_eq!(asleep.why, "no gateway; kept");
        let waking = decide(&n, &wlan0, gw("192.168.1.1", None), Some(&asleep));
        assert!(!waking.differs(&home));
        // At the daemon's start there is nothing to keep: the fallback.
        let first = decide(&n, &wlan0, gw("192.168.1.1", None), None);
        assert_eq!((first.network, first.shaping), (None, Shaping::None));
    }
}
