//! unbloat-report: what a test run measured, what it means, and how to show it.
//!
//! The layers, from data to pictures:
//! - [`model`]: the raw results of one run (throughput per stream, every probe), serde JSON with a
//!   version and an upgrade path. `unbloat-measure` fills it in; everything below only reads it.
//! - [`qdiscs`]: the egress interface's qdiscs a run records, tc's words kept and read as types.
//! - [`stats`]: pure statistics (percentile, median, Jain's index, induced latency, grade, RPM).
//! - [`summary`]: the numbers a person asks for, computed from a [`Results`], and a terminal table.
//! - [`locate`]: where the queue stands (this machine, the first hop, beyond), from the far end's
//!   and the gateway's probes side by side.
//! - [`flent`]: a `.flent.gz` data file that flent itself opens and plots.
//! - [`plot`]: hand-written SVG plots (timeseries, latency CDF, per-second latency spread).
//! - [`files`]: writes all of the above into a directory; `unbloat plot` redraws from a file.
//! - [`format`]: how numbers are spelled for people ("12.3 ms", "18.9 Mbit/s").
//! - [`synthetic`]: deterministic made-up runs for tests and examples.
//!
//! Nothing here touches the network or runs commands (only the flent tests run flent, to check
//! that it reads our files).
//!
//! ```
//! use unbloat_report::{files, synthetic, Summary};
//!
//! let results = synthetic::rrul(1); // unbloat-measure produces these for real
//! let summary = Summary::from_results(&results);
//! println!("{}", unbloat_report::render_text(&summary));
//! let dir = std::env::temp_dir().join(format!("unbloat-report-doc-{}", std::process::id()));
//! let written = files::write_results_dir(&results, &dir, "run")?;
//! assert!(written.flent.is_some()); // rrul has a flent counterpart
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), unbloat_report::ReportError>(())
//! ```

pub mod files;
#[cfg(feature = "plots")]
pub mod flent;
pub mod format;
pub mod locate;
pub mod model;
#[cfg(feature = "plots")]
pub mod plot;
pub mod qdiscs;
pub mod rpm;
pub mod stats;
pub mod summary;
pub mod synthetic;

#[cfg(feature = "plots")]
pub use files::{redraw, run_plot, PlotArgs};
pub use files::{write_results_dir, Written};
pub use model::{
    Direction, Metadata, Phase, Phases, ProbeKind, ProbeSample, ProbeSeries, Results, StreamSeries,
    ThroughputSample, RESULTS_VERSION,
};
#[cfg(feature = "plots")]
pub use plot::write_plots;
pub use qdiscs::EgressQdiscs;
pub use stats::Grade;
pub use summary::{render_text, Summary};

use std::path::PathBuf;

/// The mode of a results file, flent file or plot: anyone may read a measurement.
pub const FILE_MODE: u32 = 0o644;

/// Everything that can go wrong while reading, summarising or writing results.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("results file is not valid: {0}")]
    Json(String),
    #[error("results file has no \"version\" field; is it an unbloat results file?")]
    MissingVersion,
    #[error(
        "results file is version {found}, but this unbloat reads at most version {supported}; \
         use a newer unbloat to read it"
    )]
    NewerVersion { found: u32, supported: u32 },
    #[error("results file version {0} is not a version unbloat ever wrote")]
    UnknownVersion(u32),
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
