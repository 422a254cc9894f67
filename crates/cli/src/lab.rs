//! `unbloat lab` and `unbloat bench lab | measure`: glue to unbloat-lab and unbloat-measure.

use crate::Failure;
use anyhow::anyhow;
use clap::Args;
use std::time::Duration;
use unbloat_lab::bench::{
    load_benchmark, render_benchmark, render_json, run_benchmark, BenchLabArgs,
};
use unbloat_lab::lab::{print_report, run_lab, LabArgs};
use unbloat_measure::bench::{self, IdleRtt, Part};
use unbloat_system::kernel::{GuestOptions, Kernel};

#[derive(Debug, Args)]
pub struct LabCmd {
    #[command(flatten)]
    pub args: LabArgs,
}

#[derive(Debug, Args)]
pub struct LabBenchCmd {
    #[command(flatten)]
    pub args: BenchLabArgs,
}

#[derive(Debug, Args)]
pub struct MeasureBenchCmd {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Leave out the 20 ms netem path (it needs netem: the host's kernel or User-Mode Linux).
    #[arg(long)]
    pub no_netem: bool,
    /// Internal: measure only the netem path, here, and print it as JSON (the UML re-exec).
    #[arg(long = "netem-rtt-part", hide = true)]
    pub netem_part: bool,
}

pub fn lab(cmd: &LabCmd) -> Result<(), Failure> {
    let exe = std::env::current_exe()?;
    let report = run_lab(&cmd.args, &exe)?;
    print_report(&cmd.args, &report)?;
    Ok(())
}

pub fn lab_bench(cmd: &LabBenchCmd) -> Result<(), Failure> {
    let exe = std::env::current_exe()?;
    let benches = match &cmd.args.from {
        Some(dir) => load_benchmark(dir)?,
        None => run_benchmark(&cmd.args, &exe)?,
    };
    if cmd.args.json {
        println!("{}", render_json(&benches)?);
    } else {
        print!("{}", render_benchmark(&benches));
    }
    Ok(())
}

/// The accuracy benchmarks of the measuring engine against iperf3 and ping (issue 3 §5).
pub fn measure_bench(cmd: &MeasureBenchCmd) -> Result<(), Failure> {
    if cmd.netem_part {
        let part: Part<IdleRtt> = bench::netem_idle_rtt().into();
        println!("{}", serde_json::to_string(&part)?);
        return Ok(());
    }
    let report = bench::run(|| {
        if cmd.no_netem {
            Err("left out (--no-netem)".into())
        } else {
            netem_in_a_kernel()
        }
    });
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", bench::table(&report));
    }
    Ok(())
}

/// The 20 ms netem path needs netem: the host kernel's, or this binary re-run inside UML.
fn netem_in_a_kernel() -> Result<IdleRtt, String> {
    let kernel = Kernel::detect(&["netem"]).map_err(|e| e.to_string())?;
    if kernel == Kernel::Host {
        return bench::netem_idle_rtt();
    }
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let argv = vec![
        exe.display().to_string(),
        "bench".into(),
        "measure".into(),
        bench::NETEM_PART_ARG.into(),
    ];
    let opts = GuestOptions {
        timeout: Duration::from_secs(180),
        ..GuestOptions::default()
    };
    let out = kernel
        .run(&argv, &opts)
        .map_err(|e| format!("{}: {e}", kernel.describe()))?;
    let part: Part<IdleRtt> = serde_json::from_str(out.stdout.trim()).map_err(|e| {
        format!(
            "the guest printed no result ({e}); stderr: {}",
            out.stderr.trim()
        )
    })?;
    match part {
        Part {
            value: Some(mut v), ..
        } => {
            v.path = format!("{} (in {})", v.path, kernel.describe());
            Ok(v)
        }
        Part { not_measured, .. } => {
            Err(not_measured.unwrap_or_else(|| anyhow!("no result").to_string()))
        }
    }
}
