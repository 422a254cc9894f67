//! Writing a run's files into a directory, and `unbloat plot RESULTS`.
//!
//! What callers can rely on:
//! - [`write_results_dir`] creates the directory if needed and writes, all named after one
//!   basename: `<base>.json` (the versioned [`Results`], read back by [`Results::from_json`]),
//!   `<base>.flent.gz` when the profile has a flent counterpart ([`FlentTest::for_profile`]),
//!   and the plots `<base>-timeseries.svg`, `<base>-latency_cdf.svg`,
//!   `<base>-latency_spread.svg`. The JSON is written first, so if anything later fails the
//!   measurements themselves are already safe on disk.
//! - [`redraw`] rebuilds the plots from a results file of any supported version; it never
//!   rewrites the results file.
//! - [`check_writable`] finds out before a run whether its files could be written at all.
//! - Every error names the file and what was being done ([`ReportError::Io`]).
//! - Files are written as [`unbloat_safefs`] writes them (this runs as root, often into a
//!   directory others can write): a link or a FIFO planted at a file's name is refused, never
//!   written through, and a results directory that is a link is refused.

use std::path::{Path, PathBuf};

#[cfg(feature = "plots")]
use crate::flent::{write_flent_file, FlentTest};
use crate::format::iso_utc;
use crate::model::Results;
#[cfg(feature = "plots")]
use crate::plot;
#[cfg(feature = "plots")]
use crate::summary::{render_text, Summary};
use crate::{ReportError, FILE_MODE};

/// What [`write_results_dir`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub results_json: PathBuf,
    pub flent: Option<PathBuf>,
    pub plots: Vec<PathBuf>,
}

impl Written {
    /// Every file written, results first.
    pub fn all(&self) -> Vec<&Path> {
        let mut v = vec![self.results_json.as_path()];
        v.extend(self.flent.as_deref());
        v.extend(self.plots.iter().map(PathBuf::as_path));
        v
    }
}

/// `unbloat-<profile>-<UTC start time>`, e.g. `unbloat-rrul-2023-11-14T221320`: sorts by
/// time, and has no characters a file system or shell would mind.
pub fn default_basename(results: &Results) -> String {
    let when: String = iso_utc(results.metadata.started_at_unix)
        .chars()
        .take(19)
        .filter(|&c| c != ':')
        .collect();
    let profile: String = results
        .metadata
        .profile
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("unbloat-{profile}-{when}")
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ReportError {
    let path = path.to_path_buf();
    move |source| ReportError::Io {
        action,
        path,
        source,
    }
}

/// Creates `dir` if needed and creates (and removes) a file in it: a run that will write its
/// results there learns before it starts, not after minutes of measuring, that it cannot.
pub fn check_writable(dir: &Path) -> Result<(), ReportError> {
    use std::io::Write;
    unbloat_safefs::ensure_dir(dir).map_err(io("creating results directory", dir))?;
    let probe = dir.join(format!(".unbloat-write-check-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|mut f| f.write_all(b"x"));
    let removed = std::fs::remove_file(&probe);
    written.map_err(io("writing a file in", dir))?;
    removed.map_err(io("removing a file from", dir))
}

/// Writes the results file, the flent file (when the profile has one) and the plots (the last
/// two with the feature `plots`).
pub fn write_results_dir(
    results: &Results,
    dir: &Path,
    basename: &str,
) -> Result<Written, ReportError> {
    unbloat_safefs::ensure_dir(dir).map_err(io("creating results directory", dir))?;
    let results_json = dir.join(format!("{basename}.json"));
    let mut text = results.to_json_pretty()?;
    text.push('\n');
    unbloat_safefs::write(&results_json, text, FILE_MODE)
        .map_err(io("writing results file", &results_json))?;
    // The router's small build leaves out the flent file and the plots (feature `plots`): a
    // full build draws them from the results file (`unbloat plot`).
    #[cfg(feature = "plots")]
    let flent = match FlentTest::for_profile(&results.metadata.profile) {
        Some(test) => {
            let path = dir.join(format!("{basename}.flent.gz"));
            write_flent_file(results, test, &path)?;
            Some(path)
        }
        None => None,
    };
    #[cfg(feature = "plots")]
    let plots = plot::write_plots_with_prefix(results, dir, &format!("{basename}-"))?;
    #[cfg(not(feature = "plots"))]
    let (flent, plots) = (None, vec![]);
    Ok(Written {
        results_json,
        flent,
        plots,
    })
}

/// Reads a results file (any supported version).
pub fn read_results(path: &Path) -> Result<Results, ReportError> {
    let bytes = unbloat_safefs::read(path).map_err(io("reading results file", path))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        io("reading results file", path)(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text: {e}"),
        ))
    })?;
    Results::from_json(&text)
}

#[cfg(feature = "plots")]
/// Redraws the plots of the results file at `results_json` into `out_dir`, named after the
/// results file (`x.json` gives `x-timeseries.svg`, ...).
pub fn redraw(results_json: &Path, out_dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let results = read_results(results_json)?;
    let stem = results_json
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    let base = stem.unwrap_or_else(|| default_basename(&results));
    unbloat_safefs::ensure_dir(out_dir).map_err(io("creating plot directory", out_dir))?;
    plot::write_plots_with_prefix(&results, out_dir, &format!("{base}-"))
}

#[cfg(feature = "plots")]
/// `unbloat plot RESULTS [--out DIR]` (the `unbloat` binary parses the command line).
#[derive(Debug, Clone)]
pub struct PlotArgs {
    /// A results file written by `unbloat test --out DIR` (`*.json`).
    pub results: PathBuf,
    /// Where to write the SVG plots [default: next to the results file].
    pub out: Option<PathBuf>,
    /// Also print the summary of the run.
    pub summary: bool,
}

#[cfg(feature = "plots")]
/// Runs `unbloat plot`: redraws the plots, prints the summary if asked and the files written.
pub fn run_plot(args: &PlotArgs) -> Result<(), ReportError> {
    let out_dir = match &args.out {
        Some(dir) => dir.clone(),
        None => match args.results.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        },
    };
    if args.summary {
        let results = read_results(&args.results)?;
        print!("{}", render_text(&Summary::from_results(&results)));
    }
    for path in redraw(&args.results, &out_dir)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}
