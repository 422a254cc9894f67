//! Who a peer is, and how much of a server each peer may hold (issue 53): the accounting behind
//! the per-client caps of `unbloat serve` and of the daemon's page and metrics servers. Pure (a
//! count per key); the servers decide what a refusal looks like on their wire.
//!
//! A client is an IPv4 address, or an IPv6 /64: one host, or one home network behind one
//! router, which can take as many addresses of its /64 as it likes. A /64 is cheap too (a home
//! gets a /56 or a /48 from its ISP), so a wider cap holds for a whole IPv6 /56: one customer's
//! networks together never take everything. An IPv4-mapped IPv6 address (a dual-stack socket's
//! view of an IPv4 peer) is that IPv4 address. IPv4 has no wider group: one IPv4 address is all
//! a household usually has, and a /24 is many strangers.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// An IPv6 client's prefix length, and the group's.
const CLIENT_V6: u32 = 64;
const GROUP_V6: u32 = 56;

/// What one server allows at once: in all, from one client, from one IPv6 /56.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub total: usize,
    pub per_client: usize,
    pub per_group: usize,
}

/// Why one more is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The server holds `Caps::total`.
    Full { limit: usize },
    /// This client (its name) holds `Caps::per_client`.
    Client { name: String, limit: usize },
    /// This client's /56 holds `Caps::per_group`.
    Group { name: String, limit: usize },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Full { limit } => write!(f, "this server holds its {limit} at once"),
            Refusal::Client { name, limit } | Refusal::Group { name, limit } => {
                write!(f, "{name} already holds {limit} here")
            }
        }
    }
}

/// The client an address belongs to: an IPv4 address itself, an IPv6 address its /64.
pub fn client_key(ip: IpAddr) -> IpAddr {
    masked(ip, CLIENT_V6)
}

/// The IPv6 /56 an address belongs to; `None` for IPv4.
pub fn group_key(ip: IpAddr) -> Option<IpAddr> {
    match masked(ip, GROUP_V6) {
        IpAddr::V4(_) => None,
        v6 => Some(v6),
    }
}

/// How a client is named in a refusal: `192.0.2.7`, `2001:db8:1:2::/64`.
pub fn client_name(key: IpAddr) -> String {
    name(key, CLIENT_V6)
}

fn name(key: IpAddr, bits: u32) -> String {
    match key {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("{v6}/{bits}"),
    }
}

fn masked(ip: IpAddr, bits: u32) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (u128::MAX << (128 - bits)))),
        },
        v4 => v4,
    }
}

/// A client or a group: counted apart, since a /56 and a /64 can be the same address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Client(IpAddr),
    Group(IpAddr),
}

/// How many each client and group holds now. A list, not a hash map: it holds one entry per
/// client or group that holds something (a few dozen), and the router build is counted in bytes.
#[derive(Debug, Default)]
pub struct Tally {
    held: Vec<(Key, usize)>,
    total: usize,
}

impl Tally {
    /// Counts one more for `ip` when `caps` allow it; otherwise changes nothing and says why.
    pub fn admit(&mut self, ip: IpAddr, caps: &Caps) -> Result<(), Refusal> {
        if self.total >= caps.total {
            return Err(Refusal::Full { limit: caps.total });
        }
        let client = client_key(ip);
        if self.count(Key::Client(client)) >= caps.per_client {
            return Err(Refusal::Client {
                name: client_name(client),
                limit: caps.per_client,
            });
        }
        let group = group_key(ip);
        if let Some(group) = group {
            if self.count(Key::Group(group)) >= caps.per_group {
                return Err(Refusal::Group {
                    name: name(group, GROUP_V6),
                    limit: caps.per_group,
                });
            }
            self.add(Key::Group(group));
        }
        self.add(Key::Client(client));
        self.total += 1;
        Ok(())
    }

    /// Counts one fewer for `ip` (one [`Tally::admit`]ted before).
    pub fn release(&mut self, ip: IpAddr) {
        let mut keys = vec![Key::Client(client_key(ip))];
        keys.extend(group_key(ip).map(Key::Group));
        for key in keys {
            if let Some(i) = self.held.iter().position(|(k, _)| *k == key) {
                self.held[i].1 -= 1;
                // Gone at zero: the list holds only who holds something now.
                if self.held[i].1 == 0 {
                    self.held.swap_remove(i);
                }
            }
        }
        self.total = self.total.saturating_sub(1);
    }

    /// What `ip`'s client holds now.
    pub fn of_client(&self, ip: IpAddr) -> usize {
        self.count(Key::Client(client_key(ip)))
    }

    pub fn total(&self) -> usize {
        self.total
    }

    fn count(&self, key: Key) -> usize {
        self.held
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, n)| *n)
    }

    fn add(&mut self, key: Key) {
        match self.held.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => self.held.push((key, 1)),
        }
    }
}

/// A [`Tally`] shared by a server's threads.
#[derive(Debug, Clone)]
pub struct Shared {
    tally: Arc<Mutex<Tally>>,
    caps: Caps,
}

/// One admitted, counted until dropped (its thread ends, or unwinds).
#[derive(Debug)]
pub struct Held {
    tally: Arc<Mutex<Tally>>,
    ip: IpAddr,
}

impl Shared {
    pub fn new(caps: Caps) -> Shared {
        Shared {
            tally: Arc::default(),
            caps,
        }
    }

    pub fn admit(&self, ip: IpAddr) -> Result<Held, Refusal> {
        lock(&self.tally).admit(ip, &self.caps)?;
        Ok(Held {
            tally: self.tally.clone(),
            ip,
        })
    }

    pub fn total(&self) -> usize {
        lock(&self.tally).total()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        lock(&self.tally).release(self.ip);
    }
}

fn lock(m: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    // The counts stay right through a panic elsewhere: each change is one statement.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    const CAPS: Caps = Caps {
        total: 6,
        per_client: 2,
        per_group: 3,
    };

    #[test]
    fn a_v6_client_is_its_64_its_group_the_56_and_a_mapped_v4_the_v4() {
        let (a, b, c) = (
            ip("2001:db8:1:2:aaaa::1"),
            ip("2001:db8:1:2:bbbb::9"),
            ip("2001:db8:1:3::1"),
        );
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(client_key(a), client_key(c));
        assert_eq!(group_key(a), group_key(c));
        assert_ne!(group_key(a), group_key(ip("2001:db8:1:100::1")));
        assert_eq!(client_name(client_key(a)), "2001:db8:1:2::/64");
        assert_eq!(client_key(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(group_key(ip("192.0.2.7")), None);
    }

    #[test]
    fn a_client_a_56_and_the_whole_are_each_capped_and_freed() {
        let mut t = Tally::default();
        let one = ip("2001:db8:0:1::1");
        assert_eq!(t.admit(one, &CAPS), Ok(()));
        assert_eq!(t.admit(ip("2001:db8:0:1::2"), &CAPS), Ok(()));
        // A third from the same /64, by another address: refused, and nothing counted.
        let refused = t.admit(ip("2001:db8:0:1::3"), &CAPS).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "2001:db8:0:1::/64 already holds 2 here"
        );
        assert_eq!((t.total(), t.of_client(one)), (2, 2));
        // Another /64 of the same /56 gets one more, then the /56 is full.
        assert_eq!(t.admit(ip("2001:db8:0:2::1"), &CAPS), Ok(()));
        let refused = t.admit(ip("2001:db8:0:3::1"), &CAPS).unwrap_err();
        assert_eq!(refused.to_string(), "2001:db8::/56 already holds 3 here");
        // IPv4 clients are addresses, with no group; the whole is capped too.
        for a in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
            assert_eq!(t.admit(ip(a), &CAPS), Ok(()), "{a}");
        }
        assert_eq!(
            t.admit(ip("192.0.2.4"), &CAPS),
            Err(Refusal::Full { limit: 6 })
        );
        t.release(one);
        assert_eq!(t.of_client(one), 1);
        assert_eq!(t.admit(ip("2001:db8:0:3::1"), &CAPS), Ok(()));
    }

    #[test]
    fn held_counts_until_dropped() {
        let shared = Shared::new(CAPS);
        let a = shared.admit(ip("127.0.0.2")).expect("first");
        let _b = shared.admit(ip("127.0.0.2")).expect("second");
        assert!(shared.admit(ip("127.0.0.2")).is_err());
        assert!(shared.admit(ip("127.0.0.3")).is_ok());
        drop(a);
        assert!(shared.admit(ip("127.0.0.2")).is_ok());
        assert_eq!(shared.total(), 1);
    }
}
