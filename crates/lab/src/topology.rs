//! The emulated access network of one lab run, in network namespaces, built from a link profile.
//!
//! ```text
//!  lan            rtr                    mdm                      inet                 srv
//! [eth0]--[lan0  ROUTER  wan0]--[cpe0  MODEM  isp0]--[mdm0  INTERNET  srv0]--[eth0]
//!  10.77.1.0/24           10.77.2.0/24          10.77.3.0/24             10.77.4.0/24
//!                 strategy on wan0:     bottleneck, each way:    netem delay RTT/2
//!                 egress + ingress      HTB at the link rate     each way (+ jitter,
//!                 (IFB ifb4wan0)        + deep FIFO + stab       loss)
//! ```
//!
//! - The **modem** is the bottleneck: on `cpe0` (towards the user: the downlink) and `isp0`
//!   (towards the internet: the uplink), an HTB class at the link's rate with a drop-tail FIFO
//!   leaf that serialises (`netem limit 1000 rate R`, or `bfifo`), under a `stab` that carries the link's framing
//!   (`linklayer atm`, overhead, mpu) so that ATM cell padding, PTM and DOCSIS overhead cost what
//!   they cost on the real line. A stab adds to the length Linux counts, which on a veth includes
//!   the 14-byte Ethernet header, so the stab's overhead is the profile's (relative to the IP
//!   packet) minus 14. A stab cannot express PTM's 64b/65b encoding, so on PTM links the HTB
//!   rate is the line rate x 64/65 instead (sch_cake.c adds `ceil(len/64)` bytes per packet; the
//!   two differ by under 0.05 % of the rate for full-size packets).
//! - The FIFO leaf is netem with `rate` at the link's rate, not a pfifo: HTB lets a packet that
//!   finds its bucket full leave at once, so an idle line would carry a lone packet in no time
//!   at all, whatever its size and cells, and `unbloat tune`'s framing sweep (the round trip
//!   against packet size) would see a flat line on every link. netem's `rate` holds each packet
//!   for its own time on the wire (its stab length at the rate, net/sched/sch_netem.c
//!   `packet_time_ns`), behind the packets before it, as a modem does; HTB at the same rate
//!   changes nothing then, and stays the class whose counters show the link. A FIFO in bytes
//!   (`fifo_bytes`) is a `bfifo` at the line's rate on an IFB in front (`ifb4isp0` for the
//!   downlink, `ifb4cpe0` for the uplink, fed by the device the packets enter by), and the
//!   device's netem serialises behind it: netem can only count packets.
//! - The **internet** delays each direction by half the base RTT with netem (`limit 100000`, so
//!   that netem itself never drops what the link would carry), plus the profile's jitter and loss.
//! - Every veth has `gso_max_segs 1`: the senders then hand the stack MTU-sized packets, as on a
//!   real access line, instead of 64 KB GSO super-packets that would make "1000 packets" of FIFO
//!   mean 64 MB and defeat the stab.
//! - Addresses are 10.77.K.0/24 and fd77:0:0:K::/64 for link K, inside these namespaces only; the
//!   left end of each link is `.1`, the right end `.2`. IPv6 is configured when the kernel has it
//!   (`/proc/sys/net/ipv6` exists).
//!
//! What callers can rely on:
//! - Names are unique per run ([`run_prefix`]: `ubl` + pid + a counter), so two runs (or two
//!   tests) never share a namespace.
//! - [`LiveTopology`] owns what it creates: on [`LiveTopology::teardown`], on drop (success,
//!   error, panic), and on SIGINT/SIGTERM (see [`crate::cleanup`]) it kills the processes it
//!   started, any process left in its namespaces, and deletes the namespaces (which destroys their
//!   veths and IFBs). A failed build removes what it had made before returning the error.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use unbloat_shaper::linklayer::Framing;
use unbloat_system::runner::{Cmd, CmdOutput, RunError, Runner};
use unbloat_units::{Rate, Time};

use crate::cleanup;
use crate::profile::{goodput_framing, Fifo, LinkProfile, MAC_HEADER_BYTES};
use crate::strategies::{in_netns, RouterDevs};

/// The five hosts of the lab, left (user) to right (internet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Node {
    Lan,
    Router,
    Modem,
    Internet,
    Server,
}

impl Node {
    pub const ALL: [Node; 5] = [
        Node::Lan,
        Node::Router,
        Node::Modem,
        Node::Internet,
        Node::Server,
    ];

    pub fn short(self) -> &'static str {
        match self {
            Node::Lan => "lan",
            Node::Router => "rtr",
            Node::Modem => "mdm",
            Node::Internet => "inet",
            Node::Server => "srv",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Nodes that forward packets between their two links.
    fn forwards(self) -> bool {
        matches!(self, Node::Router | Node::Modem | Node::Internet)
    }
}

/// The four veth links: (left node, its device, right node, its device).
pub const LINKS: [(Node, &str, Node, &str); 4] = [
    (Node::Lan, "eth0", Node::Router, "lan0"),
    (Node::Router, "wan0", Node::Modem, "cpe0"),
    (Node::Modem, "isp0", Node::Internet, "mdm0"),
    (Node::Internet, "srv0", Node::Server, "eth0"),
];

/// The router's WAN device, where strategies shape.
pub const ROUTER_WAN: &str = "wan0";

/// [`ROUTER_WAN`] as unbloat's commands take it.
pub fn router_wan() -> unbloat_units::IfName {
    ROUTER_WAN.parse().expect("a valid interface name")
}

/// A prefix no other run of this process or any other process uses: `ubl<pid>x<n>`.
pub fn run_prefix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "ubl{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The IPv4 address of `node` on link `k` (0-based), left end `.1`, right end `.2`.
fn v4(link: usize, right: bool) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, link as u8 + 1, if right { 2 } else { 1 })
}

fn v6(link: usize, right: bool) -> String {
    format!("fd77:0:0:{}::{}", link + 1, if right { 2 } else { 1 })
}

/// The plan of one lab network: pure data and the commands that build it.
#[derive(Debug, Clone)]
pub struct Topology {
    pub prefix: String,
    pub profile: LinkProfile,
    /// Configure IPv6 addresses and routes too.
    pub ipv6: bool,
}

impl Topology {
    /// A topology with a fresh unique prefix; IPv6 when this kernel has it.
    pub fn new(profile: &LinkProfile) -> Topology {
        Topology {
            prefix: run_prefix(),
            profile: profile.clone(),
            ipv6: Path::new("/proc/sys/net/ipv6").exists(),
        }
    }

    /// The namespace of `node`: `<prefix>-<short name>`.
    pub fn ns(&self, node: Node) -> String {
        format!("{}-{}", self.prefix, node.short())
    }

    pub fn namespaces(&self) -> Vec<String> {
        Node::ALL.iter().map(|n| self.ns(*n)).collect()
    }

    /// Where `unbloat serve` listens: the server's address.
    pub fn server_addr(&self) -> Ipv4Addr {
        v4(LINKS.len() - 1, true)
    }

    /// The server's IPv6 address, when the topology has IPv6.
    pub fn server_addr_v6(&self) -> Option<std::net::Ipv6Addr> {
        self.ipv6
            .then(|| v6(LINKS.len() - 1, true).parse().ok())
            .flatten()
    }

    /// The LAN host's address.
    pub fn lan_addr(&self) -> Ipv4Addr {
        v4(0, false)
    }

    pub fn router_devs(&self) -> RouterDevs {
        RouterDevs::new(ROUTER_WAN)
    }

    /// Every command that builds the network, in order, each already aimed at its namespace.
    /// (`ip netns add` comes first for every node; [`LiveTopology::build`] runs those one by one
    /// so it knows what to remove if a later step fails.)
    pub fn build_commands(&self) -> Vec<Cmd> {
        let mut cmds = Vec::new();
        for node in Node::ALL {
            cmds.push(in_netns(
                &Cmd::ip(["link", "set", "lo", "up"]),
                &self.ns(node),
            ));
        }
        for (k, (left, ldev, right, rdev)) in LINKS.iter().enumerate() {
            let (lns, rns) = (self.ns(*left), self.ns(*right));
            cmds.push(in_netns(
                &Cmd::ip([
                    "link", "add", ldev, "type", "veth", "peer", "name", rdev, "netns", &rns,
                ]),
                &lns,
            ));
            for (ns, dev, is_right) in [(&lns, ldev, false), (&rns, rdev, true)] {
                cmds.push(in_netns(
                    &Cmd::ip(["link", "set", "dev", dev, "gso_max_segs", "1"]),
                    ns,
                ));
                let addr = format!("{}/24", v4(k, is_right));
                cmds.push(in_netns(&Cmd::ip(["addr", "add", &addr, "dev", dev]), ns));
                if self.ipv6 {
                    let addr = format!("{}/64", v6(k, is_right));
                    cmds.push(in_netns(
                        &Cmd::ip(["addr", "add", &addr, "dev", dev, "nodad"]),
                        ns,
                    ));
                }
                cmds.push(in_netns(&Cmd::ip(["link", "set", "dev", dev, "up"]), ns));
            }
        }
        for node in Node::ALL {
            cmds.extend(self.routes(node));
        }
        for node in Node::ALL.into_iter().filter(|n| n.forwards()) {
            let mut sysctl = Cmd::new("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]);
            if self.ipv6 {
                sysctl = sysctl.arg("net.ipv6.conf.all.forwarding=1");
            }
            cmds.push(in_netns(&sysctl, &self.ns(node)));
        }
        let modem = self.ns(Node::Modem);
        cmds.extend(
            modem_commands(&self.profile)
                .iter()
                .map(|c| in_netns(c, &modem)),
        );
        let router = self.ns(Node::Router);
        cmds.extend(
            lan_commands(&self.profile, v4(0, true))
                .iter()
                .map(|c| in_netns(c, &router)),
        );
        let inet = self.ns(Node::Internet);
        cmds.extend(
            internet_commands(&self.profile)
                .iter()
                .map(|c| in_netns(c, &inet)),
        );
        cmds
    }

    /// Routes of `node` to every link it is not on: leftwards via its left neighbour, rightwards
    /// via its right neighbour.
    fn routes(&self, node: Node) -> Vec<Cmd> {
        let n = node.index();
        let ns = self.ns(node);
        let mut cmds = Vec::new();
        for k in 0..LINKS.len() {
            let adjacent = k + 1 == n || k == n;
            if adjacent {
                continue;
            }
            // Node n's left link is n-1 (neighbour is that link's left end), right link is n.
            let (via4, via6) = if k + 1 < n {
                (v4(n - 1, false), v6(n - 1, false))
            } else {
                (v4(n, true), v6(n, true))
            };
            let net4 = format!("10.77.{}.0/24", k + 1);
            cmds.push(in_netns(
                &Cmd::ip(["route", "add", &net4, "via", &via4.to_string()]),
                &ns,
            ));
            if self.ipv6 {
                let net6 = format!("fd77:0:0:{}::/64", k + 1);
                cmds.push(in_netns(
                    &Cmd::ip(["-6", "route", "add", &net6, "via", &via6]),
                    &ns,
                ));
            }
        }
        cmds
    }
}

/// The modem's bottleneck, both ways, as run inside the modem's namespace.
pub fn modem_commands(profile: &LinkProfile) -> Vec<Cmd> {
    let link = profile.link_layer();
    let framing = goodput_framing(&link);
    let stab_overhead = framing.overhead - MAC_HEADER_BYTES;
    let linklayer = if link.framing == Framing::Atm {
        "atm"
    } else {
        "ethernet"
    };
    let mut cmds = Vec::new();
    // cpe0 faces the user: what leaves it is the downlink. isp0 faces the internet: the uplink.
    for (dev, rate) in [("cpe0", profile.down), ("isp0", profile.up)] {
        let rate = modem_rate(profile, rate);
        cmds.push(Cmd::tc([
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "handle",
            "1:",
            "stab",
            "overhead",
            &stab_overhead.to_string(),
            "mpu",
            &framing.mpu.to_string(),
            "linklayer",
            linklayer,
            "htb",
            "default",
            "1",
        ]));
        let r = format!("{}bit", rate.bits_per_sec());
        cmds.push(Cmd::tc([
            "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &r,
            "ceil", &r,
        ]));
        // A direction that follows a trace leaves the pace to HTB alone: netem fixes each packet's
        // send time when it arrives, so a queue built at a low rate would drain at that rate
        // long after the trace's rate rose (see crate::trace_player).
        let traced = match dev {
            "cpe0" => profile.traces.down.is_some(),
            _ => profile.traces.up.is_some(),
        };
        let leaf = match profile.fifo() {
            Fifo::Packets(n) if traced => ["netem", "limit", &n.to_string()]
                .map(String::from)
                .to_vec(),
            Fifo::Packets(n) => ["netem", "limit", &n.to_string(), "rate", &r]
                .map(String::from)
                .to_vec(),
            Fifo::Bytes(b) if traced => {
                vec!["bfifo".to_string(), "limit".into(), b.bytes().to_string()]
            }
            // The queue in bytes waits in front, on the IFB the other device's ingress feeds
            // ([`byte_queue`]); here each packet only takes its own time on the wire.
            Fifo::Bytes(_) => ["netem", "limit", "1000", "rate", &r]
                .map(String::from)
                .to_vec(),
        };
        cmds.push(
            Cmd::tc(["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"]).args(leaf),
        );
        if let (Fifo::Bytes(b), false) = (profile.fifo(), traced) {
            let stab = [
                &stab_overhead.to_string(),
                &framing.mpu.to_string(),
                linklayer,
            ];
            cmds.extend(byte_queue(dev, stab, &r, b.bytes()));
        }
    }
    cmds
}

/// The IFB a FIFO in bytes waits on: the queue of what leaves by `dev` forms where it entered
/// the modem, the other device's ingress.
pub fn byte_queue_ifb(dev: &str) -> &'static str {
    if dev == "cpe0" {
        "ifb4isp0"
    } else {
        "ifb4cpe0"
    }
}

/// A modem FIFO limited in bytes, in front of the serialising netem: a `bfifo` drained at the
/// line's rate (HTB under the same stab) on an IFB that the entering device's ingress
/// redirects to. A bfifo cannot serialise (netem counts only packets) and HTB lets a packet that
/// finds its bucket full leave at once, so behind HTB and a bfifo alone a lone echo crossed an
/// idle line in no time, whatever its size: issue 55's sweep saw a flat line on an ATM link and
/// called it straight. Here the bfifo holds the queue and drops what overflows its bytes, and
/// the device's netem adds each packet's own time on the wire; HTB's small burst is all that
/// ever waits there.
fn byte_queue(dev: &str, stab: [&str; 3], rate: &str, limit: u64) -> Vec<Cmd> {
    let (ifb, from) = (
        byte_queue_ifb(dev),
        if dev == "cpe0" { "isp0" } else { "cpe0" },
    );
    let [overhead, mpu, linklayer] = stab;
    vec![
        Cmd::ip(["link", "add", ifb, "type", "ifb"]),
        Cmd::ip(["link", "set", "dev", ifb, "up"]),
        Cmd::tc([
            "qdisc",
            "add",
            "dev",
            ifb,
            "root",
            "handle",
            "1:",
            "stab",
            "overhead",
            overhead,
            "mpu",
            mpu,
            "linklayer",
            linklayer,
            "htb",
            "default",
            "1",
        ]),
        Cmd::tc([
            "class", "add", "dev", ifb, "parent", "1:", "classid", "1:1", "htb", "rate", rate,
            "ceil", rate,
        ]),
        Cmd::tc([
            "qdisc",
            "add",
            "dev",
            ifb,
            "parent",
            "1:1",
            "handle",
            "10:",
            "bfifo",
            "limit",
            &limit.to_string(),
        ]),
        Cmd::tc(["qdisc", "add", "dev", from, "handle", "ffff:", "ingress"]),
        Cmd::tc([
            "filter", "add", "dev", from, "parent", "ffff:", "protocol", "all", "prio", "1", "u32",
            "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb,
        ]),
    ]
}

/// The router's LAN-side bottleneck ([`crate::profile::LanSection`]), as run inside the
/// router's namespace: netem with the rate and the FIFO on `lan0` (towards the host) and on an
/// IFB that `lan0`'s ingress is redirected to (from the host). A router that ignores pings
/// drops every ICMP request to `router` (its LAN address), echo and timestamp alike, as a
/// firewalled gateway does.
pub fn lan_commands(profile: &LinkProfile, router: Ipv4Addr) -> Vec<Cmd> {
    let Some(lan) = &profile.lan else {
        return vec![];
    };
    let limit = lan.fifo_packets.to_string();
    let netem = |dev: &str, rate: Rate| {
        let r = format!("{}bit", rate.bits_per_sec());
        Cmd::tc([
            "qdisc", "add", "dev", dev, "root", "netem", "limit", &limit, "rate", &r,
        ])
    };
    let mut cmds = vec![];
    if let Some(down) = lan.down {
        cmds.push(netem("lan0", down));
    }
    if lan.answers_late_ms.is_some() {
        // Every packet to band 2 (1:2, a FIFO), but the router's own ICMP (its answers) to band 1:
        // a netem of their own, that holds them only once `lan_answers_late` has been run.
        let src = format!("{router}/32");
        cmds.extend([
            Cmd::tc([
                "qdisc", "add", "dev", "lan0", "root", "handle", "1:", "prio", "bands", "2",
                "priomap",
            ])
            .args(["1"; 16]),
            Cmd::tc([
                "qdisc", "add", "dev", "lan0", "parent", "1:1", "handle", "10:", "netem", "delay",
                "0ms",
            ]),
            Cmd::tc([
                "filter", "add", "dev", "lan0", "parent", "1:", "protocol", "ip", "prio", "1",
                "u32", "match", "ip", "protocol", "1", "0xff", "match", "ip", "src", &src,
                "flowid", "1:1",
            ]),
        ]);
    }
    if lan.up.is_some() || lan.ignores_ping {
        cmds.push(Cmd::tc([
            "qdisc", "add", "dev", "lan0", "handle", "ffff:", "ingress",
        ]));
    }
    if lan.ignores_ping {
        let dst = format!("{router}/32");
        cmds.push(Cmd::tc([
            "filter", "add", "dev", "lan0", "parent", "ffff:", "protocol", "ip", "prio", "1",
            "u32", "match", "ip", "protocol", "1", "0xff", "match", "ip", "dst", &dst, "action",
            "drop",
        ]));
    }
    if let Some(up) = lan.up {
        cmds.extend([
            Cmd::ip(["link", "add", "ifb4lan0", "type", "ifb"]),
            Cmd::ip(["link", "set", "dev", "ifb4lan0", "up"]),
            netem("ifb4lan0", up),
            Cmd::tc([
                "filter", "add", "dev", "lan0", "parent", "ffff:", "protocol", "all", "prio", "2",
                "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev",
                "ifb4lan0",
            ]),
        ]);
    }
    cmds
}

/// The command that makes the router's answers late (`[lan] answers_late_ms`), to be run in the
/// router's namespace once the load has started: the delay, with a quarter of it as jitter, as a
/// busy CPU answers; with `late` false, the one that makes them prompt again. None for a profile
/// without it.
pub fn lan_answers_late(profile: &LinkProfile, late: bool) -> Option<Cmd> {
    let ms = profile.lan.as_ref()?.answers_late_ms?;
    let ms = if late { ms } else { 0 };
    let (delay, jitter) = (format!("{ms}ms"), format!("{}ms", ms / 4));
    Some(Cmd::tc([
        "qdisc", "change", "dev", "lan0", "parent", "1:1", "handle", "10:", "netem", "delay",
        &delay, &jitter,
    ]))
}

/// The rate the modem's HTB runs at for a line of `line` rate: PTM's 64b/65b encoding removes
/// one byte in 65, which a stab cannot express.
pub fn modem_rate(profile: &LinkProfile, line: Rate) -> Rate {
    if profile.link_layer().framing == Framing::Ptm {
        Rate::from_bits_per_sec(line.bits_per_sec() * 64 / 65)
    } else {
        line
    }
}

/// The internet's delay, each way, as run inside the internet's namespace.
pub fn internet_commands(profile: &LinkProfile) -> Vec<Cmd> {
    let half = Time::from_micros(profile.base_rtt().micros() / 2);
    let mut netem = vec![
        "netem".to_string(),
        "limit".into(),
        "100000".into(),
        "delay".into(),
        half.to_string(),
    ];
    if let Some(j) = profile.jitter.filter(|j| j.micros() > 0) {
        netem.push(j.to_string());
    }
    if let Some(loss) = profile.loss_percent.filter(|l| *l > 0.0) {
        netem.extend(["loss".to_string(), "random".into(), format!("{loss}%")]);
    }
    ["mdm0", "srv0"]
        .iter()
        .map(|dev| Cmd::tc(["qdisc", "add", "dev", dev, "root"]).args(netem.iter().cloned()))
        .collect()
}

/// Why building or using the lab network failed.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("`{command}` failed (exit status {status}): {stderr}")]
    Failed {
        command: String,
        status: i32,
        stderr: String,
    },
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cleaning up the lab network left something behind: {0}")]
    Cleanup(String),
}

/// Runs `cmd` and turns a non-zero exit into an error that quotes the command and its stderr.
pub fn run_checked(runner: &dyn Runner, cmd: &Cmd) -> Result<CmdOutput, TopologyError> {
    let out = runner.run(cmd)?;
    if out.success() {
        Ok(out)
    } else {
        Err(TopologyError::Failed {
            command: cmd.display(),
            status: out.status,
            stderr: out.stderr.trim().to_string(),
        })
    }
}

/// A built lab network. Owns its namespaces and the processes started in them.
pub struct LiveTopology<'r> {
    pub topo: Topology,
    runner: &'r dyn Runner,
    created: Vec<String>,
    children: Vec<Child>,
    registration: cleanup::Registration,
}

impl<'r> LiveTopology<'r> {
    /// Creates the namespaces and runs [`Topology::build_commands`]. On failure, everything made
    /// so far is removed before the error is returned.
    pub fn build(
        topo: Topology,
        runner: &'r dyn Runner,
    ) -> Result<LiveTopology<'r>, TopologyError> {
        let registration = cleanup::register();
        let mut live = LiveTopology {
            topo,
            runner,
            created: Vec::new(),
            children: Vec::new(),
            registration,
        };
        for ns in live.topo.namespaces() {
            // Registered before it exists: a signal between the two must not leak it, and
            // deleting a namespace that was never made is harmless.
            live.registration.add_namespace(&ns);
            run_checked(runner, &Cmd::ip(["netns", "add", &ns]))?;
            live.created.push(ns);
        }
        for cmd in live.topo.build_commands() {
            run_checked(runner, &cmd)?;
        }
        Ok(live)
    }

    /// Runs `cmds` (written for the node, without namespace) inside `node`'s namespace, in order,
    /// stopping at the first failure.
    pub fn apply(&self, node: Node, cmds: &[Cmd]) -> Result<(), TopologyError> {
        let ns = self.topo.ns(node);
        for cmd in cmds {
            run_checked(self.runner, &in_netns(cmd, &ns))?;
        }
        Ok(())
    }

    /// Runs one program inside `node`'s namespace and returns its output, whatever its status.
    pub fn run_in(&self, node: Node, cmd: &Cmd) -> Result<CmdOutput, TopologyError> {
        Ok(self.runner.run(&in_netns(cmd, &self.topo.ns(node)))?)
    }

    /// Starts `argv` inside `node`'s namespace (`ip netns exec NS ...`, which execs the program, so
    /// the child is the program itself) without waiting; the topology stops it on teardown.
    /// Returns the child's pid.
    pub fn spawn(
        &mut self,
        node: Node,
        argv: &[String],
        stdout: Stdio,
        stderr: Stdio,
    ) -> Result<u32, TopologyError> {
        let ns = self.topo.ns(node);
        let mut command = std::process::Command::new("ip");
        command
            .args(["netns", "exec", &ns])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        let child = command.spawn().map_err(|source| TopologyError::Spawn {
            command: format!("ip netns exec {ns} {}", argv.join(" ")),
            source,
        })?;
        let pid = child.id();
        self.registration.add_pid(pid);
        self.children.push(child);
        Ok(pid)
    }

    /// Stops every process started with [`LiveTopology::spawn`], as [`LiveTopology::stop`] does.
    pub fn stop_all(&mut self) {
        let pids: Vec<u32> = self.children.iter().map(|c| c.id()).collect();
        for pid in pids {
            self.stop(pid);
        }
    }

    /// Stops a process started with [`LiveTopology::spawn`] now (SIGTERM, then SIGKILL after
    /// 2 s), and returns its exit status.
    pub fn stop(&mut self, pid: u32) -> Option<i32> {
        let i = self.children.iter().position(|c| c.id() == pid)?;
        let mut child = self.children.remove(i);
        let status = cleanup::stop_child(&mut child);
        self.registration.remove_pid(pid);
        status
    }

    /// Whether a spawned process is still running (false once it exited or was stopped).
    pub fn is_running(&mut self, pid: u32) -> bool {
        self.children
            .iter_mut()
            .find(|c| c.id() == pid)
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Removes everything and says whether anything was left behind.
    pub fn teardown(mut self) -> Result<(), TopologyError> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> Result<(), TopologyError> {
        for mut child in self.children.drain(..) {
            cleanup::stop_child(&mut child);
        }
        let left = cleanup::remove_namespaces(self.runner, &self.created);
        self.created.clear();
        self.registration.clear();
        if left.is_empty() {
            Ok(())
        } else {
            Err(TopologyError::Cleanup(left.join("; ")))
        }
    }
}

impl Drop for LiveTopology<'_> {
    fn drop(&mut self) {
        // Best effort: drop cannot report, and teardown() is the path that does.
        let _ = self.cleanup();
    }
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
