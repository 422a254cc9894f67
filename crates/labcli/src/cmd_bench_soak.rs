//! `unbloat-lab bench soak`: the daemon through thousands of link re-creations, reloads and
//! scrapes, its memory, files and threads read throughout (issue 53 §3; the work is the lab
//! crate's [`unbloat_lab::bench_soak`]). A command of its own rather than a mode of `bench
//! daemon`: that one measures a scrape's cost on a quiet link, this one the daemon's events, and
//! their flags and tables share nothing. In a kernel with cake (User-Mode Linux here), in a
//! private namespace.

use anyhow::anyhow;
use clap::Args;
use std::time::Duration;

use crate::Failure;
use unbloat_lab::bench_soak::{self, SoakArgs};

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
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Internal: we are already in a kernel with every qdisc.
    #[arg(long, hide = true)]
    pub inside: bool,
}

pub fn soak_bench(a: &SoakBench) -> Result<(), Failure> {
    let max_seconds = a.duration.micros() as f64 / 1e6;
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
    };
    eprintln!(
        "unbloat bench soak: {} iterations (at most {max_seconds:.0} s), a reload every {}",
        args.iterations, args.reload_every
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
