//! `unbloat test`: run the measurement, then show and save it (summary, JSON, files, plots).

use crate::Failure;
use clap::Args;
use std::path::PathBuf;
use unbloat_measure::{run_test, TerminalProgress, TestArgs};
use unbloat_report::files::{default_basename, write_results_dir};
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
            Err(failure.into())
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
