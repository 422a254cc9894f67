//! Two LAN hosts behind one router (issue 18): is the link shared per host or per flow?
//!
//! ```text
//!  a [eth0]--[lana0                     ]
//!            [        ROUTER      wan0  ]--[cpe0  MODEM  isp0]--[eth0  SERVER]
//!  b [eth0]--[lanb0  (masquerade        ]   HTB 20/5 Mbit +      netem 20 ms
//!                     on wan0)              1000-packet FIFOs    20 ms base RTT
//! 10.78.1.0/24, 10.78.2.0/24 | 10.78.3.0/24 |  10.78.4.0/24;  IPv6 fd78:K::/64 (routed, no NAT)
//! ```
//!
//! Host a runs one TCP stream each way, host b eight each way (iperf3 `--bidir`), all to the same
//! server, as a speed test or a CDN would see them: the case where cake's `triple-isolate` folds
//! both hosts into one, because they share their one destination. The router masquerades IPv4
//! out of `wan0` (iptables-legacy, which Debian's User-Mode Linux kernel supports; nftables'
//! `ip` family is not built there), or forwards without NAT ([`Scenario::nat`] false, the server
//! then routes back to the LAN), and forwards IPv6 without NAT. Each [`Setup`] is applied to the
//! router's `wan0` as its user would: nothing, the real sqm-scripts with OpenWrt's defaults
//! (piece_of_cake, `diffserv3 nat` + `besteffort`: cake's `triple-isolate`), `unbloat start`
//! with `--isolation flows`, with only the rates, with `--ack-filter`, and with `--rtt 100ms`
//! (cake's own rtt in place of the router's 300ms upload, to show what that default buys).
//!
//! Measured: each host's goodput each way (iperf3's half-second intervals after the first 2 s of
//! ramp, and without the last, the streams' flush), host a's share of the two hosts' total (fair is 0.50), and host a's ping to the server
//! idle and under the load (median and 90th percentile).
//!
//! [`nat_cost`] measures what cake's NAT lookup costs per packet: the highest rate a cake with
//! no reachable bandwidth limit forwards through the masquerading router (eight streams from a to
//! the server, no modem bottleneck), with `nat` and with `nonat`, on the same kernel.
//!
//! Everything runs in the kernel of the calling process (the caller boots User-Mode Linux when
//! the host lacks cake); names are unique per run, and [`Net`] removes its namespaces and the
//! processes it started when dropped.

use serde::{Deserialize, Serialize};

pub use crate::hosts_parse::{host_run, ping_avg, quantile, rtts, HostRun, RAMP_S};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use unbloat_shaper::invocation::{Invocation, Start, Unsayable};
use unbloat_shaper::model::AckFilter;
use unbloat_shaper::options::{Isolation, ShapeOptions};
use unbloat_system::runner::{Cmd, Runner, SystemRunner};
use unbloat_units::{IfName, Rate, Time};

/// The issue's link, the default: 20 Mbit/s down, 5 Mbit/s up.
pub const LINK_DOWN: Rate = Rate::from_mbit(20);
pub const LINK_UP: Rate = Rate::from_mbit(5);
/// Shapers run at 95 % of the link (seed 001), as in the lab.
pub const SHAPE_PERCENT: u64 = 95;
/// Host b's streams each way; host a has one.
pub const B_FLOWS: u32 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
        }
    }
}

/// What the router's WAN gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setup {
    None,
    /// The real sqm-scripts, OpenWrt's default recipe and options (piece_of_cake.qos, cake).
    SqmDefault,
    /// `unbloat start wan0 --down D --up U --isolation flows`.
    UnbloatFlows,
    /// `unbloat start wan0 --down D --up U`.
    UnbloatDefault,
    /// `unbloat start wan0 --down D --up U --ack-filter`.
    UnbloatAckFilter,
    /// `unbloat start wan0 --down D --up U --rtt 100ms`: the router's defaults with cake's own
    /// rtt both ways, to show what the upload's `rtt 300ms` buys a host's lone flow.
    UnbloatRtt100,
}

impl Setup {
    pub const ALL: [Setup; 6] = [
        Setup::None,
        Setup::SqmDefault,
        Setup::UnbloatFlows,
        Setup::UnbloatDefault,
        Setup::UnbloatAckFilter,
        Setup::UnbloatRtt100,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Setup::None => "none",
            Setup::SqmDefault => "sqm-scripts default",
            Setup::UnbloatFlows => "unbloat --isolation flows",
            Setup::UnbloatDefault => "unbloat default",
            Setup::UnbloatAckFilter => "unbloat --ack-filter",
            Setup::UnbloatRtt100 => "unbloat --rtt 100ms",
        }
    }

    /// What `unbloat start` is given beside the rates; None for the setups that are not
    /// unbloat's.
    pub fn options(self) -> Option<ShapeOptions> {
        let default = ShapeOptions::default();
        match self {
            Setup::None | Setup::SqmDefault => None,
            Setup::UnbloatDefault => Some(default),
            Setup::UnbloatFlows => Some(ShapeOptions {
                isolation: Some(Isolation::Flows),
                ..default
            }),
            Setup::UnbloatAckFilter => Some(ShapeOptions {
                ack_filter: Some(AckFilter::Enabled),
                ..default
            }),
            Setup::UnbloatRtt100 => Some(ShapeOptions {
                rtt: Some(Time::from_millis(100)),
                ..default
            }),
        }
    }
}

/// One run's conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    /// The family of the hosts' traffic to the server.
    pub family: Family,
    /// The router masquerades IPv4 out of wan0.
    pub nat: bool,
    /// The load's length in seconds (ping and iperf3).
    pub load_s: u32,
    /// The link's rates: the modem's bottleneck each way; the shapers run at [`SHAPE_PERCENT`].
    pub down: Rate,
    pub up: Rate,
}

/// The programs a run uses.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The `unbloat` binary.
    pub unbloat: PathBuf,
    /// sqm-scripts' source (the directory with `src/start-sqm`), for [`Setup::SqmDefault`].
    pub sqm_scripts: Option<PathBuf>,
    /// A directory for the run's files (sqm-scripts' copy, unbloat's run directory).
    pub work: PathBuf,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub setup: Setup,
    pub scenario: Scenario,
    pub a: HostRun,
    pub b: HostRun,
    /// Host a's share of the two hosts' goodput: 0.5 is fair.
    pub share_up: f64,
    pub share_down: f64,
    pub ping_idle_ms: Option<f64>,
    pub ping_loaded_ms: Option<f64>,
    pub ping_loaded_p90_ms: Option<f64>,
    /// What `unbloat start` said about fairness (unbloat setups).
    pub fairness: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error("`{cmd}` failed (status {status}): {stderr}")]
    Command {
        cmd: String,
        status: i32,
        stderr: String,
    },
    #[error("cannot run `{cmd}`: {source}")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("iperf3 of host {host}: {why}")]
    Iperf { host: char, why: String },
    #[error("sqm-scripts' source was not given: pass --sqm-scripts DIR (default: third_party/sqm-scripts of the source tree unbloat was built from)")]
    NoSqmScripts,
    #[error("unbloat's arguments: {0}")]
    Argv(#[from] Unsayable),
}

/// The router's WAN interface.
fn wan0() -> IfName {
    "wan0".parse().expect("a valid interface name")
}

static RUNS: AtomicU32 = AtomicU32::new(0);

/// The namespaces of one run and the processes started in them; dropped, it removes both.
pub struct Net {
    prefix: String,
    children: Vec<Option<Child>>,
    runner: SystemRunner,
}

const NODES: [&str; 5] = ["a", "b", "rtr", "mdm", "srv"];

impl Net {
    pub(crate) fn ns(&self, node: &str) -> String {
        format!("{}{node}", self.prefix)
    }

    pub(crate) fn run(&self, node: Option<&str>, argv: &[&str]) -> Result<String, HostsError> {
        self.exec(self.cmd(node, argv))
    }

    /// `argv` as a command in `node`'s namespace (`ip netns exec`), or here for None.
    fn cmd(&self, node: Option<&str>, argv: &[&str]) -> Cmd {
        match node {
            Some(n) => Cmd::ip(["netns", "exec", &self.ns(n)]).args(argv.iter().copied()),
            None => Cmd::new(argv[0]).args(argv[1..].iter().copied()),
        }
    }

    /// Runs `cmd`; what it printed, or the failure with its stderr.
    fn exec(&self, cmd: Cmd) -> Result<String, HostsError> {
        let out = self.runner.run(&cmd).map_err(|e| HostsError::Spawn {
            cmd: cmd.display(),
            source: std::io::Error::other(e.to_string()),
        })?;
        if !out.success() {
            return Err(HostsError::Command {
                cmd: cmd.display(),
                status: out.status,
                stderr: out.stderr.trim().to_string(),
            });
        }
        Ok(out.stdout + &out.stderr)
    }

    pub(crate) fn sh(&self, node: &str, line: &str) -> Result<String, HostsError> {
        let argv: Vec<&str> = line.split_whitespace().collect();
        self.run(Some(node), &argv)
    }

    pub(crate) fn spawn(&mut self, node: &str, argv: &[&str]) -> Result<usize, HostsError> {
        let ns = self.ns(node);
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| HostsError::Spawn {
                cmd: argv.join(" "),
                source,
            })?;
        self.children.push(Some(child));
        Ok(self.children.len() - 1)
    }

    /// Waits for a child started by [`Net::spawn`] and returns its stdout.
    pub(crate) fn wait(&mut self, i: usize) -> Result<String, HostsError> {
        let Some(child) = self.children[i].take() else {
            return Ok(String::new());
        };
        let out = child.wait_with_output()?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Ends a child started by [`Net::spawn`].
    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Builds the network: see the module's picture. `bottleneck` (down, up) puts the modem's
    /// HTB and FIFOs at those rates; None leaves the modem unshaped (for [`nat_cost`]).
    pub fn build(nat: bool, bottleneck: Option<(Rate, Rate)>) -> Result<Net, HostsError> {
        let prefix = format!(
            "uf{}x{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        let net = Net {
            prefix,
            children: vec![],
            runner: SystemRunner::plain(),
        };
        for n in NODES {
            net.run(None, &["ip", "netns", "add", &net.ns(n)])?;
            net.sh(n, "ip link set lo up")?;
        }
        // (left node, left dev, right node, right dev, subnet K)
        let links = [
            ("a", "eth0", "rtr", "lana0", 1),
            ("b", "eth0", "rtr", "lanb0", 2),
            ("rtr", "wan0", "mdm", "cpe0", 3),
            ("mdm", "isp0", "srv", "eth0", 4),
        ];
        for (l, ldev, r, rdev, k) in links {
            let rns = net.ns(r);
            net.run(
                Some(l),
                &[
                    "ip", "link", "add", ldev, "type", "veth", "peer", "name", rdev, "netns", &rns,
                ],
            )?;
            // Left ends of the LAN links are hosts (.2), the router is .1; elsewhere left is .1.
            let (lhost, rhost) = if k <= 2 { (2, 1) } else { (1, 2) };
            for (node, dev, host) in [(l, ldev, lhost), (r, rdev, rhost)] {
                net.sh(node, &format!("ip link set dev {dev} gso_max_segs 1"))?;
                net.sh(node, &format!("ip addr add 10.78.{k}.{host}/24 dev {dev}"))?;
                net.sh(
                    node,
                    &format!("ip addr add fd78:{k}::{host}/64 dev {dev} nodad"),
                )?;
                net.sh(node, &format!("ip link set dev {dev} up"))?;
            }
        }
        for (node, k) in [("a", 1), ("b", 2)] {
            net.sh(node, &format!("ip route add default via 10.78.{k}.1"))?;
            net.sh(node, &format!("ip -6 route add default via fd78:{k}::1"))?;
        }
        net.sh("rtr", "ip route add default via 10.78.3.2")?;
        net.sh("rtr", "ip -6 route add default via fd78:3::2")?;
        for k in [1, 2] {
            net.sh("mdm", &format!("ip route add 10.78.{k}.0/24 via 10.78.3.1"))?;
            net.sh(
                "mdm",
                &format!("ip -6 route add fd78:{k}::/64 via fd78:3::1"),
            )?;
        }
        net.sh("mdm", "ip route add default via 10.78.4.2")?;
        net.sh("srv", "ip route add default via 10.78.4.1")?;
        net.sh("srv", "ip -6 route add default via fd78:4::1")?;
        for node in ["rtr", "mdm"] {
            net.sh(
                node,
                "sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1",
            )?;
        }
        if nat {
            masquerade(&net)?;
        }
        if let Some((down, up)) = bottleneck {
            for (dev, rate) in [("cpe0", down), ("isp0", up)] {
                net.sh(
                    "mdm",
                    &format!("tc qdisc add dev {dev} root handle 1: htb default 1"),
                )?;
                net.sh(
                    "mdm",
                    &format!("tc class add dev {dev} parent 1: classid 1:1 htb rate {rate}"),
                )?;
                net.sh(
                    "mdm",
                    &format!("tc qdisc add dev {dev} parent 1:1 handle 10: pfifo limit 1000"),
                )?;
            }
        }
        // The internet's 20 ms, all on the server's way back (the modem's devices hold the
        // bottleneck qdiscs).
        net.sh(
            "srv",
            "tc qdisc add dev eth0 root netem delay 20ms limit 100000",
        )?;
        Ok(net)
    }
}

/// `iptables -t nat -A POSTROUTING -o wan0 -j MASQUERADE` in the router, with the modules it
/// needs (inside User-Mode Linux they are loaded from its own modules tree).
fn masquerade(net: &Net) -> Result<(), HostsError> {
    load_nat_modules();
    let rule = "-t nat -A POSTROUTING -o wan0 -j MASQUERADE";
    for tool in ["iptables-legacy", "iptables"] {
        let line = format!("{tool} {rule}");
        if net.sh("rtr", &line).is_ok() {
            return Ok(());
        }
    }
    net.sh("rtr", "nft add table ip unbloatlab")?;
    net.sh(
        "rtr",
        "nft add chain ip unbloatlab post { type nat hook postrouting priority 100 ; }",
    )?;
    net.sh(
        "rtr",
        "nft add rule ip unbloatlab post oifname wan0 masquerade",
    )?;
    Ok(())
}

/// The NAT modules: `modprobe` as usual, and in a User-Mode Linux guest from the package's
/// modules tree through a `-d` directory made for it (see KERNEL-LAB.md).
fn load_nat_modules() {
    let mods = [
        "nf_conntrack",
        "nf_nat",
        "ip_tables",
        "iptable_nat",
        "xt_MASQUERADE",
        "ip6_tables",
        "ip6table_nat",
    ];
    let ok = Command::new("modprobe")
        .arg("-a")
        .args(mods)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return;
    }
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return;
    };
    let release = release.trim();
    let tree = Path::new("/usr/lib/uml/modules").join(release);
    if !tree.is_dir() {
        return;
    }
    // A fresh private directory: modprobe -d loads what it finds there, as root, and a
    // predictable name in /tmp could be made beforehand by anyone, modules included.
    let Ok(dir) = unbloat_safefs::private_dir(&std::env::temp_dir(), "unbloat-natmod") else {
        return;
    };
    let _ = std::fs::create_dir_all(dir.join("lib/modules"));
    let _ = std::os::unix::fs::symlink(&tree, dir.join("lib/modules").join(release));
    let _ = Command::new("modprobe")
        .arg("-d")
        .arg(&dir)
        .arg("-a")
        .args(mods)
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_dir_all(&dir);
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in NODES {
            let _ = self.run(None, &["ip", "netns", "del", &self.ns(n)]);
        }
    }
}

fn server_addr(family: Family) -> &'static str {
    match family {
        Family::Ipv4 => "10.78.4.2",
        Family::Ipv6 => "fd78:4::2",
    }
}

pub(crate) fn kbit(rate: Rate) -> u64 {
    rate.bits_per_sec() * SHAPE_PERCENT / 100 / 1000
}

/// Applies `setup` on the router; returns what unbloat said about fairness.
fn apply(
    net: &Net,
    setup: Setup,
    scenario: &Scenario,
    tools: &Tools,
) -> Result<Option<String>, HostsError> {
    let (down, up) = (kbit(scenario.down), kbit(scenario.up));
    if setup == Setup::SqmDefault {
        let env = ["SCRIPT=piece_of_cake.qos", "QDISC=cake"];
        net.sqm_start(tools, down, up, &env)?;
        return Ok(None);
    }
    let Some(options) = setup.options() else {
        return Ok(None);
    };
    let said = net.unbloat_start(tools, down, up, options)?;
    Ok(said
        .lines()
        .find_map(|l| l.strip_prefix("unbloat: wan0: "))
        .map(String::from))
}

impl Net {
    /// `unbloat start wan0` with `options` and the rates (in kbit/s, as sqm-scripts gets them)
    /// in the router, with a run directory of this network's own; what it printed.
    pub(crate) fn unbloat_start(
        &self,
        tools: &Tools,
        down: u64,
        up: u64,
        options: ShapeOptions,
    ) -> Result<String, HostsError> {
        let run_dir = format!(
            "UNBLOAT_RUN_DIR={}",
            tools.work.join(format!("run-{}", self.prefix)).display()
        );
        let bin = tools.unbloat.display().to_string();
        let start = Invocation::from(Start {
            iface: Some(wan0()),
            options: ShapeOptions {
                down: Some(Rate::from_kbit(down)),
                up: Some(Rate::from_kbit(up)),
                ..options
            },
            ..Start::default()
        })
        .argv()?;
        let argv: Vec<&str> = ["env", &run_dir, &bin]
            .into_iter()
            .chain(start.iter().map(String::as_str))
            .collect();
        self.run(Some("rtr"), &argv)
    }

    /// The real sqm-scripts' `start-sqm` on the router's wan0 (rates in kbit/s), from a copy of
    /// its source in the work directory, with `env` (`SCRIPT=...`, ...) beside the link's values.
    pub(crate) fn sqm_start(
        &self,
        tools: &Tools,
        down: u64,
        up: u64,
        env: &[&str],
    ) -> Result<(), HostsError> {
        let src = tools.sqm_scripts.as_ref().ok_or(HostsError::NoSqmScripts)?;
        let lib = tools.work.join(format!("sqm-{}", self.prefix));
        unbloat_system::sqm::install(src, &lib)?;
        let start = lib.join("start-sqm").display().to_string();
        let (d, u) = (format!("DOWNLINK={down}"), format!("UPLINK={up}"));
        let mut argv = vec!["env", "IFACE=wan0", &u, &d];
        argv.extend(env);
        argv.extend(["sh", &start]);
        self.run(Some("rtr"), &argv).map(drop)
    }

    /// `nft -f -` in `node`, reading `text`.
    pub(crate) fn nft(&self, node: &str, text: &str) -> Result<(), HostsError> {
        let cmd = self
            .cmd(Some(node), &["nft", "-f", "-"])
            .stdin(text.to_string());
        self.exec(cmd).map(drop)
    }
}

/// Runs `setup` in a fresh network for `scenario`.
pub fn run(scenario: &Scenario, setup: Setup, tools: &Tools) -> Result<Outcome, HostsError> {
    std::fs::create_dir_all(&tools.work)?;
    let mut net = Net::build(scenario.nat, Some((scenario.down, scenario.up)))?;
    let fairness = apply(&net, setup, scenario, tools)?;
    let srv = server_addr(scenario.family);
    let t = scenario.load_s.to_string();
    let s1 = net.spawn("srv", &["iperf3", "-s", "-p", "5201"])?;
    let s2 = net.spawn("srv", &["iperf3", "-s", "-p", "5202"])?;
    std::thread::sleep(Duration::from_millis(300));
    let ping6 = if scenario.family == Family::Ipv6 {
        "-6"
    } else {
        "-4"
    };
    let idle = net.sh("a", &format!("ping {ping6} -n -q -c 10 -i 0.2 {srv}"));
    let idle = idle.ok().as_deref().and_then(ping_avg);
    let ca = net.spawn(
        "a",
        &[
            "iperf3", "-c", srv, "-p", "5201", "-t", &t, "-i", "0.5", "-J", "--bidir", "-P", "1",
        ],
    )?;
    let pb = B_FLOWS.to_string();
    let cb = net.spawn(
        "b",
        &[
            "iperf3", "-c", srv, "-p", "5202", "-t", &t, "-i", "0.5", "-J", "--bidir", "-P", &pb,
        ],
    )?;
    std::thread::sleep(Duration::from_secs_f64(RAMP_S));
    let count = ((scenario.load_s as f64 - RAMP_S - 0.5) * 5.0).max(5.0) as u32;
    let pings = net.spawn(
        "a",
        &[
            "ping",
            ping6,
            "-n",
            "-i",
            "0.2",
            "-c",
            &count.to_string(),
            srv,
        ],
    )?;
    let (ja, jb) = (net.wait(ca)?, net.wait(cb)?);
    let loaded = rtts(&net.wait(pings)?);
    for s in [s1, s2] {
        net.kill(s);
    }
    let a = host_run(&ja).map_err(|why| HostsError::Iperf { host: 'a', why })?;
    let b = host_run(&jb).map_err(|why| HostsError::Iperf { host: 'b', why })?;
    let share = |x: f64, y: f64| if x + y > 0.0 { x / (x + y) } else { 0.0 };
    Ok(Outcome {
        setup,
        scenario: *scenario,
        share_up: share(a.up_bps, b.up_bps),
        share_down: share(a.down_bps, b.down_bps),
        a,
        b,
        ping_idle_ms: idle,
        ping_loaded_ms: quantile(&loaded, 0.5),
        ping_loaded_p90_ms: quantile(&loaded, 0.9),
        fairness,
    })
}

/// The highest rate cake forwards through the masquerading router with `nat` and with `nonat`
/// (bit/s of goodput from host a's eight streams, and packets per second at the router's WAN).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NatCost {
    pub nat_bps: f64,
    pub nonat_bps: f64,
    pub nat_pps: f64,
    pub nonat_pps: f64,
}

impl NatCost {
    /// The extra time per packet with `nat`, in nanoseconds (from the packet rates).
    pub fn ns_per_packet(&self) -> f64 {
        if self.nat_pps > 0.0 && self.nonat_pps > 0.0 {
            1e9 / self.nat_pps - 1e9 / self.nonat_pps
        } else {
            f64::NAN
        }
    }
}

/// One [`NatCost`] measurement, `load_s` seconds each way of it.
pub fn nat_cost(load_s: u32) -> Result<NatCost, HostsError> {
    let mut out = [(0.0, 0.0); 2];
    for (i, nat) in ["nat", "nonat"].into_iter().enumerate() {
        let mut net = Net::build(true, None)?;
        net.sh(
            "rtr",
            &format!(
                "tc qdisc add dev wan0 root cake bandwidth 10gbit besteffort dual-srchost {nat}"
            ),
        )?;
        let s = net.spawn("srv", &["iperf3", "-s", "-p", "5201"])?;
        std::thread::sleep(Duration::from_millis(300));
        let before = tx_packets(&net)?;
        let t = load_s.to_string();
        let c = net.spawn(
            "a",
            &[
                "iperf3",
                "-c",
                "10.78.4.2",
                "-p",
                "5201",
                "-t",
                &t,
                "-i",
                "0.5",
                "-J",
                "-P",
                "8",
            ],
        )?;
        let json = net.wait(c)?;
        let packets = tx_packets(&net)? - before;
        net.kill(s);
        let v: serde_json::Value = serde_json::from_str(&json).map_err(|e| HostsError::Iperf {
            host: 'a',
            why: e.to_string(),
        })?;
        let bps = v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        let secs = v["end"]["sum_received"]["seconds"].as_f64().unwrap_or(1.0);
        out[i] = (bps, packets as f64 / secs.max(0.1));
    }
    Ok(NatCost {
        nat_bps: out[0].0,
        nonat_bps: out[1].0,
        nat_pps: out[0].1,
        nonat_pps: out[1].1,
    })
}

fn tx_packets(net: &Net) -> Result<u64, HostsError> {
    let path = "/sys/class/net/wan0/statistics/tx_packets";
    let text = net.run(Some("rtr"), &["cat", path])?;
    Ok(text.trim().parse().unwrap_or(0))
}
