//! `unbloat plot`: redraws the plots of a results file, or draws an autorate log. The flags
//! are parsed here and handed to `unbloat_report` as its plain [`PlotArgs`].

use std::path::PathBuf;

use clap::Args;
use unbloat_report::files::{run_plot, PlotArgs};

use crate::Failure;

/// `unbloat plot RESULTS [--out DIR]`.
#[derive(Debug, Clone, Args)]
pub struct PlotCmd {
    /// A results file written by `unbloat test --out DIR` (`*.json`).
    #[arg(value_name = "RESULTS")]
    pub results: PathBuf,
    /// Where to write the SVG plots [default: next to the results file].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also print the summary of the run.
    #[arg(long)]
    pub summary: bool,
}

impl PlotCmd {
    pub fn args(&self) -> PlotArgs {
        PlotArgs {
            results: self.results.clone(),
            out: self.out.clone(),
            summary: self.summary,
        }
    }
}

/// An autorate log is drawn as one; anything else is taken for a results file.
pub fn plot(cmd: &PlotCmd) -> Result<(), Failure> {
    let args = cmd.args();
    #[cfg(feature = "autorate")]
    if let Some(drawn) = crate::autorate::plot_log(&args) {
        return drawn;
    }
    run_plot(&args).map_err(Failure::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        plot: PlotCmd,
    }

    /// What `unbloat_report`'s `plot_args_run` test runs, as the command line gives it.
    #[test]
    fn plot_args_parse() {
        let cli = Cli::try_parse_from(["unbloat-plot", "run.json", "--out", "out"]).expect("parse");
        let args = cli.plot.args();
        assert_eq!(args.results, PathBuf::from("run.json"));
        assert_eq!(args.out.as_deref(), Some(std::path::Path::new("out")));
        assert!(!args.summary);
        assert!(
            Cli::try_parse_from(["unbloat-plot"]).is_err(),
            "RESULTS is required"
        );
    }
}
