//! unbloat-report: what a test run measured, what it means, and how to show it.
//!
//! The layers, from data to pictures:
//! - [`model`]: the raw results of one run (throughput per stream, every probe), serde JSON with a
//!   version and an upgrade path. `unbloat-measure` fills it in; everything below only reads it.
//! - [`stats`]: pure statistics (percentile, median, Jain's index, induced latency, grade, RPM).
//! - [`summary`]: the numbers a person asks for, computed from a [`Results`], and a terminal table.
//! - [`flent`]: a `.flent.gz` data file that flent itself opens and plots.
//! - [`plot`]: hand-written SVG plots (timeseries, latency CDF, per-second latency spread).
//! - [`synthetic`]: deterministic made-up runs for tests and examples.
//! - [`files`]: writes all of the above into a directory; `unbloat plot` redraws from a file.
//!
//! Nothing here touches the network or runs commands (the flent tests run flent only to check
//! that it reads our files).

pub mod flent;
pub mod format;
pub mod model;
pub mod plot;
pub mod stats;
pub mod summary;
pub mod synthetic;

pub use model::{
    Direction, Metadata, Phase, Phases, ProbeKind, ProbeSample, ProbeSeries, Results, StreamSeries,
    ThroughputSample, RESULTS_VERSION,
};
pub use stats::Grade;
pub use summary::{render_text, Summary};

use std::path::PathBuf;

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
