//! `unbloat-lab bench soak`: the daemon through thousands of link re-creations, reloads and
//! scrapes, its memory, files and threads read throughout (issue 53 §3; the work is the lab
//! crate's [`unbloat_lab::bench_soak`]). A command of its own rather than a mode of `bench
//! daemon`: that one measures a scrape's cost on a quiet link, this one the daemon's events, and
//! their flags and tables share nothing. In a kernel with cake (User-Mode Linux here), in a
//! private namespace.
//!
//! `--autorate-trace` is read and checked here, before a guest boots for it: a file that is
//! missing or is no mahimahi trace is refused naming the flag (exit 2). The guest, which sees
//! the host's files, reads it again by the same path.

use anyhow::anyhow;
use clap::Args;
use std::time::Duration;

use crate::Failure;
use unbloat_lab::bench_soak::{self, SoakArgs, SoakTrace};
use unbloat_lab::trace::RateTrace;

#[derive(Debug, Args)]
pub struct SoakBench {
    /// Iterations: each re-creates the shaped interface and scrapes the metrics and the page's
    /// status once.
    #[arg(long, value_name = "N", default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub iterations: u32,
    /// Stop after this long even if iterations remain (30m, 2h; a bare number is seconds).
    #[arg(long, value_name = "D", default_value = "30m", value_parser = crate::durations::soak_time)]
    pub duration: unbloat_units::Time,
    /// Change the config and `unbloat reload` every N iterations.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub reload_every: u32,
    /// Keep wan0 this long once shaped again, before the scrapes and the next re-creation
    /// (0s to 10m): time for autorate, which waits 2 s before it opens a re-created wan0.
    #[arg(long, value_name = "D", default_value = "0s", value_parser = crate::durations::soak_hold)]
    pub hold: unbloat_units::Time,
    /// Run the daemon's autorate on wan0, whose download capacity follows this mahimahi trace
    /// (third_party/traces/*.down): a far side with the bottleneck, a TCP download through it
    /// and the reflectors.
    #[arg(long, value_name = "FILE")]
    pub autorate_trace: Option<std::path::PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Internal: we are already in a kernel with every qdisc.
    #[arg(long, hide = true)]
    pub inside: bool,
}

pub fn soak_bench(a: &SoakBench) -> Result<(), Failure> {
    let max_seconds = a.duration.micros() as f64 / 1e6;
    let trace = a.autorate_trace.as_deref().map(read_trace).transpose()?;
    if !a.inside {
        // The guest's own limit: the soak's, and ten minutes to boot and end.
        let limit = Duration::from_secs_f64(max_seconds) + Duration::from_secs(600);
        if crate::cmd_kernel::rerun_in_real_kernel(crate::cmd_kernel::ALL_QDISCS, &[], limit)? {
            return Ok(());
        }
    }
    crate::cmd_kernel::private_netns()?;
    let exe = crate::product()?;
    let dir = unbloat_safefs::private_dir(std::path::Path::new("/run"), "unbloat-bench-soak")?;
    let args = SoakArgs {
        iterations: a.iterations as usize,
        max_seconds,
        reload_every: a.reload_every as usize,
        hold: a.hold.as_duration(),
        autorate: trace,
    };
    eprintln!(
        "unbloat bench soak: {} iterations (at most {max_seconds:.0} s), a reload every {}{}",
        args.iterations,
        args.reload_every,
        match &args.autorate {
            Some(t) => format!(
                ", autorate on {} (mean {:.2} Mbit/s), wan0 held {:.1} s each time",
                t.name,
                t.trace.mean().bits_per_sec() as f64 / 1e6,
                args.hold.as_secs_f64()
            ),
            None => String::new(),
        }
    );
    let result = bench_soak::run(&exe, &dir, &args, |p| {
        eprintln!(
            "  {}/{} in {:.0} s: RSS {} KiB, {} fds, {} threads",
            p.iteration,
            args.iterations,
            p.seconds,
            p.reading.rss_kib,
            p.reading.fds,
            p.reading.threads
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
    let bench = result.map_err(|e| anyhow!(e))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&bench)?);
    } else {
        print!("{}", bench_soak::render(&bench));
    }
    Ok(())
}

/// `--autorate-trace`'s file as a trace of 100 ms windows (the lab's, `bench autorate`'s); a
/// file that cannot be read or is no trace is invalid input (exit 2).
fn read_trace(path: &std::path::Path) -> Result<SoakTrace, Failure> {
    let bad = |e: &dyn std::fmt::Display| {
        crate::invalid(anyhow!("--autorate-trace {}: {e}", path.display()))
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(&e))?;
    let trace = RateTrace::from_mahimahi(&text, Duration::from_millis(100)).map_err(|e| bad(&e))?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(SoakTrace { name, trace })
}
