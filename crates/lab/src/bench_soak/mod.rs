//! `unbloat-lab bench soak` (issue 53 §3): the daemon kept busy for thousands of events, with its
//! memory, open files and threads read throughout ([`crate::procstat`]).
//!
//! In a kernel with cake and a namespace of the caller's (the command re-runs itself in
//! User-Mode Linux when this kernel lacks cake, and enters a private namespace), `unbloat daemon`
//! keeps `wan0`, a veth, shaped both ways with cake (its IFB for the download). Each iteration:
//!
//! - `wan0` is deleted and created again, and the time until cake is on it again is its
//!   shaping gap (read with `tc -j qdisc show` every 10 ms, from the `ip link add`);
//! - after `hold` (none by default), the metrics and the page's status (`/api/status`) are
//!   scraped once each;
//! - every `reload_every`-th, the config's upload rate changes and `unbloat reload` asks the
//!   daemon to apply it.
//!
//! Flat is the goal: the daemon's resident memory, files and threads at the end as after the
//! first tenth (the first tenth is its warm-up: allocator arenas, the first thread stacks).
//!
//! With a trace ([`SoakArgs::autorate`], `--autorate-trace`), wan0 leads to a far side whose
//! download capacity follows it ([`far`]: a bottleneck that outlives the re-creations, a TCP
//! download through it, reflectors behind it), and the config gives wan0 an `[autorate.wan0]`
//! table, so the daemon's controller moves cake's rates all along, starts again after each
//! re-creation that took wan0 from under it, and after each reload. The run counts what it did
//! from the daemon's own records ([`record`]: its decision logs, and the rate its metrics show).
//! `hold` keeps wan0 a while after each re-creation: the controller waits 2 s after losing its
//! interface before it opens it again, so without a hold it seldom runs for long.
//!
//! The modules: [`record`] (pure: logs and metrics in, counts out) and [`far`] (the far side's
//! namespaces, bottleneck and download) know nothing of each other nor of this one, which runs
//! the soak with them; [`SoakError`] is `error`'s, which imports none of them.

mod error;
pub mod far;
pub mod record;

use error::failed;
pub use error::SoakError;

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use unbloat_units::Rate;

use crate::autorate_lab::{trace_range, Range};
use crate::procstat::{self, Reading};
use crate::trace::RateTrace;
use record::{Decisions, Scraped};

const METRICS: &str = "127.0.0.1:19937";
const WEB: &str = "127.0.0.1:19938";
/// A gap counted apart: `crates/cli/tests/daemon.rs` allows its re-creations no longer.
const LONG_GAP: Duration = Duration::from_secs(5);
/// A gap longer than this is a failure to shape again, and ends the run.
const GIVE_UP: Duration = Duration::from_secs(30);
/// The upload's autorate bounds: it carries the download's ACKs and the probes, and the
/// config's upload rate (5 or 6 Mbit/s, changed by the reloads) lies between them.
const UP_MIN: Rate = Rate::from_mbit(1);
const UP_MAX: Rate = Rate::from_mbit(10);

#[derive(Debug, Clone)]
pub struct SoakArgs {
    pub iterations: usize,
    /// The run ends after this long, however many iterations it made.
    pub max_seconds: f64,
    pub reload_every: usize,
    /// How long wan0 stays once shaped again, before the iteration's scrapes and the next
    /// re-creation.
    pub hold: Duration,
    /// The download's capacity follows this trace, and the daemon runs autorate on wan0.
    pub autorate: Option<SoakTrace>,
}

/// A trace for the far side's download, and the name it goes by in the results.
#[derive(Debug, Clone)]
pub struct SoakTrace {
    pub name: String,
    pub trace: RateTrace,
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
    /// `hold`, s: 0 for a run without one.
    #[serde(default)]
    pub hold_s: f64,
    /// With a trace: what autorate did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autorate: Option<AutorateSoak>,
}

/// Autorate through the soak: the link it had, and what it did.
#[derive(Debug, Clone, Serialize)]
pub struct AutorateSoak {
    /// The trace the download's bottleneck followed (as the user named it), and its mean.
    pub trace: String,
    pub trace_mean: Rate,
    /// The controller's download bounds, from the trace as `bench autorate` sets them (the base
    /// is the config's download rate). The upload's: [`UP_MIN`] to [`UP_MAX`].
    pub down: Range,
    /// The trace player's changes to the bottleneck's rate.
    pub trace_changes: usize,
    /// What the download brought to wan0's side, through cake.
    pub download_bytes: u64,
    /// From the daemon's decision logs.
    pub decisions: Decisions,
    /// The download's rate in the metrics, one reading a scrape.
    pub scraped: Scraped,
}

/// Runs the soak with `exe` as the daemon, in `dir` (a private directory: config, run directory
/// and the autorate logs), in the calling process's network namespace.
pub fn run(
    exe: &Path,
    dir: &Path,
    args: &SoakArgs,
    mut progress: impl FnMut(&Point),
) -> Result<SoakBench, SoakError> {
    let config = dir.join("unbloat.toml");
    let bounds = args.autorate.as_ref().map(|t| trace_range(&t.trace));
    let base = bounds.map(|b| b.base);
    let far = match &args.autorate {
        Some(t) => Some(far::Far::start(t.trace.clone())?),
        None => None,
    };
    let with_far = far.is_some();
    let wan0 = || {
        if with_far {
            far::wan0_lines()
        } else {
            vec![
                "link add wan0 type veth peer name wan0p".into(),
                "link set wan0 up".into(),
                "link set wan0p up".into(),
            ]
        }
    };
    write_config(&config, 0, bounds.as_ref())?;
    ip(&wan0())?;
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
    let mut scraped = Scraped::default();
    let tenth = (args.iterations / 10).max(1);
    let mut done = 0;
    while done < args.iterations && t0.elapsed().as_secs_f64() < args.max_seconds {
        done += 1;
        ip(&["link del wan0".into()])?;
        let added = Instant::now();
        ip(&wan0())?;
        gaps.push(wait_shaped(added)?.as_secs_f64() * 1000.0);
        std::thread::sleep(args.hold);
        for (at, path) in [(METRICS, "/metrics"), (WEB, "/api/status")] {
            scrapes += 1;
            match get(at, path) {
                Ok(text) => {
                    let rate = record::scraped_down_rate(&text, "wan0");
                    if let (Some(rate), Some(base)) = (rate, base) {
                        scraped.add(rate, base);
                    }
                }
                Err(_) => scrape_failures += 1,
            }
        }
        if done % args.reload_every.max(1) == 0 {
            write_config(&config, done / args.reload_every.max(1), bounds.as_ref())?;
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
    let seconds = t0.elapsed().as_secs_f64();
    let metrics = get(METRICS, "/metrics").map_err(|e| failed("the last scrape", e))?;
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let ifbs_at_end = ifbs()?;
    // Its controller ends with it, the base rates put back: its logs are whole after this.
    drop(daemon);
    let autorate = match (far, &args.autorate, bounds) {
        (Some(far), Some(t), Some(down)) => {
            let (trace_changes, download_bytes) = far.stop()?;
            Some(AutorateSoak {
                trace: t.name.clone(),
                trace_mean: t.trace.mean(),
                down,
                trace_changes,
                download_bytes,
                decisions: read_logs(dir)?,
                scraped,
            })
        }
        _ => None,
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
        seconds,
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
        ifbs_at_end,
        points,
        peak,
        hold_s: args.hold.as_secs_f64(),
        autorate,
    })
}

/// Every decision log the daemon wrote (one a config: each reload names a new one, since a
/// controller's start empties its log), summed.
fn read_logs(dir: &Path) -> Result<Decisions, SoakError> {
    let logs = dir.join("log");
    let mut d = Decisions::default();
    let entries = std::fs::read_dir(&logs).map_err(|e| failed(logs.display().to_string(), e))?;
    for e in entries {
        let path = e.map_err(|e| failed(logs.display().to_string(), e))?.path();
        let text =
            std::fs::read_to_string(&path).map_err(|e| failed(path.display().to_string(), e))?;
        d.add_log(&text);
    }
    Ok(d)
}

fn max(a: Reading, b: Reading) -> Reading {
    Reading {
        rss_kib: a.rss_kib.max(b.rss_kib),
        hwm_kib: a.hwm_kib.max(b.hwm_kib),
        threads: a.threads.max(b.threads),
        fds: a.fds.max(b.fds),
    }
}

fn write_config(path: &Path, reload: usize, autorate: Option<&Range>) -> Result<(), SoakError> {
    std::fs::write(path, config_text(reload, autorate))
        .map_err(|e| failed(format!("writing {}", path.display()), e))
}

/// wan0 shaped both ways at 20 Mbit/s down; the upload 5 Mbit/s, or 6 after an odd reload. With
/// autorate's download bounds, the download at their base, and the `[autorate.wan0]` table
/// probing the far side, its log named after the reload (a controller's start empties its log,
/// and every reload starts it again).
fn config_text(reload: usize, autorate: Option<&Range>) -> String {
    let up = 5 + reload % 2;
    let down = autorate.map_or(Rate::from_mbit(20), |r| r.base);
    let mut text = format!("[interface.wan0]\ndown = \"{down}\"\nup = \"{up}mbit\"\n");
    if let Some(r) = autorate {
        let reflectors: Vec<String> = far::reflectors()
            .iter()
            .map(|a| format!("\"{a}\""))
            .collect();
        text += &format!(
            "\n[autorate.wan0]\ndown-min = \"{}\"\ndown-max = \"{}\"\nup-min = \"{UP_MIN}\"\n\
             up-max = \"{UP_MAX}\"\nreflectors = [{}]\nlog = \"wan0.{reload}.log\"\n",
            r.min,
            r.max,
            reflectors.join(", ")
        );
    }
    text
}

/// `ip -batch -` of `lines`.
fn ip(lines: &[String]) -> Result<(), SoakError> {
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
    if b.hold_s > 0.0 {
        s.push_str(&format!(
            "each iteration held wan0 {:.1} s once shaped again, then scraped\n",
            b.hold_s
        ));
    }
    if let Some(a) = &b.autorate {
        s.push_str(&render_autorate(a, b.reloads_ok));
    }
    s
}

fn render_autorate(a: &AutorateSoak, reloads: usize) -> String {
    let d = &a.decisions;
    let span = |lo: Option<Rate>, hi: Option<Rate>| match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{} to {}", mbit(lo), mbit(hi)),
        _ => "none".to_string(),
    };
    // Runs: the first, one a reload, and the others opened again after losing wan0 (a
    // re-creation took it, or a reload came first and started it afresh: then none).
    let after_recreation = d.runs.saturating_sub(1 + reloads as u64);
    format!(
        "\nautorate on {} (the download's bottleneck, mean {}; the player changed it {} times), \
         download bounds {} to {} from {}:\n\
         - its logs: {} runs (the first, {} after reloads, {} opened again after a re-creation), {} ticks, \
         {} rate changes, {} cuts for bloat, {} ticks with no answers; download set from {}, \
         upload from {}{}\n\
         - the metrics' download rate: off the base at {} of {} scrapes, from {}\n\
         - the download carried {:.1} MB through cake\n",
        a.trace,
        mbit(a.trace_mean),
        a.trace_changes,
        mbit(a.down.min),
        mbit(a.down.max),
        mbit(a.down.base),
        d.runs,
        reloads,
        after_recreation,
        d.ticks,
        d.rate_changes,
        d.bloat_cuts,
        d.stalled_ticks,
        span(d.down_lowest, d.down_highest),
        span(d.up_lowest, d.up_highest),
        match d.unreadable_lines {
            0 => String::new(),
            n => format!("; {n} lines unreadable"),
        },
        a.scraped.off_base,
        a.scraped.scrapes,
        span(a.scraped.lowest, a.scraped.highest),
        a.download_bytes as f64 / 1e6,
    )
}

/// A rate as Mbit/s with two decimals, for the table.
fn mbit(r: Rate) -> String {
    format!("{:.2} Mbit/s", r.bits_per_sec() as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_shaper::config::ConfigFile;

    /// The config the daemon gets is one it takes: with a trace, its autorate table has the
    /// trace's bounds, the far side's reflectors and a log a reload, and the upload's base stays
    /// inside the upload's bounds after every reload.
    #[test]
    fn the_soaks_config_is_one_the_daemon_takes() {
        let plain = ConfigFile::parse(&config_text(0, None), Path::new("soak.toml")).unwrap();
        let wan0 = plain.interface(&"wan0".parse().unwrap()).unwrap();
        assert!(wan0.autorate.is_none());
        let down = Range {
            min: Rate::from_kbit(516),
            base: Rate::from_kbit(2604),
            max: Rate::from_kbit(10_812),
        };
        for reload in [0, 1, 2] {
            let text = config_text(reload, Some(&down));
            let file = ConfigFile::parse(&text, Path::new("soak.toml")).unwrap();
            let wan0 = file.interface(&"wan0".parse().unwrap()).unwrap();
            let a = wan0.autorate.as_ref().expect("an autorate table");
            assert_eq!(
                (a.down.min, a.down.base, a.down.max),
                (down.min, down.base, down.max)
            );
            assert!(a.up.min <= a.up.base && a.up.base <= a.up.max, "{text}");
            assert_eq!(
                a.reflectors.as_ref().map(Vec::len),
                Some(far::reflectors().len())
            );
            assert_eq!(
                a.log.as_deref(),
                Some(Path::new(&format!("wan0.{reload}.log")))
            );
        }
    }
}
