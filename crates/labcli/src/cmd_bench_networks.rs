//! `unbloat-lab bench networks`: how fast the daemon follows a laptop from one network to
//! another under load (issue 56), in a real kernel (User-Mode Linux where the host lacks cake).
//!
//! ```text
//!  this process's namespace        GW namespace                       SRV namespace
//!  (the laptop)                    (the networks' router + line)      (the far end)
//!  [wlan0 192.168.1.2]--[gw0 192.168.1.1  gws 10.99.0.1]--[srv0 10.99.0.2]
//!   unbloat daemon                 gw0: netem rate DOWN limit 1000     srv0: netem delay 20ms
//!   (cake both ways, IFB)          gws: netem rate UP limit 1000
//! ```
//!
//! Two networks, home and office, are the same router address behind two gateway MACs, each
//! with its own line (a drop-tail FIFO of 1000 packets at the line's rate, the bloat) and its
//! own `[network.NAME]` table at 90 % of it. The laptop keeps its address, so the load runs
//! through every switch: a TCP download and upload (iperf3 `--bidir`, two streams) and a ping
//! every 50 ms to the far end, from 6 s before the first switch to the end. A switch is what a
//! laptop sees: the line changes to the other network's, the gateway's MAC changes, the
//! laptop's neighbours are flushed and its default route replaced; the load's next packet
//! resolves the new MAC, and the neighbour event wakes the daemon.
//!
//! Per switch: the time from the route change to both of the new network's rates in the kernel
//! (cake's `bandwidth` on wlan0 and ifb4wlan0, read in-process over rtnetlink every 5 ms), and
//! the round trips under load in three windows: the 3 s before the switch, the 3 s after it,
//! and from 3 s after it to the next switch (the steady state on the new network).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail};
use clap::Args;
use serde::Serialize;
use unbloat_shaper::tcjson::QdiscKind;
use unbloat_system::rtnl::Rtnl;
use unbloat_units::{IfName, Rate};

use crate::Failure;

#[derive(Debug, Args)]
pub struct NetworksBench {
    /// Switches, alternating office and home (at least 2).
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub switches: usize,
    /// Seconds on each network between switches (at least 7: 3 s of switch window, then the
    /// steady state).
    #[arg(long, value_name = "S", default_value_t = 10)]
    pub dwell: u64,
    /// Seconds of load on home (fixed rates) and then on an unknown café on the same line,
    /// where the interface's table is autorate; 0 leaves the comparison out.
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub compare: u64,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Internal: we are already in a kernel with every qdisc.
    #[arg(long, hide = true)]
    pub inside: bool,
}

/// One network: its gateway's MAC, its line, and the rates its table gives.
struct Net {
    name: &'static str,
    mac: &'static str,
    line_down: Rate,
    line_up: Rate,
    down: Rate,
    up: Rate,
}

const NETS: [Net; 2] = [
    Net {
        name: "home",
        mac: "02:00:00:00:00:0a",
        line_down: Rate::from_mbit(20),
        line_up: Rate::from_mbit(5),
        down: Rate::from_mbit(18),
        up: Rate::from_kbit(4500),
    },
    Net {
        name: "office",
        mac: "02:00:00:00:00:0b",
        line_down: Rate::from_mbit(40),
        line_up: Rate::from_mbit(10),
        down: Rate::from_mbit(36),
        up: Rate::from_mbit(9),
    },
];

/// The café's gateway: no table names it.
const CAFE: &str = "02:00:00:00:00:0c";
/// The interface's own table, what an unknown network gets: autorate's base rates, between
/// [`AUTORATE_TABLE`]'s bounds.
const AUTORATE_BASE: (Rate, Rate) = (Rate::from_mbit(15), Rate::from_kbit(3500));
const AUTORATE_TABLE: &str = "[autorate.wlan0]\ndown-min = \"4mbit\"\ndown-max = \"20mbit\"\n\
     up-min = \"1mbit\"\nup-max = \"5mbit\"\nreflectors = [\"10.99.0.2\", \"10.99.0.10\", \
     \"10.99.0.11\", \"10.99.0.12\"]\n";

/// One ping: when it was sent (epoch seconds) and its round trip in ms, `None` if unanswered.
type Ping = (f64, Option<f64>);

/// The switch window: round trips this long after a switch are its own, not the steady state.
const WINDOW: f64 = 3.0;

/// Round trips under load in one window.
#[derive(Debug, Clone, Copy, Serialize)]
struct Rtts {
    samples: usize,
    p50_ms: f64,
    p95_ms: f64,
    max_ms: f64,
    /// Pings with no answer (lost, or later than 1 s).
    lost: usize,
    /// iperf3's goodput each way over the window's whole seconds, Mbit/s.
    down_mbit: f64,
    up_mbit: f64,
}

#[derive(Debug, Serialize)]
struct Switch {
    to: &'static str,
    /// From the route change to both of the new rates in the kernel.
    rates_ms: Option<f64>,
    before: Rtts,
    during: Rtts,
    after: Rtts,
}

#[derive(Debug, Serialize)]
struct CompareRow {
    name: &'static str,
    /// The load after its first 3 s.
    steady: Rtts,
    steady_p99_ms: f64,
    /// The load's first 3 s: its start-up peak is `max_ms`.
    startup: Rtts,
}

#[derive(Debug, Serialize)]
struct Compare {
    seconds: u64,
    rows: Vec<CompareRow>,
}

#[derive(Debug, Serialize)]
struct Report {
    kernel: String,
    dwell_s: u64,
    /// The load's first 3 s on home, before any switch: its start-up peak.
    startup: Rtts,
    /// Seconds iperf3 ran and reported, of the switches' load.
    load_seconds: usize,
    switches: Vec<Switch>,
    rates_ms_median: Option<f64>,
    rates_ms_min: Option<f64>,
    rates_ms_max: Option<f64>,
    /// Switches whose rates were not in the kernel 10 s after the route change.
    missed: usize,
    /// The unknown network (autorate) against the known one (fixed rates), on home's line.
    unknown: Option<Compare>,
}

pub fn networks_bench(args: &NetworksBench) -> Result<(), Failure> {
    if args.switches < 2 || args.dwell < 7 {
        return Err(anyhow!("--switches at least 2, --dwell at least 7 (seconds)").into());
    }
    if !args.inside
        && crate::cmd_kernel::rerun_in_real_kernel(
            crate::cmd_kernel::ALL_QDISCS,
            &[],
            Duration::from_secs(3600),
        )?
    {
        return Ok(());
    }
    crate::cmd_kernel::private_netns()?;
    let prefix = format!("ubn{}", std::process::id());
    let (gw, srv) = (format!("{prefix}gw"), format!("{prefix}srv"));
    let dir = unbloat_safefs::private_dir(std::path::Path::new("/run"), "unbloat-bench")?;
    let result = topology(&gw, &srv).and_then(|()| measure(args, &dir, &gw, &srv));
    for ns in [&gw, &srv] {
        let _ = sh(&format!("ip netns pids {ns} | xargs -r kill"));
        let _ = sh(&format!("ip netns del {ns}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let report = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

fn sh(cmd: &str) -> anyhow::Result<String> {
    let out = Command::new("sh").args(["-c", cmd]).output()?;
    if !out.status.success() {
        bail!("`{cmd}`: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn topology(gw: &str, srv: &str) -> anyhow::Result<()> {
    let home = &NETS[0];
    for c in [
        format!("ip netns add {gw}"),
        format!("ip netns add {srv}"),
        "ip link set lo up".into(),
        "ip link add wlan0 type veth peer name gw0".into(),
        format!("ip link set gw0 netns {gw}"),
        format!("ip -n {gw} link add gws type veth peer name srv0"),
        format!("ip -n {gw} link set srv0 netns {srv}"),
        format!("ip -n {gw} link set gw0 address {}", home.mac),
        format!("ip -n {gw} addr add 192.168.1.1/24 dev gw0"),
        format!("ip -n {gw} addr add 10.99.0.1/24 dev gws"),
        format!("ip -n {srv} addr add 10.99.0.2/24 dev srv0"),
        // More reflectors for autorate's pingers on the café.
        format!("ip -n {srv} addr add 10.99.0.10/24 dev srv0"),
        format!("ip -n {srv} addr add 10.99.0.11/24 dev srv0"),
        format!("ip -n {srv} addr add 10.99.0.12/24 dev srv0"),
        format!("ip -n {gw} link set lo up"),
        format!("ip -n {srv} link set lo up"),
        format!("ip -n {gw} link set gw0 up"),
        format!("ip -n {gw} link set gws up"),
        format!("ip -n {srv} link set srv0 up"),
        format!("ip netns exec {gw} sysctl -qw net.ipv4.ip_forward=1"),
        format!("ip -n {srv} route add default via 10.99.0.1"),
        "ip addr add 192.168.1.2/24 dev wlan0".into(),
        "ip link set wlan0 up".into(),
        "ip route add default via 192.168.1.1 dev wlan0".into(),
        // MTU-sized packets, as on a real line (see the lab's topology).
        "ip link set wlan0 gso_max_segs 1".into(),
        format!("ip -n {gw} link set gw0 gso_max_segs 1"),
        format!("ip -n {gw} link set gws gso_max_segs 1"),
        format!("ip -n {srv} link set srv0 gso_max_segs 1"),
        format!("ip netns exec {srv} tc qdisc add dev srv0 root netem delay 20ms limit 100000"),
    ] {
        sh(&c)?;
    }
    line(gw, home)?;
    Ok(())
}

/// The networks' line: a FIFO of 1000 packets serialised at the line's rate each way.
fn line(gw: &str, n: &Net) -> anyhow::Result<()> {
    let kbit = |r: Rate| r.bits_per_sec() / 1000;
    sh(&format!(
        "ip netns exec {gw} tc qdisc replace dev gw0 root netem rate {}kbit limit 1000 && \
         ip netns exec {gw} tc qdisc replace dev gws root netem rate {}kbit limit 1000",
        kbit(n.line_down),
        kbit(n.line_up)
    ))?;
    Ok(())
}

/// cake's egress (wlan0) and ingress (ifb4wlan0) bandwidth as the kernel holds it.
fn kernel_rates(rtnl: &Rtnl) -> Option<(Rate, Rate)> {
    let one = |dev: &str| -> Option<Rate> {
        let name: IfName = dev.parse().ok()?;
        let index = rtnl.link(dev).ok()??.index;
        let qs = unbloat_system::tcnl::qdiscs(rtnl, &name, index).ok()?;
        qs.iter().find(|q| q.root).and_then(|q| match &q.details {
            QdiscKind::Cake { options, .. } => options.bandwidth,
            _ => None,
        })
    };
    Some((one("wlan0")?, one("ifb4wlan0")?))
}

fn wait_rates(rtnl: &Rtnl, n: &Net, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if kernel_rates(rtnl) == Some((n.up, n.down)) {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// Seconds since the epoch: ping's `-D` clock.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn measure(
    args: &NetworksBench,
    dir: &std::path::Path,
    gw: &str,
    srv: &str,
) -> anyhow::Result<Report> {
    let config = dir.join("unbloat.toml");
    let mut text = format!(
        "[interface.wlan0]\ndown = \"{}\"\nup = \"{}\"\nunknown_network = \"interface\"\n\n{AUTORATE_TABLE}",
        AUTORATE_BASE.0, AUTORATE_BASE.1
    );
    for n in &NETS {
        text.push_str(&format!(
            "\n[network.{}]\ngateway = \"{}\"\ndown = \"{}\"\nup = \"{}\"\n",
            n.name, n.mac, n.down, n.up
        ));
    }
    std::fs::write(&config, text)?;
    let exe = crate::product()?;
    let log = std::fs::File::create(dir.join("daemon.log"))?;
    let _daemon = Killed(
        Command::new(&exe)
            .args(["daemon", "--config"])
            .arg(&config)
            .env("UNBLOAT_RUN_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?,
    );
    sh("ping -c 1 -W 2 192.168.1.1")?;
    let rtnl = Rtnl::open()?;
    if wait_rates(&rtnl, &NETS[0], Duration::from_secs(30)).is_none() {
        bail!(
            "the daemon did not shape home's rates within 30 s: {:?}; its log: {}",
            kernel_rates(&rtnl),
            std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default()
        );
    }
    let total = 6 + args.switches as u64 * args.dwell + 5;
    let load = Load::start(srv, 5201, total)?;
    eprintln!(
        "unbloat-lab bench networks: load on home; {} switches, {} s apart",
        args.switches, args.dwell
    );
    // The load's first 3 s (its start-up) end before the first switch's "before" window.
    std::thread::sleep(Duration::from_secs(6));
    let mut at = vec![];
    for k in 0..args.switches {
        let to = &NETS[(k + 1) % 2];
        let (t0, took) = switch(gw, &rtnl, to, to.mac)?;
        eprintln!(
            "unbloat-lab bench networks: switch {}/{} to {}: {}",
            k + 1,
            args.switches,
            to.name,
            took.map_or(
                "its rates not in the kernel within 10 s".into(),
                |d| format!(
                    "its rates in the kernel {:.0} ms after the route change",
                    d.as_secs_f64() * 1000.0
                )
            )
        );
        at.push((to.name, t0, took.map(|d| d.as_secs_f64() * 1000.0)));
        let next = Duration::from_secs(args.dwell);
        std::thread::sleep(next.saturating_sub(Duration::from_secs_f64(now() - t0)));
    }
    let load = load.finish()?;
    let window = |from: f64, to: f64| load.window(from, to);
    let mut switches = vec![];
    for (i, (to, t0, took)) in at.iter().enumerate() {
        let end = at.get(i + 1).map_or(t0 + args.dwell as f64, |n| n.1);
        switches.push(Switch {
            to,
            rates_ms: *took,
            before: window(t0 - WINDOW, *t0),
            during: window(*t0, t0 + WINDOW),
            after: window(t0 + WINDOW, end),
        });
    }
    let mut ms: Vec<f64> = switches.iter().filter_map(|s| s.rates_ms).collect();
    ms.sort_by(f64::total_cmp);
    Ok(Report {
        kernel: sh("uname -r").unwrap_or_default().trim().to_string(),
        dwell_s: args.dwell,
        startup: window(load.t0, load.t0 + WINDOW),
        load_seconds: load.seconds.len(),
        unknown: match args.compare {
            0 => None,
            secs => Some(compare(gw, srv, &rtnl, secs, &dir.join("daemon.log"))?),
        },
        missed: switches.len() - ms.len(),
        rates_ms_median: median(&ms),
        rates_ms_min: ms.first().copied(),
        rates_ms_max: ms.last().copied(),
        switches,
    })
}

/// Moves the laptop to the network behind `mac` on `net`'s line: the line, the gateway's MAC,
/// the laptop's neighbours flushed, its default route replaced, one ping to the gateway. When the route changed
/// (epoch seconds), and how long after it `net`'s rates were in the kernel.
fn switch(gw: &str, rtnl: &Rtnl, net: &Net, mac: &str) -> anyhow::Result<(f64, Option<Duration>)> {
    line(gw, net)?;
    sh(&format!("ip -n {gw} link set gw0 address {mac}"))?;
    let t0 = now();
    let started = Instant::now();
    sh("ip neigh flush dev wlan0 && ip route replace default via 192.168.1.1 dev wlan0")?;
    // A packet to the gateway resolves its MAC, as a laptop's first packet would (under load
    // the load's own packets do it too).
    let mut first = Command::new("ping")
        .args(["-c", "1", "-W", "1", "192.168.1.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let took = wait_rates(rtnl, net, Duration::from_secs(10)).map(|_| started.elapsed());
    let _ = first.wait();
    Ok((t0, took))
}

/// The load: iperf3 `--bidir`, two streams, to the far end, and a ping every 50 ms beside it.
struct Load {
    t0: f64,
    _server: Killed,
    ping: Killed,
    pings: Arc<Mutex<Vec<Ping>>>,
    iperf: Killed,
    json: std::thread::JoinHandle<String>,
}

/// A finished load: each ping (send time, round trip) and each of iperf3's seconds.
struct Loaded {
    t0: f64,
    pings: Vec<Ping>,
    seconds: Vec<(f64, f64, f64)>,
}

impl Load {
    /// A load of `secs` against an iperf3 server of its own (one test, on `port`) in `srv`.
    fn start(srv: &str, port: u16, secs: u64) -> anyhow::Result<Load> {
        let server = Killed(
            Command::new("ip")
                .args(["netns", "exec", srv, "iperf3", "-s", "-1", "-p"])
                .arg(port.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        );
        std::thread::sleep(Duration::from_millis(500));
        let pings: Arc<Mutex<Vec<Ping>>> = Arc::default();
        let mut ping = Killed(
            Command::new("ping")
                .args(["-D", "-O", "-n", "-i", "0.05", "-W", "1", "10.99.0.2"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?,
        );
        let out = ping
            .0
            .stdout
            .take()
            .ok_or_else(|| anyhow!("ping's output"))?;
        let sink = pings.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(p) = parse_ping(&l) {
                    sink.lock().unwrap_or_else(|e| e.into_inner()).push(p);
                }
            }
        });
        let t0 = now();
        let mut iperf = Killed(
            Command::new("iperf3")
                .args([
                    "-c",
                    "10.99.0.2",
                    "--bidir",
                    "-P",
                    "2",
                    "--json",
                    "-i",
                    "1",
                    "-t",
                ])
                .arg(secs.to_string())
                .arg("-p")
                .arg(port.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?,
        );
        let out = iperf
            .0
            .stdout
            .take()
            .ok_or_else(|| anyhow!("iperf3's output"))?;
        let json = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(out), &mut text);
            text
        });
        Ok(Load {
            t0,
            _server: server,
            ping,
            pings,
            iperf,
            json,
        })
    }

    /// Waits for iperf3's end, then stops the pings.
    fn finish(mut self) -> anyhow::Result<Loaded> {
        let _ = self.iperf.0.wait();
        drop(self.ping);
        let seconds = per_second(&self.json.join().unwrap_or_default(), self.t0)?;
        let pings = self.pings.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(Loaded {
            t0: self.t0,
            pings,
            seconds,
        })
    }
}

impl Loaded {
    /// The round trips sent in `[from, to)` and iperf3's whole seconds inside it.
    fn window(&self, from: f64, to: f64) -> Rtts {
        let mut w = rtts(&self.pings, from, to);
        let inside: Vec<_> = self
            .seconds
            .iter()
            .filter(|(t, ..)| *t >= from && *t + 1.0 <= to + 0.01)
            .collect();
        // No second of iperf3's inside (it ended early): no figure, not a zero.
        let n = inside.len() as f64;
        if n > 0.0 {
            w.down_mbit = inside.iter().map(|s| s.1).sum::<f64>() / n;
            w.up_mbit = inside.iter().map(|s| s.2).sum::<f64>() / n;
        }
        w
    }
}

/// A café: an unknown gateway on home's line, where the interface's table is autorate, against
/// home itself (its table's fixed rates) on the same line: `secs` of load on each.
fn compare(
    gw: &str,
    srv: &str,
    rtnl: &Rtnl,
    secs: u64,
    log: &std::path::Path,
) -> anyhow::Result<Compare> {
    let home = &NETS[0];
    let mut rows = vec![];
    for (port, name, mac) in [
        (5202, "home (fixed 18/4.5)", home.mac),
        (5203, "café (unknown: autorate)", CAFE),
    ] {
        // home's own rates say the move is done; on the café, the base rates of autorate.
        let target = match mac == home.mac {
            true => Net { ..NETS[0] },
            false => Net {
                down: AUTORATE_BASE.0,
                up: AUTORATE_BASE.1,
                ..NETS[0]
            },
        };
        let (_, took) = switch(gw, rtnl, &target, mac)?;
        if took.is_none() {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            bail!(
                "{name}: its rates were not in the kernel within 10 s: {:?}; the daemon's log ends:\n{}",
                kernel_rates(rtnl),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        eprintln!("unbloat-lab bench networks: {name}: {secs} s of load");
        let load = Load::start(srv, port, secs)?.finish()?;
        let end = load.t0 + secs as f64;
        let steady = load.window(load.t0 + WINDOW, end);
        let mut ms: Vec<f64> = load
            .pings
            .iter()
            .filter(|(t, m)| *t >= load.t0 + WINDOW && *t < end && m.is_some())
            .filter_map(|(_, m)| *m)
            .collect();
        ms.sort_by(f64::total_cmp);
        let p99 = ms
            .get(((ms.len().max(1) - 1) as f64 * 0.99).round() as usize)
            .copied();
        rows.push(CompareRow {
            name,
            steady,
            steady_p99_ms: p99.unwrap_or(f64::NAN),
            startup: load.window(load.t0, load.t0 + WINDOW),
        });
    }
    Ok(Compare {
        seconds: secs,
        rows,
    })
}

/// `[1764641234.123456] 64 bytes from 10.99.0.2: icmp_seq=7 ttl=63 time=21.3 ms`, or with
/// `-O` `[...] no answer yet for icmp_seq=8`: the send time (ping prints a reply at its
/// arrival, so the time minus the round trip) and the round trip.
fn parse_ping(l: &str) -> Option<Ping> {
    let stamp: f64 = l.strip_prefix('[')?.split(']').next()?.parse().ok()?;
    if l.contains("no answer yet") {
        return Some((stamp - 1.0, None));
    }
    let ms: f64 = l
        .split("time=")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((stamp - ms / 1000.0, Some(ms)))
}

fn rtts(pings: &[Ping], from: f64, to: f64) -> Rtts {
    let inside: Vec<_> = pings
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .collect();
    let mut ms: Vec<f64> = inside.iter().filter_map(|(_, m)| *m).collect();
    ms.sort_by(f64::total_cmp);
    let q = |p: f64| match ms.len() {
        0 => f64::NAN,
        n => ms[((n - 1) as f64 * p).round() as usize],
    };
    Rtts {
        samples: ms.len(),
        p50_ms: q(0.5),
        p95_ms: q(0.95),
        max_ms: ms.last().copied().unwrap_or(f64::NAN),
        lost: inside.len() - ms.len(),
        down_mbit: f64::NAN,
        up_mbit: f64::NAN,
    }
}

/// The median of sorted values (the mean of the middle two of an even count).
fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// iperf3 `--bidir --json -i 1`'s seconds: (start, epoch seconds; download and upload Mbit/s).
/// With `--bidir`, `sum` is the client's sending (the upload), `sum_bidir_reverse` the download.
fn per_second(json: &str, t0: f64) -> anyhow::Result<Vec<(f64, f64, f64)>> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| anyhow!("iperf3's JSON: {e}"))?;
    if let Some(e) = v["error"].as_str() {
        bail!("iperf3: {e}");
    }
    let mbit = |x: &serde_json::Value| x["bits_per_second"].as_f64().unwrap_or(f64::NAN) / 1e6;
    Ok(v["intervals"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|i| {
                    let start = i["sum"]["start"].as_f64().unwrap_or(0.0);
                    (t0 + start, mbit(&i["sum_bidir_reverse"]), mbit(&i["sum"]))
                })
                .collect()
        })
        .unwrap_or_default())
}

fn render(r: &Report) -> String {
    let mut s = format!(
        "A laptop moved between two networks under load (kernel {}; home: 20/5 Mbit/s line, \
         shaped 18/4.5; office: 40/10, shaped 36/9; 20 ms base RTT; iperf3 --bidir, 2 streams; \
         ping every 50 ms)\n\n",
        r.kernel
    );
    s.push_str(&format!(
        "{:<3} {:<7} {:>12}   {:>20}   {:>22}   {:>20}   {:>15}   {:>15}\n",
        "#",
        "to",
        "rates after",
        "RTT before p50/p95",
        "first 3 s p50/p95/max",
        "steady p50/p95",
        "goodput before",
        "goodput steady"
    ));
    let goodput = |w: &Rtts| match w.down_mbit.is_nan() {
        true => "no load".to_string(),
        false => format!("{:.1}/{:.1}", w.down_mbit, w.up_mbit),
    };
    for (i, w) in r.switches.iter().enumerate() {
        s.push_str(&format!(
            "{:<3} {:<7} {:>12}   {:>20}   {:>22}   {:>20}   {:>15}   {:>15}\n",
            i + 1,
            w.to,
            w.rates_ms.map_or("missed".into(), |m| format!("{m:.0} ms")),
            format!("{:.1}/{:.1} ms", w.before.p50_ms, w.before.p95_ms),
            format!(
                "{:.1}/{:.1}/{:.0} ms",
                w.during.p50_ms, w.during.p95_ms, w.during.max_ms
            ),
            format!("{:.1}/{:.1} ms", w.after.p50_ms, w.after.p95_ms),
            goodput(&w.before),
            goodput(&w.after),
        ));
    }
    match (r.rates_ms_median, r.rates_ms_min, r.rates_ms_max) {
        (Some(m), Some(lo), Some(hi)) => {
            s.push_str(&format!(
            "\nFrom the route change to the new network's rates in the kernel: median {m:.0} ms \
             (range {lo:.0} to {hi:.0} ms) over {} switches{}.\n",
            r.switches.len() - r.missed,
            if r.missed > 0 { format!("; {} missed", r.missed) } else { String::new() }
        ))
        }
        _ => s.push_str("\nNo switch's rates reached the kernel within 10 s.\n"),
    }
    s.push_str(&format!(
        "The load's start-up on home (its first 3 s, before any switch): p50/p95/max {:.1}/{:.1}/{:.0} ms. \
         Goodput: iperf3's, down/up Mbit/s, over the window's whole seconds ({} s reported).\n",
        r.startup.p50_ms, r.startup.p95_ms, r.startup.max_ms, r.load_seconds
    ));
    if let Some(c) = &r.unknown {
        s.push_str(&format!(
            "\nAn unknown network (autorate, the interface's table) against a known one (fixed), on \
             the same 20/5 Mbit/s line, {} s of load each; steady = after the first 3 s:\n\n",
            c.seconds
        ));
        s.push_str(&format!(
            "{:<26} {:>24} {:>18} {:>20}\n",
            "network", "steady p50/p95/p99", "goodput down/up", "start-up peak (3 s)"
        ));
        for row in &c.rows {
            s.push_str(&format!(
                "{:<26} {:>24} {:>18} {:>20}\n",
                row.name,
                format!(
                    "{:.1}/{:.1}/{:.1} ms",
                    row.steady.p50_ms, row.steady.p95_ms, row.steady_p99_ms
                ),
                format!(
                    "{:.1}/{:.1} Mbit/s",
                    row.steady.down_mbit, row.steady.up_mbit
                ),
                format!("{:.0} ms", row.startup.max_ms),
            ));
        }
    }
    s.push_str(&format!(
        "\nWindows: before = the 3 s before the switch; first 3 s = from the route change; steady = \
         from 3 s after it to the next switch ({} s apart).\n",
        r.dwell_s
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_are_read_at_their_send_time_and_missing_answers_counted() {
        let p = parse_ping(
            "[1764641234.500000] 64 bytes from 10.99.0.2: icmp_seq=7 ttl=63 time=100 ms",
        );
        assert_eq!(p, Some((1764641234.4, Some(100.0))));
        let lost = parse_ping("[1764641235.000000] no answer yet for icmp_seq=8").unwrap();
        assert_eq!(lost.1, None);
        assert_eq!(
            parse_ping("PING 10.99.0.2 (10.99.0.2) 56(84) bytes of data."),
            None
        );
        let all = [
            (1.0, Some(10.0)),
            (1.5, Some(30.0)),
            (2.0, None),
            (3.0, Some(99.0)),
        ];
        let r = rtts(&all, 1.0, 3.0);
        assert_eq!((r.samples, r.lost, r.p50_ms, r.max_ms), (2, 1, 30.0, 30.0));
        assert_eq!(median(&[1.0, 2.0, 4.0, 9.0]), Some(3.0));
        assert_eq!(median(&[1.0, 2.0, 4.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }
}
