//! `unbloat test`: run the measurement, then show and save it (summary, JSON, files, plots).

use crate::Failure;
use clap::Args;
use std::path::PathBuf;
use unbloat_measure::{run_test, TerminalProgress, TestArgs};
use unbloat_report::files::{check_writable, default_basename, write_results_dir};
use unbloat_report::model::Results;
use unbloat_report::summary::{render_text, Summary};

#[derive(Debug, Args)]
pub struct TestCmd {
    #[command(flatten)]
    pub test: TestArgs,
    /// Write the results file (versioned JSON with metadata), the flent file (`.flent.gz`,
    /// for rrul, rrul_be, tcp_nup, tcp_ndown and ping) and the SVG plots into DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the summary as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn test(args: &TestCmd) -> Result<(), Failure> {
    let _plan = args.test.plan().map_err(crate::invalid)?;
    // Before anything runs: a directory the results cannot go to would lose the whole run.
    if let Some(dir) = &args.out {
        check_writable(dir).map_err(|e| {
            crate::invalid(anyhow::Error::new(e).context(format!(
                "--out {}: the results could not be written there",
                dir.display()
            )))
        })?;
    }
    let mut progress = TerminalProgress::default();
    match run_test(&args.test, &mut progress) {
        Ok(results) => report(args, &results),
        Err(failure) => {
            if let Some(partial) = &failure.partial {
                eprintln!("unbloat: the test ended early; what was measured is marked partial");
                report(args, partial)?;
                return Err(Failure {
                    code: 3,
                    error: failure.into(),
                });
            }
            // Busy, refused, foreign or gone: the far end's doing, not this machine's.
            let code = if failure.error.is_far_end() { 3 } else { 1 };
            Err(Failure {
                code,
                error: failure.into(),
            })
        }
    }
}

fn report(args: &TestCmd, results: &Results) -> Result<(), Failure> {
    let summary = Summary::from_results(results);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", render_text(&summary));
    }
    if let Some(dir) = &args.out {
        let written = write_results_dir(results, dir, &default_basename(results))?;
        for path in written.all() {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::{Duration, Instant};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cmd: TestCmd,
    }

    /// Bug: an `--out` directory that could not be written was found only after the whole run
    /// (and the results were lost with it). Now it is checked first: exit status 2, the flag
    /// named, and no test run (against a live server that would have served one).
    #[test]
    fn an_unwritable_out_directory_is_refused_before_the_run() {
        let (server, addr) = unbloat_measure::Server::bind(unbloat_measure::ServeOptions {
            listen: Some("127.0.0.1:0".parse().expect("addr")),
            log: false,
            ..Default::default()
        })
        .expect("bind");
        let _server = server.spawn(addr).expect("serve");
        let scratch = std::env::temp_dir().join(format!("unbloat-cli-out-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("scratch");
        let file = scratch.join("a-file");
        std::fs::write(&file, "not a directory").expect("file");
        // As root a mode cannot make a directory unwritable: a path through a file can.
        for out in [file.join("results"), file.clone()] {
            let cmd = Cli::parse_from([
                "test",
                &addr.to_string(),
                "--profile=ping",
                "--duration=1s",
                "--idle=3s",
                "--out",
                &out.display().to_string(),
            ])
            .cmd;
            let started = Instant::now();
            let failure = test(&cmd).expect_err("refused");
            assert_eq!(failure.code, 2, "{:#}", failure.error);
            let text = format!("{:#}", failure.error);
            assert!(text.contains("--out"), "{text}");
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "a test ran first ({:?})",
                started.elapsed()
            );
        }
        let _ = std::fs::remove_dir_all(&scratch);
    }
}
