//! Accuracy benchmarks of the measuring engine (issue 3, "Accuracy"), run in network namespaces
//! on this machine against the reference tools:
//!
//! - (a) goodput through a router shaped to 20 Mbit/s by the host's HTB: unbloat vs `iperf3`
//!   on the same link (target: within 3 %);
//! - (b) idle round trip vs `ping`, on the bare veth path and over an emulated 20 ms path
//!   (netem, which needs a kernel that has it: the host's or User-Mode Linux via
//!   `unbloat_testbed::kernel`; target: within 0.3 ms);
//! - (c) probe send lag (how late probes leave their schedule) under load: p50, p99, max;
//! - (d) unshaped loopback: unbloat's load generator vs `iperf3` (target: at least 80 %).
//!
//! What callers can rely on: a part that cannot run here (no root, no iperf3, no ping, no
//! kernel with netem) is reported as not measured, with the reason; it never fails the others.
//! Total run time is about a minute (plus a UML boot for the netem part).

pub mod http;
pub mod iperf3;
pub mod irtt;

use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use unbloat_report::{Direction, ProbeKind, Results};

use unbloat_measure::client::{NoProgress, TestPlan};
use unbloat_measure::profile::Profile;
use unbloat_measure::server::{BackgroundServer, ServeOptions, Server};
use unbloat_measure::timeline::run_plan;
use unbloat_testbed::netns::{self, Netns, NetnsError, Testbed};

/// The argument `unbloat-lab bench measure` takes to run only the netem round-trip part (inside a
/// User-Mode Linux guest) and print its JSON.
pub const NETEM_PART_ARG: &str = "--netem-rtt-part";

/// A goodput comparison against iperf3.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Goodput {
    pub unbloat_bps: f64,
    pub iperf3_bps: f64,
    /// unbloat / iperf3.
    pub ratio: f64,
    pub target: String,
    pub pass: bool,
}

/// An idle round-trip comparison against ping.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdleRtt {
    pub path: String,
    pub unbloat_udp_ms: f64,
    pub unbloat_icmp_ms: Option<f64>,
    pub ping_ms: f64,
    /// unbloat UDP median minus ping median.
    pub diff_ms: f64,
    pub pass: bool,
}

/// Probe send lag (lateness against the schedule) while load runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendLag {
    pub during: String,
    pub probes: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// One part's outcome: a value, or why it was not measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part<T> {
    pub value: Option<T>,
    pub not_measured: Option<String>,
}

impl<T> From<Result<T, String>> for Part<T> {
    fn from(r: Result<T, String>) -> Self {
        match r {
            Ok(v) => Part {
                value: Some(v),
                not_measured: None,
            },
            Err(why) => Part {
                value: None,
                not_measured: Some(why),
            },
        }
    }
}

/// Everything the benchmark measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    pub shaped_goodput: Part<Goodput>,
    pub idle_rtt_veth: Part<IdleRtt>,
    pub idle_rtt_netem_20ms: Part<IdleRtt>,
    pub send_lag: Vec<SendLag>,
    pub loopback_goodput: Part<Goodput>,
}

fn quantile(mut v: Vec<f64>, p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    Some(v[i])
}

fn plan(remote: SocketAddr, profile: &str, idle: f64, load: f64) -> Result<TestPlan, String> {
    let profile = Profile::by_name(profile)
        .and_then(|p| p.resolve(None))
        .map_err(|e| e.to_string())?;
    Ok(TestPlan {
        remote: remote.to_string(),
        far_ends: unbloat_measure::farend::FarEnds::unbloat(&remote.to_string())
            .map_err(|e| e.to_string())?,
        profile,
        idle_before: Duration::from_secs_f64(idle),
        load: Duration::from_secs_f64(load),
        idle_after: Duration::from_secs_f64(idle),
        probe_interval: Duration::from_millis(100),
        connect_timeout: Duration::from_secs(3),
        command_line: vec!["bench".into()],
        locate: false,
    })
}

fn server_in(ns: Option<&Netns>, ip: IpAddr) -> Result<BackgroundServer, String> {
    let start = move || {
        let opts = ServeOptions {
            listen: Some(SocketAddr::new(ip, 0)),
            log: false,
            ..Default::default()
        };
        Server::bind(opts).and_then(|(s, a)| s.spawn(a))
    };
    netns::call_in(ns, start)?.map_err(|e| e.to_string())
}

fn client_in(ns: Option<&Netns>, plan: TestPlan) -> Result<Results, String> {
    netns::call_in(ns, move || {
        run_plan(&plan, &mut NoProgress).map_err(|e| e.to_string())
    })?
}

/// Mean download goodput over the load phase, skipping its first second (slow start).
fn download_goodput(r: &Results) -> f64 {
    let (from, to) = (r.phases.load_start() + 1.0, r.phases.load_end());
    r.streams
        .iter()
        .filter(|s| s.direction == Direction::Down)
        .map(|s| {
            let w: Vec<f64> = s
                .samples
                .iter()
                .filter(|x| x.t >= from && x.t < to)
                .map(|x| x.bps)
                .collect();
            if w.is_empty() {
                0.0
            } else {
                w.iter().sum::<f64>() / w.len() as f64
            }
        })
        .sum()
}

fn send_lag(r: &Results, during: &str) -> SendLag {
    let (from, to) = (r.phases.load_start(), r.phases.load_end());
    let lags: Vec<f64> = r
        .probes
        .iter()
        .flat_map(|p| p.samples.iter())
        .filter(|s| s.t >= from && s.t < to)
        .map(|s| s.send_lag_ms)
        .collect();
    SendLag {
        during: during.to_string(),
        probes: lags.len(),
        p50_ms: quantile(lags.clone(), 0.5).unwrap_or(f64::NAN),
        p99_ms: quantile(lags.clone(), 0.99).unwrap_or(f64::NAN),
        max_ms: lags.iter().copied().fold(f64::NAN, f64::max),
    }
}

/// iperf3's received goodput with `streams` reverse (download) streams for `secs`, the first
/// second omitted (as unbloat's figure skips it).
fn iperf3(
    server_ns: Option<&Netns>,
    client_ns: Option<&Netns>,
    ip: IpAddr,
    secs: u32,
    streams: u32,
) -> Result<f64, String> {
    let port = (20_000 + std::process::id() % 20_000).to_string();
    let ip_text = ip.to_string();
    let server = netns::command_in(server_ns, &["iperf3", "-s", "-1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 could not start ({e}); install iperf3"))?;
    let _server = netns::Reaped(server);
    let (secs, streams) = (secs.to_string(), streams.to_string());
    let argv = [
        "iperf3", "-c", &ip_text, "-p", &port, "-t", &secs, "-O", "1", "-P", &streams, "-R", "-J",
    ];
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(200));
        let out = netns::command_in(client_ns, &argv)
            .output()
            .map_err(|e| format!("iperf3 client: {e}"))?;
        let json: serde_json::Value = match serde_json::from_slice(&out.stdout) {
            Ok(v) => v,
            Err(e) => return Err(format!("iperf3 printed no JSON: {e}")),
        };
        if let Some(err) = json.get("error").and_then(|e| e.as_str()) {
            if err.contains("refused") {
                continue; // the server is not listening yet
            }
            return Err(format!("iperf3: {err}"));
        }
        return json["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .ok_or_else(|| "iperf3 JSON has no end.sum_received.bits_per_second".to_string());
    }
    Err("the iperf3 server never accepted a connection".into())
}

/// The median of ping's per-packet times.
fn ping_median(ns: Option<&Netns>, ip: IpAddr, count: u32) -> Result<f64, String> {
    let (ip, count) = (ip.to_string(), count.to_string());
    let out = netns::command_in(ns, &["ping", "-n", "-c", &count, "-i", "0.1", &ip])
        .output()
        .map_err(|e| format!("ping could not run ({e}); install iputils-ping"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let times: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.trim_end_matches(" ms").trim().parse().ok())
        .collect();
    quantile(times, 0.5).ok_or_else(|| format!("ping got no reply: {}", text.trim()))
}

/// Idle round trip of unbloat's probes vs ping between `client_ns` and a server at `ip`.
fn idle_rtt(bed: &Testbed, ip: IpAddr, path: &str, tolerance_ms: f64) -> Result<IdleRtt, String> {
    let server = server_in(Some(&bed.a), ip)?;
    let results = client_in(Some(&bed.b), plan(server.addr, "ping", 3.0, 1.0)?)?;
    drop(server);
    let median = |kind: ProbeKind| {
        quantile(
            results
                .probes
                .iter()
                .filter(|p| p.kind == kind)
                .flat_map(|p| p.samples.iter().filter_map(|s| s.rtt_ms))
                .collect(),
            0.5,
        )
    };
    let udp = median(ProbeKind::Udp).ok_or("no UDP probe was answered")?;
    let ping = ping_median(Some(&bed.b), ip, 30)?;
    let diff = udp - ping;
    Ok(IdleRtt {
        path: path.into(),
        unbloat_udp_ms: udp,
        unbloat_icmp_ms: median(ProbeKind::Icmp),
        ping_ms: ping,
        diff_ms: diff,
        pass: diff.abs() <= tolerance_ms,
    })
}

/// The netem part: a 20 ms round trip (10 ms each way on the router), unbloat vs ping. Runs
/// where netem exists (called inside the UML guest by the benchmark binary).
pub fn netem_idle_rtt() -> Result<IdleRtt, String> {
    let bed = Testbed::new().map_err(|e| e.to_string())?;
    for dev in [&bed.dev_ra, &bed.dev_rb] {
        netns::run(&[
            "tc",
            "-n",
            &bed.r.name,
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "netem",
            "delay",
            "10ms",
        ])
        .map_err(|e| e.to_string())?;
    }
    idle_rtt(
        &bed,
        bed.ip4_a.into(),
        "veth through a router, netem 2 x 10 ms",
        0.3,
    )
}

fn shaped(bed: &Testbed, lags: &mut Vec<SendLag>) -> Result<Goodput, String> {
    // A 100-packet FIFO (60 ms) keeps the link busy without long loss recoveries.
    bed.shape_htb(20_000_000, 100).map_err(|e| e.to_string())?;
    let ip: IpAddr = bed.ip4_a.into();
    let server = server_in(Some(&bed.a), ip)?;
    let results = client_in(Some(&bed.b), plan(server.addr, "tcp_ndown", 1.0, 10.0)?)?;
    drop(server);
    lags.push(send_lag(
        &results,
        "4 downloads through the 20 Mbit/s HTB link",
    ));
    let unbloat = download_goodput(&results);
    let reference = iperf3(Some(&bed.a), Some(&bed.b), ip, 10, 4)?;
    let ratio = unbloat / reference;
    Ok(Goodput {
        unbloat_bps: unbloat,
        iperf3_bps: reference,
        ratio,
        target: "within 3 %".into(),
        pass: (ratio - 1.0).abs() <= 0.03,
    })
}

fn loopback(lags: &mut Vec<SendLag>) -> Result<Goodput, String> {
    let ip: IpAddr = [127, 0, 0, 1].into();
    let server = server_in(None, ip)?;
    let results = client_in(None, plan(server.addr, "tcp_ndown", 1.0, 5.0)?)?;
    drop(server);
    lags.push(send_lag(
        &results,
        "4 downloads over unshaped loopback (CPU saturated)",
    ));
    let unbloat = download_goodput(&results);
    let reference = iperf3(None, None, ip, 5, 4)?;
    let ratio = unbloat / reference;
    Ok(Goodput {
        unbloat_bps: unbloat,
        iperf3_bps: reference,
        ratio,
        target: ">= 80 %".into(),
        pass: ratio >= 0.8,
    })
}

/// Runs every part. `netem` runs part (b) over the 20 ms path and returns its outcome (the
/// binary boots a UML guest for it); `None` reports it as not measured.
pub fn run(netem: impl FnOnce() -> Result<IdleRtt, String>) -> BenchReport {
    let mut lags = Vec::new();
    let bed = Testbed::new().map_err(|e: NetnsError| format!("no namespaces ({e}); run as root"));
    let (shaped_goodput, idle_rtt_veth) = match &bed {
        Ok(bed) => {
            let veth = idle_rtt(
                bed,
                bed.ip4_a.into(),
                "veth through a router, no added delay",
                0.3,
            );
            (shaped(bed, &mut lags), veth)
        }
        Err(e) => (Err(e.clone()), Err(e.clone())),
    };
    drop(bed);
    let loopback_goodput = loopback(&mut lags);
    BenchReport {
        shaped_goodput: shaped_goodput.into(),
        idle_rtt_veth: idle_rtt_veth.into(),
        idle_rtt_netem_20ms: netem().into(),
        send_lag: lags,
        loopback_goodput: loopback_goodput.into(),
    }
}

/// The report as a table for the terminal.
pub fn table(r: &BenchReport) -> String {
    let mut out = String::new();
    let verdict = |pass: bool| if pass { "ok" } else { "MISSED" };
    let goodput = |name: &str, p: &Part<Goodput>, out: &mut String| {
        match (&p.value, &p.not_measured) {
        (Some(g), _) => out.push_str(&format!(
            "{name:<34} unbloat {:>10.3} Mbit/s  iperf3 {:>10.3} Mbit/s  ratio {:.3} (target {}) {}\n",
            g.unbloat_bps / 1e6,
            g.iperf3_bps / 1e6,
            g.ratio,
            g.target,
            verdict(g.pass)
        )),
        (None, why) => out.push_str(&format!("{name:<34} not measured: {}\n", why.as_deref().unwrap_or("?"))),
    }
    };
    goodput("(a) goodput, HTB 20 Mbit/s", &r.shaped_goodput, &mut out);
    for (name, p) in [
        ("(b) idle RTT, bare veth path", &r.idle_rtt_veth),
        ("(b) idle RTT, netem 20 ms path", &r.idle_rtt_netem_20ms),
    ] {
        match (&p.value, &p.not_measured) {
            (Some(v), _) => out.push_str(&format!(
                "{name:<34} unbloat UDP {:.3} ms, ICMP {}  ping {:.3} ms  diff {:+.3} ms (target 0.3 ms) {}\n",
                v.unbloat_udp_ms,
                v.unbloat_icmp_ms.map(|m| format!("{m:.3} ms")).unwrap_or_else(|| "-".into()),
                v.ping_ms,
                v.diff_ms,
                verdict(v.pass)
            )),
            (None, why) => out.push_str(&format!("{name:<34} not measured: {}\n", why.as_deref().unwrap_or("?"))),
        }
    }
    for l in &r.send_lag {
        out.push_str(&format!(
            "(c) probe send lag                 p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms over {} probes, {}\n",
            l.p50_ms, l.p99_ms, l.max_ms, l.probes, l.during
        ));
    }
    goodput(
        "(d) goodput, loopback unshaped",
        &r.loopback_goodput,
        &mut out,
    );
    out
}
