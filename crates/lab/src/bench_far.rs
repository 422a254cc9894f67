//! `unbloat-lab bench far-ends`: the stock far ends measured against their own clients, on the same
//! shaped link, in the same run (issue 12's accuracy benchmark).
//!
//! The link is the test bench's [`Testbed`]: a sender, a router shaped by the host's HTB (a kernel every
//! machine has; no UML needed), a receiver. The server side (`a`) runs the stock servers
//! (iperf3, irtt, nginx over TLS with the lab's certificate authority), the client side (`b`)
//! runs unbloat's far-end clients and the reference clients, one after the other.
//!
//! - **Goodput** at 20 Mbit/s, the first 2 s left out of both: unbloat's iperf3 load against
//!   `iperf3 -c`, and unbloat's HTTP load against `iperf3 -c` (target: within 3 %).
//! - **UDP round trips**: unbloat's irtt probes against `irtt client` on the same path at the
//!   same time, p50/p90/p99 (target: within 1 ms).
//! - **CPU** at 100 Mbit/s: the HTTP load's CPU seconds per gigabit against iperf3's client.
//! - **RPM** on the 20 Mbit/s link with a bloated 1000-packet FIFO: unbloat's draft figure from
//!   its raw probe times, and the reference client's (goresponsiveness, when
//!   `UNBLOAT_GORESPONSIVENESS` names it: network-quality/goresponsiveness, not vendored).
//!
//! What callers can rely on: a part that cannot run here is reported as not measured, with why;
//! it never fails the others. Run as root (namespaces).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use unbloat_measure::http::{self, HttpOptions};
use unbloat_measure::profile::StreamPlan;
use unbloat_report::Direction;
use unbloat_shaper::invocation::{FarEnd, Invocation, Test};
use unbloat_testbed::netns::{call_in, wait_listening, Netns, Reaped, Testbed};
use unbloat_units::Time;

use crate::bench_measure::iperf3::{compare_with_iperf3_client, Comparison};
use crate::bench_measure::irtt::{compare_with_irtt_client, IrttComparison, IrttServer};
use crate::bench_measure::{http::load_cpu_cost, Part};
use crate::farend::Site;

/// The shaped rate of the accuracy parts, and of the CPU part.
const RATE: u64 = 20_000_000;
const CPU_RATE: u64 = 100_000_000;
/// Left out at the start of every goodput window, and the window after it.
const SKIP: Duration = Duration::from_secs(2);
const WINDOW: Duration = Duration::from_secs(6);

/// One goodput comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GoodputRow {
    pub what: String,
    pub unbloat_bps: f64,
    pub iperf3_bps: f64,
    pub ratio: f64,
    pub pass: bool,
}

/// CPU per gigabit, unbloat's HTTP load against iperf3's client, at the same shaped rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuRow {
    pub direction: String,
    pub http_bps: f64,
    pub http_cpu_s_per_gbit: f64,
    pub iperf3_bps: f64,
    pub iperf3_cpu_s_per_gbit: f64,
    /// HTTP / iperf3.
    pub ratio: f64,
}

/// RPM on the bloated link: unbloat's (the draft's formula over its raw probes) and the
/// reference client's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RpmRow {
    pub unbloat_rpm: Option<f64>,
    pub unbloat_foreign_ms: Option<f64>,
    pub unbloat_self_ms: Option<f64>,
    pub goresponsiveness: Part<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FarEndsBench {
    pub goodput: Vec<Part<GoodputRow>>,
    pub irtt: Part<IrttComparison>,
    pub cpu: Vec<Part<CpuRow>>,
    pub rpm: Part<RpmRow>,
}

/// nginx with the lab's site on `addr` in `ns`, until dropped (the site goes with it).
struct Nginx {
    _child: Reaped,
    site: Site,
}

impl Nginx {
    fn start(ns: &Netns, addr: Ipv4Addr) -> Result<Nginx, String> {
        let site = Site::make(addr, &std::env::temp_dir()).map_err(|e| e.to_string())?;
        let argv = site.argv();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let child = ns
            .command(&argv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("nginx could not start ({e}); run scripts/install-deps"))?;
        let child = Reaped(child);
        wait_listening(Some(ns), crate::farend::HTTPS_PORT).map_err(|e| format!("nginx: {e}"))?;
        Ok(Nginx {
            _child: child,
            site,
        })
    }

    fn opts(&self) -> HttpOptions {
        HttpOptions {
            ca_file: Some(self.site.ca_file()),
            ..HttpOptions::default()
        }
    }
}

/// The HTTP load's goodput in `direction` over [`WINDOW`] after [`SKIP`].
fn http_goodput(bed: &Testbed, nginx: &Nginx, direction: Direction) -> Result<f64, String> {
    let opts = nginx.opts();
    let target = call_in(Some(&bed.b), {
        let (t, o) = (nginx.site.config_url(), opts.clone());
        move || http::discover(&t, &o).map_err(|e| e.to_string())
    })??;
    call_in(Some(&bed.b), move || -> Result<f64, String> {
        let plan = StreamPlan {
            name: "bench".into(),
            direction,
            dscp: 0,
        };
        let (mut load, probes) =
            http::open(&target, &[plan], &opts, Instant::now()).map_err(|e| e.to_string())?;
        let _ = probes.finish(Duration::ZERO, 0);
        load.start().map_err(|e| e.to_string())?;
        std::thread::sleep(SKIP);
        let before: u64 = load.bytes().iter().sum();
        let started = Instant::now();
        std::thread::sleep(WINDOW);
        let after: u64 = load.bytes().iter().sum();
        let seconds = started.elapsed().as_secs_f64();
        let failed = load.error();
        load.stop();
        match failed {
            Some(why) => Err(why),
            None => Ok(after.saturating_sub(before) as f64 * 8.0 / seconds),
        }
    })?
}

/// iperf3's own client: (goodput bit/s, CPU seconds per gigabit), 4 streams, [`SKIP`] omitted.
fn iperf3_client(
    bed: &Testbed,
    server: IpAddr,
    direction: Direction,
) -> Result<(f64, f64), String> {
    let port = free_port(&bed.a, server)?;
    let port_s = port.to_string();
    let server_s = server.to_string();
    let _server = Reaped(
        bed.a
            .command(&["iperf3", "-s", "-1", "-B", &server_s, "-p", &port_s])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("iperf3 could not start ({e}); run scripts/install-deps"))?,
    );
    wait_listening(Some(&bed.a), port).map_err(|e| format!("iperf3 -s: {e}"))?;
    let (t, o) = (WINDOW.as_secs().to_string(), SKIP.as_secs().to_string());
    let mut argv = vec![
        "iperf3", "-c", &server_s, "-p", &port_s, "-P", "4", "-t", &t, "-O", &o, "-J",
    ];
    if direction == Direction::Down {
        argv.push("-R");
    }
    let out = bed.b.exec(&argv).map_err(|e| e.to_string())?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("iperf3 -J printed no JSON: {e}"))?;
    let end = &json["end"];
    let bps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or("iperf3's JSON has no end.sum_received")?;
    // iperf3's own getrusage over its run, in percent of one CPU.
    let cpu_pct = end["cpu_utilization_percent"]["host_total"]
        .as_f64()
        .ok_or("iperf3's JSON has no cpu_utilization_percent")?;
    // CPU seconds per second over gigabits per second: CPU seconds per gigabit.
    Ok((bps, cpu_pct / 100.0 / (bps / 1e9).max(1e-12)))
}

fn free_port(ns: &Netns, ip: IpAddr) -> Result<u16, String> {
    call_in(Some(ns), move || {
        std::net::TcpListener::bind((ip, 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port on {ip}: {e}"))
    })?
}

fn goodput_part(what: &str, got: Result<(f64, f64), String>) -> Part<GoodputRow> {
    got.map(|(unbloat_bps, iperf3_bps)| {
        let ratio = unbloat_bps / iperf3_bps;
        GoodputRow {
            what: what.into(),
            unbloat_bps,
            iperf3_bps,
            ratio,
            pass: (ratio - 1.0).abs() <= 0.03,
        }
    })
    .into()
}

fn cpu_part(bed: &Testbed, nginx: &Nginx, direction: Direction) -> Result<CpuRow, String> {
    let opts = nginx.opts();
    let target = call_in(Some(&bed.b), {
        let (t, o) = (nginx.site.config_url(), opts.clone());
        move || http::discover(&t, &o).map_err(|e| e.to_string())
    })??;
    // The HTTP load runs alone in a thread of this process; getrusage counts every thread, and
    // nothing else of this process runs meanwhile.
    let cost = call_in(Some(&bed.b), move || {
        load_cpu_cost(&target, direction, SKIP + WINDOW, &opts).map_err(|e| e.to_string())
    })??;
    let (iperf3_bps, iperf3_cpu) = iperf3_client(bed, bed.ip4_a.into(), direction)?;
    Ok(CpuRow {
        direction: format!("{direction:?}").to_lowercase(),
        http_bps: cost.bps(),
        http_cpu_s_per_gbit: cost.cpu_s_per_gbit(),
        iperf3_bps,
        iperf3_cpu_s_per_gbit: iperf3_cpu,
        ratio: cost.cpu_s_per_gbit() / iperf3_cpu,
    })
}

fn rpm_part(bed: &Testbed, nginx: &Nginx, exe: &std::path::Path) -> Result<RpmRow, String> {
    let config = nginx.site.config_url();
    let test = Invocation::Test(Test {
        far_end: FarEnd {
            server: Some(config.clone()),
            ca_file: Some(nginx.site.ca_file()),
            ..FarEnd::default()
        },
        profile: Some("rrul_be".into()),
        duration: Some(Time::from_secs(10)),
        idle: Some(Time::from_secs(3)),
        json: true,
        ..Test::default()
    });
    let exe = exe.display().to_string();
    let argv = test.argv().map_err(|e| e.to_string())?;
    let argv: Vec<&str> = std::iter::once(exe.as_str())
        .chain(argv.iter().map(String::as_str))
        .collect();
    let out = bed.b.exec(&argv).map_err(|e| e.to_string())?;
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "unbloat test printed no summary ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )
    })?;
    let r = &summary["responsiveness"];
    let goresponsiveness = match std::env::var("UNBLOAT_GORESPONSIVENESS") {
        Ok(client) => {
            let out = bed
                .b
                .exec(&[&client, "-url", &config, "-rpm.timeout", "20"])
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout);
            text.lines()
                .filter(|l| l.contains("RPM"))
                .map(str::trim)
                .collect::<Vec<_>>()
                .join("; ")
                .pipe_ok("goresponsiveness printed no RPM")
        }
        Err(_) => Err("UNBLOAT_GORESPONSIVENESS does not name the reference client".into()),
    };
    Ok(RpmRow {
        unbloat_rpm: r["rpm"].as_f64(),
        unbloat_foreign_ms: r["foreign_ms"].as_f64(),
        unbloat_self_ms: r["self_ms"].as_f64(),
        goresponsiveness: goresponsiveness.into(),
    })
}

trait PipeOk {
    fn pipe_ok(self, empty: &str) -> Result<String, String>;
}

impl PipeOk for String {
    /// The text, or `empty` as an error when there is none.
    fn pipe_ok(self, empty: &str) -> Result<String, String> {
        if self.is_empty() {
            Err(empty.to_string())
        } else {
            Ok(self)
        }
    }
}

/// Runs every part on one testbed; `exe` is the unbloat binary (the RPM part runs `unbloat test`).
pub fn run(exe: &std::path::Path) -> Result<FarEndsBench, String> {
    let bed = Testbed::new().map_err(|e| format!("no namespaces ({e}); run as root"))?;
    let server: IpAddr = bed.ip4_a.into();
    bed.shape_htb(RATE, 100).map_err(|e| e.to_string())?;
    let mut goodput = Vec::new();
    for direction in [Direction::Down, Direction::Up] {
        let what = Comparison {
            direction,
            streams: 4,
            skip: SKIP,
            measure: WINDOW,
        };
        let got = compare_with_iperf3_client(Some(&bed.a), Some(&bed.b), server, &what)
            .map(|c| (c.unbloat_bps, c.iperf3_bps));
        goodput.push(goodput_part(&format!("iperf3 far end, {direction:?}"), got));
    }
    let nginx = Nginx::start(&bed.a, bed.ip4_a);
    for direction in [Direction::Down, Direction::Up] {
        let got = nginx.as_ref().map_err(Clone::clone).and_then(|n| {
            let http = http_goodput(&bed, n, direction)?;
            let (iperf3, _) = iperf3_client(&bed, server, direction)?;
            Ok((http, iperf3))
        });
        goodput.push(goodput_part(
            &format!("web server far end, {direction:?}"),
            got,
        ));
    }
    let irtt = IrttServer::start(Some(&bed.a), server, &[]).and_then(|s| {
        compare_with_irtt_client(
            Some(&bed.b),
            SocketAddr::new(server, s.addr.port()),
            Duration::from_millis(10),
            Duration::from_secs(10),
            true,
            "20 Mbit/s HTB router, idle",
        )
    });
    bed.shape_htb(RATE, 1000).map_err(|e| e.to_string())?;
    let rpm = nginx
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|n| rpm_part(&bed, n, exe));
    bed.shape_htb(CPU_RATE, 1000).map_err(|e| e.to_string())?;
    let cpu = [Direction::Down, Direction::Up]
        .into_iter()
        .map(|d| {
            nginx
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|n| cpu_part(&bed, n, d))
                .into()
        })
        .collect();
    Ok(FarEndsBench {
        goodput,
        irtt: irtt.into(),
        cpu,
        rpm: rpm.into(),
    })
}

fn part_text<T>(p: &Part<T>, f: impl Fn(&T) -> String) -> String {
    match (&p.value, &p.not_measured) {
        (Some(v), _) => f(v),
        (None, why) => format!("not measured: {}", why.as_deref().unwrap_or("unknown")),
    }
}

/// The report as text.
pub fn render(b: &FarEndsBench) -> String {
    let mbit = |b: f64| format!("{:.2} Mbit/s", b / 1e6);
    let mut out = String::from("goodput through a 20 Mbit/s HTB router, first 2 s left out, 6 s (target: within 3 % of iperf3's own client)\n");
    for g in &b.goodput {
        out.push_str(&format!(
            "  {}\n",
            part_text(g, |g| format!(
                "{:<28} unbloat {}  iperf3 -c {}  ratio {:.4}  {}",
                g.what,
                mbit(g.unbloat_bps),
                mbit(g.iperf3_bps),
                g.ratio,
                if g.pass { "pass" } else { "FAIL" }
            ))
        ));
    }
    out.push_str("UDP round trips against irtt's own client, same path, same time, 10 ms interval (target: within 1 ms)\n");
    out.push_str(&format!(
        "  {}\n",
        part_text(&b.irtt, |c| format!(
            "unbloat p50/p90/p99 {:.3}/{:.3}/{:.3} ms  irtt {:.3}/{:.3}/{:.3} ms  largest difference {:.3} ms  {}",
            c.unbloat.p50_ms, c.unbloat.p90_ms, c.unbloat.p99_ms,
            c.irtt.p50_ms, c.irtt.p90_ms, c.irtt.p99_ms,
            c.max_diff_ms,
            if c.pass { "pass" } else { "FAIL" }
        ))
    ));
    out.push_str(
        "RPM on the 20 Mbit/s link with a 1000-packet FIFO (bloated), rrul_be over HTTPS\n",
    );
    out.push_str(&format!(
        "  {}\n",
        part_text(&b.rpm, |r| format!(
            "unbloat {} RPM (new connections {} ms, loaded {} ms); goresponsiveness: {}",
            r.unbloat_rpm.map_or("-".into(), |v| format!("{v:.0}")),
            r.unbloat_foreign_ms
                .map_or("-".into(), |v| format!("{v:.1}")),
            r.unbloat_self_ms.map_or("-".into(), |v| format!("{v:.1}")),
            part_text(&r.goresponsiveness, String::clone)
        ))
    ));
    out.push_str("CPU of the load at 100 Mbit/s: the HTTP(S) load against iperf3's client, CPU seconds per Gbit\n");
    for c in &b.cpu {
        out.push_str(&format!(
            "  {}\n",
            part_text(c, |c| format!(
                "{:<5} HTTP {:.3} s/Gbit at {}  iperf3 -c {:.3} s/Gbit at {}  ratio {:.2}x",
                c.direction,
                c.http_cpu_s_per_gbit,
                mbit(c.http_bps),
                c.iperf3_cpu_s_per_gbit,
                mbit(c.iperf3_bps),
                c.ratio
            ))
        ));
    }
    out
}
