//! `unbloat-lab run` and `unbloat-lab bench lab | measure`: glue to the lab crate.

use crate::flags::{BenchLabFlags, LabFlags};
use crate::Failure;
use anyhow::anyhow;
use clap::Args;
use std::time::Duration;
use unbloat_lab::bench::{
    self as lab_bench_run, load_benchmark, render_benchmark, render_json, run_benchmark,
    BenchLabArgs,
};
use unbloat_lab::bench_measure::{self as bench, IdleRtt, Part};
use unbloat_lab::lab::{check, print_report, run_lab_with, LabArgs, Rerun};
use unbloat_testbed::kernel::{interrupted_by, own_argv, GuestOptions, Kernel};

#[derive(Debug, Args)]
pub struct LabCmd {
    #[command(flatten)]
    pub args: LabFlags,
}

#[derive(Debug, Args)]
pub struct LabBenchCmd {
    #[command(flatten)]
    pub args: BenchLabFlags,
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
    let args = LabArgs::from(cmd.args.clone());
    // Every option and the report directory, before anything is built or booted.
    check(&args).map_err(crate::invalid)?;
    let exe = crate::product()?;
    let report = run_lab_with(&args, &exe, &Rerun::OwnArgs).map_err(stopped_or_failed)?;
    print_report(&args, &report)?;
    // The copy inside a kernel leaves this verdict to the outer process, which reads its report.
    let partial: Vec<String> = report
        .runs
        .iter()
        .filter(|r| r.row.partial)
        .map(|r| r.row.strategy.to_string())
        .collect();
    if !args.in_kernel && !partial.is_empty() {
        return Err(Failure {
            code: 3,
            error: anyhow!(
                "the test of {} ended early; its row is marked partial (see the notes)",
                partial.join(", ")
            ),
        });
    }
    Ok(())
}

/// A run that a stop signal ended (the User-Mode Linux guest was killed and its run directory
/// removed) exits with 128 + the signal, as a shell reports a process the signal killed.
fn stopped_or_failed(e: impl Into<anyhow::Error>) -> Failure {
    match interrupted_by() {
        Some(signal) => Failure {
            code: 128 + signal,
            error: e.into(),
        },
        None => Failure::from(e),
    }
}

pub fn lab_bench(cmd: &LabBenchCmd) -> Result<(), Failure> {
    let args = BenchLabArgs::from(cmd.args.clone());
    lab_bench_run::check(&args).map_err(crate::invalid)?;
    let exe = crate::product()?;
    let benches = match &args.from {
        Some(dir) => load_benchmark(dir)?,
        None => run_benchmark(&args, &exe).map_err(stopped_or_failed)?,
    };
    if args.json {
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
    // The netem part's guest was stopped by a signal: the user asked to stop, not for a table.
    if let Some(signal) = interrupted_by() {
        return Err(Failure {
            code: 128 + signal,
            error: anyhow!("interrupted (signal {signal}); the User-Mode Linux guest was stopped"),
        });
    }
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
    // This command again, only its netem part: the copy measures it and prints it as JSON.
    let argv = own_argv(&[bench::NETEM_PART_ARG.into()]).map_err(|e| e.to_string())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Instant;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        lab: LabCmd,
    }

    /// Bug: `unbloat-lab run` (now `unbloat-lab run`) exited 1 on bad input, and `--test bogus` failed only after some 45 s
    /// of setup (a User-Mode Linux boot and the calibration). Every option, and the report
    /// directory, is now checked first: exit status 2, the flag named, nothing booted.
    #[test]
    fn bad_lab_input_exits_2_before_anything_boots() {
        let scratch = std::env::temp_dir().join(format!("unbloat-cli-lab-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("scratch");
        let file = scratch.join("a-file");
        std::fs::write(&file, "not a directory").expect("file");
        let out = scratch.join("report").display().to_string();
        let through_a_file = file.join("report").display().to_string();
        let not_executable = scratch.join("shaper.sh");
        std::fs::write(&not_executable, "#!/bin/sh\n").expect("script");
        let not_executable = format!("none,script:{}", not_executable.display());
        let cases: [(&[&str], &str); 10] = [
            (&["--test", "bogus"], "--test"),
            (&["--strategies", "none,cake"], "--strategies"),
            (&["--strategies", "script:"], "--strategies"),
            (
                &["--strategies", "script:/no/such/shaper.sh"],
                "/no/such/shaper.sh",
            ),
            (&["--strategies", &not_executable], "not executable"),
            (
                &["--strategies", "sqm-scripts:bogus"],
                "unknown sqm-scripts recipe",
            ),
            (&["--duration", "500ms"], "--duration"),
            (&["--duration", "2h"], "--duration"),
            (&["--profile", "no-such-link"], "no-such-link"),
            (&["--out", &through_a_file], "--out"),
        ];
        for (extra, needle) in cases {
            let argv = ["run", "--out", out.as_str()]
                .into_iter()
                .chain(extra.iter().copied());
            let cmd = match Cli::try_parse_from(argv) {
                Ok(cli) => cli.lab,
                // clap refuses some values itself, with exit status 2 as well.
                Err(e) => {
                    assert_eq!(e.exit_code(), 2, "{extra:?}: {e}");
                    continue;
                }
            };
            let started = Instant::now();
            let failure = lab(&cmd).expect_err("refused");
            let text = format!("{:#}", failure.error);
            assert_eq!(failure.code, 2, "{extra:?}: {text}");
            assert!(text.contains(needle), "{extra:?}: {text}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{extra:?} took {:?}: something ran first",
                started.elapsed()
            );
        }
        let _ = std::fs::remove_dir_all(&scratch);
    }
}
