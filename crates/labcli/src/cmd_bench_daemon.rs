//! `unbloat-lab bench daemon`: what the daemon costs as a Prometheus target (issue 14). In a private
//! namespace of a kernel with cake (User-Mode Linux here), one veth is shaped both ways with
//! cake diffserv4 by `unbloat daemon --metrics`; then:
//!
//! - memory: thousands of scrapes back to back, the daemon's resident memory read every tenth of
//!   them (flat means no growth past the first readings);
//! - CPU: one scrape a second, the daemon's CPU time (its own and its `tc` children's) over the
//!   wall time: the share of one core.
//!
//! node_exporter with only its qdisc collector, when installed (Debian's
//! prometheus-node-exporter), is the alternative measured beside it in the same run and the same
//! namespace: it is what users scrape for qdisc statistics today (root qdiscs only, no tins).

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::Args;
use serde::Serialize;

use crate::Failure;
use unbloat_system::runner::{Cmd, Runner, SystemRunner};

#[derive(Debug, Args)]
pub struct DaemonBench {
    /// Scrapes back to back, for the memory reading.
    #[arg(long, default_value_t = 10_000)]
    pub scrapes: usize,
    /// How long to scrape once a second, for the CPU share (60s, 2m; a bare number is
    /// seconds): whole seconds, 1s to 60m. `--seconds` is its old name.
    #[arg(long, alias = "seconds", value_name = "D", default_value = "60s", value_parser = crate::durations::scrape_time)]
    pub duration: unbloat_units::Time,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Internal: we are already in a kernel with every qdisc.
    #[arg(long, hide = true)]
    pub inside: bool,
}

const UNBLOAT_ADDR: &str = "127.0.0.1:19935";
const NODE_ADDR: &str = "127.0.0.1:19936";

/// One target's figures.
#[derive(Debug, Serialize)]
struct Target {
    name: String,
    /// Samples (lines that are not comments) in one scrape.
    series: usize,
    /// Resident memory after each tenth of the back-to-back scrapes, in KiB.
    rss_kib: Vec<u64>,
    scrape_ms_p50: f64,
    scrape_ms_p99: f64,
    /// CPU time per scrape in the back-to-back run (the process and its children), in ms.
    cpu_ms_per_scrape: f64,
    /// CPU share of one core at one scrape a second, in percent.
    cpu_percent_at_1hz: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    kernel: String,
    /// CPU time of one `tc -s -j qdisc show dev wan0` process, in ms: the floor of any reader
    /// that runs tc per scrape.
    tc_process_cpu_ms: f64,
    scrapes: usize,
    seconds: u64,
    targets: Vec<Target>,
}

pub fn daemon_bench(args: &DaemonBench) -> Result<(), Failure> {
    if !args.inside
        && crate::cmd_kernel::rerun_in_real_kernel(
            crate::cmd_kernel::ALL_QDISCS,
            &[],
            Duration::from_secs(7200),
        )?
    {
        return Ok(());
    }
    crate::cmd_kernel::private_netns()?;
    let runner = SystemRunner::from_env();
    for a in [
        "link add wan0 type veth peer name peer0",
        "link set wan0 up",
        "link set peer0 up",
    ] {
        let out = runner.run(&Cmd::ip(a.split(' ')))?;
        if !out.success() {
            return Err(anyhow!("ip {a}: {}", out.stderr.trim()).into());
        }
    }
    // A run directory must be 0700: a fresh private one.
    let dir = unbloat_safefs::private_dir(std::path::Path::new("/run"), "unbloat-bench")?;
    let result = measure(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let report = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

fn measure(args: &DaemonBench, dir: &std::path::Path) -> anyhow::Result<Report> {
    let config = dir.join("unbloat.toml");
    std::fs::write(
        &config,
        "[interface.wan0]\ndown = \"78mbit\"\nup = \"19950kbit\"\ndiffserv = \"diffserv4\"\n",
    )?;
    let exe = crate::product()?;
    let mut unbloat = Command::new(&exe);
    unbloat
        .args(["daemon", "--config"])
        .arg(&config)
        .args(["--metrics", UNBLOAT_ADDR])
        .env("UNBLOAT_RUN_DIR", dir);
    let mut targets = vec![(
        "unbloat daemon".to_string(),
        Running::start(unbloat, UNBLOAT_ADDR, "unbloat_cake_tin_drops_total{")?,
    )];
    match which("prometheus-node-exporter").or_else(|| which("node_exporter")) {
        Some(node) => {
            let mut c = Command::new(node);
            c.args([
                "--collector.disable-defaults",
                "--collector.qdisc",
                &format!("--web.listen-address={NODE_ADDR}"),
            ]);
            targets.push((
                "node_exporter (qdisc collector)".into(),
                Running::start(c, NODE_ADDR, "node_qdisc_drops_total{")?,
            ));
        }
        None => eprintln!(
            "unbloat bench daemon: node_exporter is not installed (apt-get install \
             prometheus-node-exporter); measuring unbloat alone"
        ),
    }

    let mut out = vec![];
    for (name, t) in &targets {
        eprintln!(
            "unbloat bench daemon: {name}: {} scrapes back to back",
            args.scrapes
        );
        let series = scrape(t.addr)?
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        let mut took = vec![];
        let mut rss = vec![t.rss_kib()?];
        let cpu0 = t.cpu()?;
        for i in 1..=args.scrapes {
            let s = Instant::now();
            scrape(t.addr)?;
            took.push(s.elapsed().as_secs_f64() * 1000.0);
            if i % (args.scrapes / 10).max(1) == 0 {
                rss.push(t.rss_kib()?);
                eprint!("\r  {i}/{} scrapes", args.scrapes);
            }
        }
        eprintln!();
        let cpu = t.cpu()? - cpu0;
        took.sort_by(f64::total_cmp);
        out.push(Target {
            name: name.clone(),
            series,
            rss_kib: rss,
            scrape_ms_p50: took[took.len() / 2],
            scrape_ms_p99: took[(took.len() * 99 / 100).min(took.len() - 1)],
            cpu_ms_per_scrape: cpu.as_secs_f64() * 1000.0 / args.scrapes.max(1) as f64,
            cpu_percent_at_1hz: 0.0,
        });
    }
    // Both targets at once, one scrape a second each, so they share the same minute.
    let seconds = u64::from(crate::durations::secs(args.duration));
    eprintln!("unbloat bench daemon: one scrape a second for {seconds} s");
    let cpu0: Vec<Duration> = targets
        .iter()
        .map(|(_, t)| t.cpu())
        .collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    for s in 0..seconds {
        for (_, t) in &targets {
            scrape(t.addr)?;
        }
        let next = Duration::from_secs(s + 1);
        std::thread::sleep(next.saturating_sub(t0.elapsed()));
    }
    let wall = t0.elapsed().as_secs_f64();
    for ((_, t), (row, c0)) in targets.iter().zip(out.iter_mut().zip(cpu0)) {
        row.cpu_percent_at_1hz = (t.cpu()? - c0).as_secs_f64() / wall * 100.0;
    }
    Ok(Report {
        kernel: unbloat_testbed::kernel::name_current(),
        tc_process_cpu_ms: tc_process_cpu_ms()?,
        scrapes: args.scrapes,
        seconds,
        targets: out,
    })
}

fn render(r: &Report) -> String {
    let mut s = format!(
        "The daemon as a Prometheus target ({}; wan0 shaped both ways with cake diffserv4)\n\n",
        r.kernel
    );
    s.push_str(&format!(
        "{:<34} {:>7} {:>10} {:>10} {:>7} {:>15} {:>11} {:>14}\n",
        "target",
        "series",
        "RSS first",
        "RSS last",
        "growth",
        "scrape p50/p99",
        "CPU/scrape",
        "CPU at 1/s"
    ));
    for t in &r.targets {
        let (first, last) = (t.rss_kib[1], *t.rss_kib.last().unwrap_or(&0));
        s.push_str(&format!(
            "{:<34} {:>7} {:>7} KiB {:>6} KiB {:>6.1}% {:>7.1}/{:<5.1}ms {:>8.2} ms {:>12.3} %\n",
            t.name,
            t.series,
            first,
            last,
            (last as f64 / first as f64 - 1.0) * 100.0,
            t.scrape_ms_p50,
            t.scrape_ms_p99,
            t.cpu_ms_per_scrape,
            t.cpu_percent_at_1hz
        ));
    }
    s.push_str(&format!(
        "{:<34} {:>66.2} ms\n",
        "one `tc -s -j qdisc show` process", r.tc_process_cpu_ms
    ));
    s.push_str(&format!(
        "\nRSS first is after the first tenth of {} scrapes, last after all of them; \
         CPU counts the process and its children (tc), at one scrape a second over {} s.\n",
        r.scrapes, r.seconds
    ));
    if let [u, n] = &r.targets[..] {
        s.push_str(&format!(
            "unbloat / node_exporter: CPU per scrape {:.2}x, CPU at 1/s {:.2}x, series {:.1}x\n",
            u.cpu_ms_per_scrape / n.cpu_ms_per_scrape,
            u.cpu_percent_at_1hz / n.cpu_percent_at_1hz,
            u.series as f64 / n.series as f64
        ));
    }
    s
}

/// The mean CPU time (user + system) of a `tc -s -j qdisc show dev wan0`, over 100 runs.
fn tc_process_cpu_ms() -> anyhow::Result<f64> {
    let children = || {
        // SAFETY: getrusage fills the struct we own.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
        let t = |v: libc::timeval| v.tv_sec as f64 * 1000.0 + v.tv_usec as f64 / 1000.0;
        t(u.ru_utime) + t(u.ru_stime)
    };
    let before = children();
    const RUNS: usize = 100;
    for _ in 0..RUNS {
        let out = Command::new("tc")
            .args(["-s", "-j", "qdisc", "show", "dev", "wan0"])
            .output()?;
        if !out.status.success() {
            bail!("tc -s -j qdisc show dev wan0 failed");
        }
    }
    Ok((children() - before) / RUNS as f64)
}

/// A target process, ended when dropped.
struct Running {
    child: Child,
    addr: &'static str,
}

impl Running {
    /// Starts `cmd` and waits until its /metrics has `want` in it.
    fn start(mut cmd: Command, addr: &'static str, want: &str) -> anyhow::Result<Running> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {cmd:?}"))?;
        let r = Running { child, addr };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if scrape(addr).is_ok_and(|t| t.contains(want)) {
                return Ok(r);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        bail!("{cmd:?} did not serve {want} on {addr} within 60 s")
    }

    fn rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| anyhow!("no VmRSS for pid {}", self.child.id()))
    }

    /// utime + stime + cutime + cstime (fields 14-17 of /proc/PID/stat).
    fn cpu(&self) -> anyhow::Result<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        // The command name may hold spaces: fields count from after its closing parenthesis.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let f: Vec<u64> = rest
            .split_whitespace()
            .skip(11)
            .take(4)
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        Ok(Duration::from_secs_f64(f.iter().sum::<u64>() as f64 / hz))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child; SIGTERM lets the daemon end its loop.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// `GET /metrics` (HTTP/1.0: the server closes after the answer): the body of a 200.
fn scrape(addr: &str) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("{addr}: not HTTP"))?;
    if !head.contains(" 200 ") {
        bail!("{addr}: {}", head.lines().next().unwrap_or_default());
    }
    Ok(body.to_string())
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}
