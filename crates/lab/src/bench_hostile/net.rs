//! The hostile benchmark's network: three namespaces on this machine, removed on drop.
//!
//! ```text
//!  atk (10.53.1.2, and fd53:0:0:53XX::2 for XX = 00..ff: one address in
//!       |                                     each /64 of the /56 fd53:0:0:5300::/56)
//!  srv (10.53.1.1, fd53:0:0:1::1 | 10.53.2.1, fd53:0:0:2::1): the server under attack
//!       |
//!  cli (10.53.2.2, fd53:0:0:2::2): the legitimate client, an address of its own
//! ```
//!
//! No forwarding and no qdisc: the attack is on the server's sockets and threads, not the link.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use unbloat_testbed::netns::{run, Netns, NetnsError};

/// The attacker's IPv4 address.
pub const ATTACKER_V4: Ipv4Addr = Ipv4Addr::new(10, 53, 1, 2);
/// Where the attackers reach the server, and where the legitimate client does.
pub const SERVER_FOR_ATTACKER: Ipv4Addr = Ipv4Addr::new(10, 53, 1, 1);
pub const SERVER_FOR_ATTACKER_V6: Ipv6Addr = Ipv6Addr::new(0xfd53, 0, 0, 1, 0, 0, 0, 1);
pub const SERVER_FOR_CLIENT: Ipv4Addr = Ipv4Addr::new(10, 53, 2, 1);
/// The /56 the attacker holds: 256 /64s, one address in each.
pub const ATTACKER_GROUP: &str = "fd53:0:0:5300::/56";
pub const GROUP_ADDRESSES: u16 = 256;

/// The i-th address of the attacker's /56 (each in a /64 of its own).
pub fn group_address(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd53, 0, 0, 0x5300 | (i % GROUP_ADDRESSES), 0, 0, 0, 2)
}

/// The three namespaces, built.
pub struct Net {
    pub srv: Netns,
    pub atk: Netns,
    pub cli: Netns,
}

impl Net {
    pub fn new() -> Result<Net, NetnsError> {
        let id = std::process::id();
        let net = Net {
            srv: Netns::new(format!("ubh{id}s"))?,
            atk: Netns::new(format!("ubh{id}a"))?,
            cli: Netns::new(format!("ubh{id}c"))?,
        };
        let (srv, atk, cli) = (&net.srv.name, &net.atk.name, &net.cli.name);
        // Interface names at most 15 bytes: "uh" + pid (<= 7) + 2.
        let (sa, as_, sc, cs) = (
            format!("uh{id}sa"),
            format!("uh{id}as"),
            format!("uh{id}sc"),
            format!("uh{id}cs"),
        );
        run(&[
            "ip", "link", "add", &sa, "netns", srv, "type", "veth", "peer", "name", &as_, "netns",
            atk,
        ])?;
        run(&[
            "ip", "link", "add", &sc, "netns", srv, "type", "veth", "peer", "name", &cs, "netns",
            cli,
        ])?;
        let mut srv_lines = vec![
            format!("addr add 10.53.1.1/24 dev {sa}"),
            format!("addr add fd53:0:0:1::1/64 dev {sa} nodad"),
            format!("addr add 10.53.2.1/24 dev {sc}"),
            format!("addr add fd53:0:0:2::1/64 dev {sc} nodad"),
            format!("link set {sa} up"),
            format!("link set {sc} up"),
        ];
        srv_lines.push(format!("route add {ATTACKER_GROUP} dev {sa}"));
        let mut atk_lines = vec![
            format!("addr add {ATTACKER_V4}/24 dev {as_}"),
            format!("link set {as_} up"),
        ];
        for i in 0..GROUP_ADDRESSES {
            atk_lines.push(format!("addr add {}/64 dev {as_} nodad", group_address(i)));
        }
        atk_lines.push(format!("route add fd53:0:0:1::/64 dev {as_}"));
        let cli_lines = vec![
            format!("addr add 10.53.2.2/24 dev {cs}"),
            format!("addr add fd53:0:0:2::2/64 dev {cs} nodad"),
            format!("link set {cs} up"),
        ];
        for (ns, lines) in [(srv, srv_lines), (atk, atk_lines), (cli, cli_lines)] {
            batch(ns, &lines)?;
        }
        Ok(net)
    }
}

/// `ip -n NS -batch -` of `lines`, failing with ip's complaint.
fn batch(ns: &str, lines: &[String]) -> Result<(), NetnsError> {
    use unbloat_system::runner::{Cmd, Runner, SystemRunner};
    let io = |what: &str, e| NetnsError {
        context: format!("ip -n {ns} -batch: {what}"),
        source: e,
    };
    let cmd = Cmd::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(lines.join("\n") + "\n");
    let out = SystemRunner::from_env()
        .run(&cmd)
        .map_err(|e| io("starting", std::io::Error::other(e.to_string())))?;
    if !out.success() {
        return Err(io(
            "failed",
            std::io::Error::other(out.stderr.trim().to_string()),
        ));
    }
    Ok(())
}

/// Where the attackers come from: one IPv4 address, or every /64 of one IPv6 /56 in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    OneAddress,
    OneSlash56,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::OneAddress => "one address",
            Source::OneSlash56 => "one /56",
        }
    }

    /// The source of the n-th connection, and the server's address it goes to.
    pub fn pick(self, n: usize) -> (IpAddr, IpAddr) {
        match self {
            Source::OneAddress => (ATTACKER_V4.into(), SERVER_FOR_ATTACKER.into()),
            Source::OneSlash56 => (
                group_address((n % usize::from(GROUP_ADDRESSES)) as u16).into(),
                SERVER_FOR_ATTACKER_V6.into(),
            ),
        }
    }
}
