//! `unbloat bench ...`: benchmarks of unbloat itself, run in a kernel that has every qdisc.
//!
//! `bench start` times a full `start` (probe, snapshot, apply, read back, verify, record) of an
//! egress + ingress setup for cake and for three-tier HTB + fq_codel on a veth in a private
//! network namespace, the same start again (already in place: read back and verify only), and
//! `status`, each the median of 10 runs. The alternative it is compared with, in the same run on the same machine, is what sqm-scripts does: the same `ip`/`tc`
//! commands run one process at a time, with no probe and no verification.

use crate::kernel::ALL_QDISCS;
use crate::Failure;
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use std::time::{Duration, Instant};
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::spec::Spec;
use unbloat_system::apply::{script_commands_one_by_one, Shaper};
use unbloat_system::kernel::{in_guest, GuestOptions, Kernel};
use unbloat_system::runner::{Cmd, Runner, SystemRunner};
use unbloat_system::state::StateDir;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Time `start` (egress + ingress) for cake and three-tier HTB + fq_codel, and `status`.
    Start(StartBench),
    /// The accuracy benchmarks of `unbloat test` against iperf3 and ping.
    Measure(crate::lab::MeasureBenchCmd),
    /// Every link profile x every strategy in the lab.
    Lab(crate::lab::LabBenchCmd),
}

#[derive(Debug, Args)]
pub struct StartBench {
    /// Runs per measurement (the median is reported).
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Internal: we are already in a kernel with every qdisc.
    #[arg(long, hide = true)]
    pub inside: bool,
}

pub fn bench(cmd: &BenchCommand) -> Result<(), Failure> {
    match cmd {
        BenchCommand::Start(a) => start_bench(a),
        BenchCommand::Measure(a) => crate::lab::measure_bench(a),
        BenchCommand::Lab(a) => crate::lab::lab_bench(a),
    }
}

fn start_bench(args: &StartBench) -> Result<(), Failure> {
    if !args.inside && !in_guest() {
        let kernel = Kernel::detect(ALL_QDISCS)?;
        if let Kernel::Uml(_) = kernel {
            eprintln!(
                "unbloat: the host kernel lacks cake or fq_codel; benchmarking in {}",
                kernel.describe()
            );
            let exe = std::env::current_exe()?.display().to_string();
            let mut argv = vec![
                exe,
                "bench".into(),
                "start".into(),
                "--inside".into(),
                "--runs".into(),
                args.runs.to_string(),
            ];
            if args.json {
                argv.push("--json".into());
            }
            let opts = GuestOptions {
                timeout: Duration::from_secs(600),
                stream: true,
                ..GuestOptions::default()
            };
            let out = kernel.run(&argv, &opts)?;
            if out.status != 0 {
                return Err(anyhow!(
                    "the benchmark failed in {} (status {})",
                    kernel.describe(),
                    out.status
                )
                .into());
            }
            return Ok(());
        }
    }
    private_netns()?;
    let runner = SystemRunner::from_env();
    let run = |argv: &[&str]| -> anyhow::Result<()> {
        let out = runner.run(&Cmd::ip(argv.iter().copied()))?;
        if !out.success() {
            bail!("ip {}: {}", argv.join(" "), out.stderr.trim());
        }
        Ok(())
    };
    run(&[
        "link", "add", "benchwan", "type", "veth", "peer", "name", "benchisp",
    ])?;
    run(&["link", "set", "benchwan", "up"])?;
    run(&["link", "set", "benchisp", "up"])?;
    let dir = std::env::temp_dir().join(format!("unbloat-bench-{}", std::process::id()));
    let shaper = Shaper::new(&runner, StateDir::new(&dir));

    let mut rows = vec![];
    for (name, extra) in [
        ("cake", ShapeOptions::default()),
        ("fq_codel 3 tiers", fq_codel3()),
    ] {
        let opts = ShapeOptions {
            down: Some("78mbit".parse()?),
            up: Some("19950kbit".parse()?),
            link: Some("vdsl2".parse().map_err(|e: String| anyhow!(e))?),
            ..extra
        };
        let plan = Plan::build(&Spec::new("benchwan".parse()?, &opts)?);
        let v = crate::shape::verifier(&plan);
        let req = crate::shape::request(&plan, &opts, &v);
        let mut start = vec![];
        let mut again = vec![];
        let mut status = vec![];
        let mut raw = vec![];
        for _ in 0..args.runs {
            let t = Instant::now();
            shaper.start(&req).context("unbloat start")?;
            start.push(t.elapsed());
            let t = Instant::now();
            shaper.start(&req).context("unbloat start, again")?;
            again.push(t.elapsed());
            let t = Instant::now();
            let texts = shaper.read_live("benchwan", req.ifb.as_deref())?;
            let live = crate::shape::live_state("benchwan", &texts)?;
            let _ = unbloat_shaper::status::Status::from_live(&live, Some(&plan));
            status.push(t.elapsed());
            shaper.stop("benchwan")?;
            // The sqm-scripts way: each command its own process, nothing checked.
            let t = Instant::now();
            for cmd in script_commands_one_by_one(&plan.script()) {
                runner.run(&cmd)?;
            }
            raw.push(t.elapsed());
            for cmd in &req.teardown {
                runner.run(cmd)?;
            }
        }
        rows.push(Row {
            setup: name,
            start: median(start),
            again: median(again),
            status: median(status),
            sequential: median(raw),
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    print_rows(&rows, args)?;
    Ok(())
}

fn fq_codel3() -> ShapeOptions {
    ShapeOptions {
        qdisc: Some(unbloat_shaper::options::Qdisc::FqCodel),
        tiers: Some(3),
        ..ShapeOptions::default()
    }
}

struct Row {
    setup: &'static str,
    start: Duration,
    /// A start that finds its setup already in place.
    again: Duration,
    status: Duration,
    sequential: Duration,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print_rows(rows: &[Row], args: &StartBench) -> anyhow::Result<()> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    if args.json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| serde_json::json!({"setup": r.setup, "start_ms": ms(r.start), "again_ms": ms(r.again), "status_ms": ms(r.status), "sqm_style_sequential_ms": ms(r.sequential), "ratio_start_vs_sequential": ms(r.start) / ms(r.sequential)}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"kernel": kernel, "runs": args.runs, "rows": v})
            )?
        );
        return Ok(());
    }
    println!("unbloat bench start: egress 19950kbit + ingress 78mbit, vdsl2, on a veth; kernel {kernel}; median of {}", args.runs);
    println!(
        "{:<18} {:>12} {:>12} {:>12} {:>22} {:>8}",
        "setup", "start", "again", "status", "sqm-style one by one", "ratio"
    );
    for r in rows {
        println!(
            "{:<18} {:>9.1} ms {:>9.1} ms {:>9.1} ms {:>19.1} ms {:>7.2}x",
            r.setup,
            ms(r.start),
            ms(r.again),
            ms(r.status),
            ms(r.sequential),
            ms(r.start) / ms(r.sequential)
        );
    }
    println!("start = probe + snapshot + apply (one tc -batch) + read back + verify + record;");
    println!("again = the same start once more: read back and verify, nothing probed or changed;");
    println!("sqm-style = the same commands, one tc process each, nothing probed or verified.");
    Ok(())
}

/// Moves this process into a network namespace of its own: everything it creates there
/// disappears with it, whatever happens.
pub fn private_netns() -> anyhow::Result<()> {
    // SAFETY: unshare only changes this thread's namespace membership; no memory is involved.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        bail!(
            "cannot create a private network namespace: {} (benchmarks need root)",
            std::io::Error::last_os_error()
        );
    }
    let runner = SystemRunner::from_env();
    runner.run(&Cmd::ip(["link", "set", "lo", "up"]))?;
    Ok(())
}
