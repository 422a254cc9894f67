//! Test knobs: environment variables that make unbloat misbehave on purpose, for the tests of
//! the binary. `UNBLOAT_TC`, `UNBLOAT_IP` and `UNBLOAT_NFT` replace the `tc`, `ip` and `nft`
//! programs ([`crate::runner`]); `UNBLOAT_CHILD_TIMEOUT_MS` shortens the deadline of every child
//! ([`crate::runner::DEFAULT_TIMEOUT`]); `UNBLOAT_CRASH_AT` kills the process at a point of a
//! transaction ([`crate::apply::crash_point`]); `UNBLOAT_TUNE_RESULT` names a `tune.json` that
//! `unbloat tune` takes as its run's result instead of measuring (its output and `--save-as`
//! tested against a real kernel's gateway without minutes of load).
//!
//! They exist only in builds with the `test-knobs` feature (off by default; every `cargo test`
//! of the `unbloat` crate turns it on through its dev-dependency, and `make test` names it): a
//! release binary runs as root, and a root process that honoured `UNBLOAT_TC=/tmp/evil`
//! inherited from sudo, a unit file or cron would run that file as root.

use std::ffi::OsString;

/// Whether this build reads the knobs.
pub const ENABLED: bool = cfg!(feature = "test-knobs");

/// The knob `name` when this build reads knobs and it is set and not empty.
pub fn var(name: &str) -> Option<OsString> {
    read(ENABLED, name)
}

/// [`var`] with the build's choice as an argument, so the product's path (`enabled` false) is
/// tested in every build.
fn read(enabled: bool, name: &str) -> Option<OsString> {
    if !enabled {
        return None;
    }
    std::env::var_os(name).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36, item 11: the release binary obeyed `UNBLOAT_TC` and ran it as root.
    #[test]
    fn a_build_without_the_knobs_ignores_them_even_when_set() {
        // A name of this test's own, so no other test thread reads it.
        let name = "UNBLOAT_KNOBS_TEST_TC";
        std::env::set_var(name, "/tmp/evil");
        assert_eq!(read(false, name), None);
        assert_eq!(read(true, name), Some("/tmp/evil".into()));
        std::env::set_var(name, "");
        assert_eq!(read(true, name), None, "empty is unset");
        std::env::remove_var(name);
    }

    #[test]
    fn the_runner_of_a_build_without_knobs_runs_the_real_tc() {
        // What `SystemRunner::from_env` decides, with the knobs of a release build.
        let overridden: Vec<_> = crate::runner::PROGRAM_OVERRIDES
            .iter()
            .filter(|(_, var)| read(false, var).is_some())
            .collect();
        assert!(overridden.is_empty(), "{overridden:?}");
    }
}
