//! Why the lab could not run: one error type for every part of it, each naming what to do.

use std::path::{Path, PathBuf};

use unbloat_shaper::invocation::Unsayable;
use unbloat_testbed::kernel::KernelError;
use unbloat_units::Time;

use crate::profile::ProfileError;
use crate::strategies::StrategyError;
use crate::topology::TopologyError;

/// Why the lab could not run.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("--strategies {0}")]
    Strategies(String),
    #[error("--test {name:?}: no such `unbloat test` profile; known profiles: {}", .known.join(", "))]
    TestName { name: String, known: Vec<String> },
    #[error(
        "--duration {0}: give 2s to 60m (a bare number is seconds, as `unbloat test` takes it)"
    )]
    Duration(Time),
    #[error("--out {path}: the report cannot be written there: {source}")]
    Out {
        path: PathBuf,
        #[source]
        source: unbloat_report::ReportError,
    },
    #[error("--far-end {kind} needs {program}, which is not installed: run scripts/install-deps (Debian package {program})")]
    FarEndProgram {
        kind: &'static str,
        program: &'static str,
    },
    /// sqm-scripts' source is needed and missing: the message says what to give.
    #[error("{0}")]
    SqmScripts(String),
    /// A strategy's program (`script:PATH`, sqm-scripts' `start-sqm`) failed in the router.
    #[error("strategy {strategy} failed in the router ({how}); {stderr}")]
    Script {
        strategy: String,
        how: String,
        stderr: String,
    },
    #[error("--runs 0: give at least 1")]
    Runs,
    #[error("{0} holds no PROFILE/lab.json or PROFILE/run-K/lab.json: give the --out of a finished bench lab")]
    NoBenchmark(PathBuf),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Strategy(#[from] StrategyError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("the lab needs a kernel with {needs}: {source}")]
    Kernel {
        needs: String,
        #[source]
        source: KernelError,
    },
    /// A stop signal ended the guest (see `unbloat_testbed::kernel::interrupted_by`).
    #[error(transparent)]
    Interrupted(KernelError),
    #[error("the lab builds network namespaces, which needs root: run it with sudo")]
    NotRoot,
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`unbloat test` for strategy {strategy} failed (exit status {status}): {detail}")]
    Test {
        strategy: String,
        status: i32,
        detail: String,
    },
    #[error("the results of strategy {strategy} cannot be read: {detail}")]
    Results { strategy: String, detail: String },
    #[error("bench locate: {0}")]
    Locate(String),
    #[error("the lab run inside {kernel} failed (exit status {status}){detail}")]
    Guest {
        kernel: String,
        status: i32,
        detail: String,
    },
    #[error("unbloat's arguments: {0}")]
    Argv(#[from] Unsayable),
}

pub(crate) fn io<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> LabError + 'a {
    move |source| LabError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}
