//! `unbloat-lab bench soak` (issue 53 §3): the daemon kept busy for thousands of events, with its
//! memory, open files and threads read throughout ([`crate::procstat`]).
//!
//! In a kernel with cake and a namespace of the caller's (the command re-runs itself in
//! User-Mode Linux when this kernel lacks cake, and enters a private namespace), `unbloat daemon`
//! keeps `wan0`, a veth, shaped both ways with cake (its IFB for the download). Each iteration:
//!
//! - `wan0` is deleted and created again, and the time until cake is on it again is its
//!   shaping gap (read with `tc -j qdisc show` every 10 ms, from the `ip link add`);
//! - the metrics and the page's status (`/api/status`) are scraped once each;
//! - every `reload_every`-th, the config's upload rate changes and `unbloat reload` asks the
//!   daemon to apply it.
//!
//! Flat is the goal: the daemon's resident memory, files and threads at the end as after the
//! first tenth (the first tenth is its warm-up: allocator arenas, the first thread stacks).

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::procstat::{self, Reading};

const METRICS: &str = "127.0.0.1:19937";
const WEB: &str = "127.0.0.1:19938";
/// A gap counted apart: `crates/cli/tests/daemon.rs` allows its re-creations no longer.
const LONG_GAP: Duration = Duration::from_secs(5);
/// A gap longer than this is a failure to shape again, and ends the run.
const GIVE_UP: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct SoakArgs {
    pub iterations: usize,
    /// The run ends after this long, however many iterations it made.
    pub max_seconds: f64,
    pub reload_every: usize,
}

/// The daemon after a number of iterations.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Point {
    pub iteration: usize,
    pub seconds: f64,
    #[serde(flatten)]
    pub reading: Reading,
}

#[derive(Debug, Clone, Serialize)]
pub struct SoakBench {
    pub version: u32,
    pub kernel: String,
    pub iterations: usize,
    pub seconds: f64,
    /// `wan0` deleted and created again.
    pub recreations: usize,
    pub reloads_ok: usize,
    pub reloads_failed: usize,
    pub scrapes: usize,
    pub scrape_failures: usize,
    /// The daemon's own counters at the end (its metrics).
    pub link_events: u64,
    pub daemon_reloads: u64,
    /// From `ip link add` to cake on `wan0` again, ms.
    pub gap_ms_p50: f64,
    pub gap_ms_p99: f64,
    pub gap_ms_max: f64,
    /// The iteration of the longest gap (0: the first shaping, at the daemon's start).
    pub gap_max_at: usize,
    /// Gaps over [`LONG_GAP`].
    pub gaps_over_5s: usize,
    /// IFB devices at the end (wan0's own: 1).
    pub ifbs_at_end: usize,
    /// At the start (wan0 first shaped), after each tenth, and at the end.
    pub points: Vec<Point>,
    pub peak: Reading,
}

#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("{what}: {why}")]
    Failed { what: String, why: String },
}

fn failed(what: impl Into<String>, why: impl std::fmt::Display) -> SoakError {
    SoakError::Failed {
        what: what.into(),
        why: why.to_string(),
    }
}

/// Runs the soak with `exe` as the daemon, in `dir` (a private directory: config and run
/// directory), in the calling process's network namespace.
pub fn run(
    exe: &Path,
    dir: &Path,
    args: &SoakArgs,
    mut progress: impl FnMut(&Point),
) -> Result<SoakBench, SoakError> {
    let config = dir.join("unbloat.toml");
    write_config(&config, 0)?;
    ip(&[
        "link add wan0 type veth peer name wan0p",
        "link set wan0 up",
        "link set wan0p up",
    ])?;
    let daemon = Daemon::start(exe, dir, &config)?;
    let first = wait_shaped(Instant::now())?;
    let t0 = Instant::now();
    let pid = daemon.child.id();
    let reading = || procstat::read(pid).ok_or_else(|| failed("the daemon", "it has ended"));
    let mut points = vec![Point {
        iteration: 0,
        seconds: 0.0,
        reading: reading()?,
    }];
    let mut peak = points[0].reading;
    let mut gaps = vec![first.as_secs_f64() * 1000.0];
    let (mut reloads_ok, mut reloads_failed, mut scrapes, mut scrape_failures) = (0, 0, 0, 0);
    let tenth = (args.iterations / 10).max(1);
    let mut done = 0;
    while done < args.iterations && t0.elapsed().as_secs_f64() < args.max_seconds {
        done += 1;
        ip(&["link del wan0"])?;
        let added = Instant::now();
        ip(&[
            "link add wan0 type veth peer name wan0p",
            "link set wan0 up",
            "link set wan0p up",
        ])?;
        gaps.push(wait_shaped(added)?.as_secs_f64() * 1000.0);
        for path in ["/metrics", "/api/status"] {
            let at = if path == "/metrics" { METRICS } else { WEB };
            scrapes += 1;
            if get(at, path).is_err() {
                scrape_failures += 1;
            }
        }
        if done % args.reload_every.max(1) == 0 {
            write_config(&config, done / args.reload_every.max(1))?;
            match daemon.reload(exe, dir) {
                Ok(()) => reloads_ok += 1,
                Err(_) => reloads_failed += 1,
            }
        }
        let r = reading()?;
        peak = max(peak, r);
        if done % tenth == 0 || done == args.iterations {
            let p = Point {
                iteration: done,
                seconds: t0.elapsed().as_secs_f64(),
                reading: r,
            };
            progress(&p);
            points.push(p);
        }
    }
    if points.last().is_some_and(|p| p.iteration != done) {
        points.push(Point {
            iteration: done,
            seconds: t0.elapsed().as_secs_f64(),
            reading: reading()?,
        });
    }
    let metrics = get(METRICS, "/metrics").map_err(|e| failed("the last scrape", e))?;
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let gap_max_at = (0..gaps.len())
        .max_by(|&a, &b| gaps[a].total_cmp(&gaps[b]))
        .unwrap_or(0);
    let gaps_over_5s = gaps
        .iter()
        .filter(|&&g| g > LONG_GAP.as_secs_f64() * 1000.0)
        .count();
    gaps.sort_by(f64::total_cmp);
    let pct = |q: f64| gaps[((gaps.len() - 1) as f64 * q).round() as usize];
    Ok(SoakBench {
        version: 1,
        kernel: unbloat_testbed::kernel::name_current(),
        iterations: done,
        seconds: t0.elapsed().as_secs_f64(),
        recreations: done,
        reloads_ok,
        reloads_failed,
        scrapes,
        scrape_failures,
        link_events: counter("unbloat_daemon_link_events_total"),
        daemon_reloads: counter("unbloat_daemon_reloads_total"),
        gap_ms_p50: pct(0.5),
        gap_ms_p99: pct(0.99),
        gap_ms_max: pct(1.0),
        gap_max_at,
        gaps_over_5s,
        ifbs_at_end: ifbs()?,
        points,
        peak,
    })
}

fn max(a: Reading, b: Reading) -> Reading {
    Reading {
        rss_kib: a.rss_kib.max(b.rss_kib),
        hwm_kib: a.hwm_kib.max(b.hwm_kib),
        threads: a.threads.max(b.threads),
        fds: a.fds.max(b.fds),
    }
}

/// wan0 shaped both ways at 20 Mbit/s down; the upload 5 Mbit/s, or 6 after an odd reload.
fn write_config(path: &Path, reload: usize) -> Result<(), SoakError> {
    let up = 5 + reload % 2;
    std::fs::write(
        path,
        format!("[interface.wan0]\ndown = \"20mbit\"\nup = \"{up}mbit\"\n"),
    )
    .map_err(|e| failed(format!("writing {}", path.display()), e))
}

/// `ip -batch -` of `lines`.
fn ip(lines: &[&str]) -> Result<(), SoakError> {
    use unbloat_system::runner::{Cmd, Runner, SystemRunner};
    let cmd = Cmd::new("ip")
        .args(["-batch", "-"])
        .stdin(lines.join("\n") + "\n");
    let out = SystemRunner::from_env()
        .run(&cmd)
        .map_err(|e| failed("running ip", e))?;
    if !out.success() {
        return Err(failed(
            format!("ip {}", lines.join("; ")),
            out.stderr.trim(),
        ));
    }
    Ok(())
}

/// One qdisc of `tc -j qdisc show`: what tells the shaping is back.
#[derive(Debug, Deserialize)]
struct Qdisc {
    kind: String,
    #[serde(default)]
    root: bool,
}

/// Until wan0 has cake at its root and its ingress qdisc (the download's redirect to the IFB);
/// the time since `since`.
fn wait_shaped(since: Instant) -> Result<Duration, SoakError> {
    loop {
        let out = Command::new("tc")
            .args(["-j", "qdisc", "show", "dev", "wan0"])
            .output()
            .map_err(|e| failed("running tc", e))?;
        let qdiscs: Vec<Qdisc> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let cake = qdiscs.iter().any(|q| q.root && q.kind == "cake");
        if cake && qdiscs.iter().any(|q| q.kind == "ingress") {
            return Ok(since.elapsed());
        }
        if since.elapsed() > GIVE_UP {
            return Err(failed(
                "wan0",
                format!(
                    "not shaped again {} s after it came back",
                    GIVE_UP.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ifbs() -> Result<usize, SoakError> {
    let out = Command::new("ip")
        .args(["-j", "link", "show", "type", "ifb"])
        .output()
        .map_err(|e| failed("ip link show type ifb", e))?;
    #[derive(Deserialize)]
    struct Link {
        #[allow(dead_code)]
        ifname: String,
    }
    let links: Vec<Link> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    Ok(links.len())
}

/// `GET path` (HTTP/1.0), the body of a 200.
fn get(addr: &str, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("not HTTP")?;
    if !head.contains(" 200 ") {
        return Err(head.lines().next().unwrap_or_default().to_string());
    }
    Ok(body.to_string())
}

/// The daemon, SIGTERM and reaped on drop.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(exe: &Path, dir: &Path, config: &Path) -> Result<Daemon, SoakError> {
        let child = Command::new(exe)
            .args(["daemon", "--config"])
            .arg(config)
            .args(["--metrics", METRICS, "--web", WEB])
            .env("UNBLOAT_RUN_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| failed(format!("starting {}", exe.display()), e))?;
        let d = Daemon { child };
        let t0 = Instant::now();
        while get(METRICS, "/metrics").is_err() {
            if t0.elapsed() > GIVE_UP {
                return Err(failed("unbloat daemon", "no metrics within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(d)
    }

    /// `unbloat reload`, as a user runs it.
    fn reload(&self, exe: &Path, dir: &Path) -> Result<(), String> {
        let out = Command::new(exe)
            .arg("reload")
            .env("UNBLOAT_RUN_DIR", dir)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

pub fn render(b: &SoakBench) -> String {
    let mut s = format!(
        "Soak of unbloat daemon ({}): {} iterations in {:.0} s\n\n",
        b.kernel, b.iterations, b.seconds
    );
    s.push_str(&format!(
        "{:>9} {:>8} {:>10} {:>10} {:>5} {:>7}\n",
        "iteration", "seconds", "RSS", "peak RSS", "fds", "threads"
    ));
    for p in &b.points {
        let r = &p.reading;
        s.push_str(&format!(
            "{:>9} {:>8.0} {:>6} KiB {:>6} KiB {:>5} {:>7}\n",
            p.iteration, p.seconds, r.rss_kib, r.hwm_kib, r.fds, r.threads
        ));
    }
    let tenth = b.points.get(1).map(|p| p.reading);
    if let (Some(t), Some(last)) = (tenth, b.points.last()) {
        s.push_str(&format!(
            "\nfrom the first tenth to the end: RSS {:+} KiB, fds {:+}, threads {:+}\n",
            last.reading.rss_kib as i64 - t.rss_kib as i64,
            last.reading.fds as i64 - t.fds as i64,
            last.reading.threads as i64 - t.threads as i64
        ));
    }
    s.push_str(&format!(
        "wan0 re-created {} times: shaped again (cake + ingress) after p50 {:.0} ms, p99 {:.0} ms, \
         max {:.0} ms at iteration {}, {} over 5 s (from `ip link add`, polled every 10 ms)\n\
         reloads: {} ok, {} refused (the daemon counted {}); scrapes: {} ({} failed); \
         the daemon's link events: {}; IFBs at the end: {}\n",
        b.recreations,
        b.gap_ms_p50,
        b.gap_ms_p99,
        b.gap_ms_max,
        b.gap_max_at,
        b.gaps_over_5s,
        b.reloads_ok,
        b.reloads_failed,
        b.daemon_reloads,
        b.scrapes,
        b.scrape_failures,
        b.link_events,
        b.ifbs_at_end
    ));
    s
}
