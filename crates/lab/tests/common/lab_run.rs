//! A short real lab run and how its cure is judged, for the tests that run one (`lab.rs`,
//! `script.rs`). A module of its own, included with `#[path]` only by them, so the other test
//! binaries do not carry unused code.

use std::path::Path;

use unbloat_lab::lab::{run_lab, LabArgs, LabReport, StrategyRun};
use unbloat_lab::table::loaded_rtts;
use unbloat_report::files::read_results;
use unbloat_report::stats;
use unbloat_system::sqm::workdir::WorkDir;
use unbloat_units::Time;

/// The start-up every latency bound leaves out (the task's rule: the steady state is judged, the
/// start-up's peak is reported beside it); on the test profile the burst is over within it.
pub const START_S: f64 = unbloat_report::summary::STARTUP_S;

/// The induced UDP BE p95 of the probes sent after the load's first [`START_S`], from the run's
/// results file: loaded RTTs minus the idle median the lab's table uses.
pub fn p95_after_the_start(out: &Path, run: &StrategyRun) -> f64 {
    let results = read_results(&out.join(&run.results_file)).expect("the run's results");
    let rtts = loaded_rtts(&results, "UDP BE", START_S).expect("UDP BE probes");
    assert!(
        rtts.len() >= 30,
        "only {} UDP BE probes after the start",
        rtts.len()
    );
    let idle = run
        .row
        .probe("UDP BE")
        .and_then(|p| p.idle_ms)
        .expect("UDP BE idle median");
    let p95 = stats::percentile(&rtts, 95.0).expect("p95");
    stats::induced_latency(p95, idle).expect("a finite p95")
}

/// Runs whose CPU was the limit measure the machine, not the link (the lab says so, by seed
/// 001's rule: see `unbloat_lab::cpu`); a slowed host once made every such run's shaped latency
/// 70-100 ms. Those runs are redone, up to this many in all; the test fails if none is valid.
pub const ATTEMPTS: usize = 3;

/// The first of [`ATTEMPTS`] 10 s rrul labs of `strategies` on the test profile (vdsl2's framing
/// at 20/5 Mbit/s: `crate::common::TEST_PROFILE`), in this kernel, whose
/// calibration passed and whose strategies' loads were not CPU-bound, with its report directory
/// (removed when the guard goes).
pub fn a_valid_run(strategies: &str, exe: &Path) -> (LabReport, WorkDir) {
    let mut why = vec![];
    for attempt in 1..=ATTEMPTS {
        // Removed with its guard: after the test, after a failed assertion, and for a rejected
        // attempt as soon as the next one replaces it.
        let dir = WorkDir::new("lab-test").expect("a report directory");
        let out = dir.0.clone();
        let args = LabArgs {
            profile: crate::common::TEST_PROFILE.into(),
            strategies: strategies.into(),
            duration: Time::from_secs(10),
            out: out.clone(),
            in_kernel: true,
            ..LabArgs::default()
        };
        let report = run_lab(&args, exe).expect("the lab runs");
        eprint!("{}", report.render_text());
        let Some(reason) = report.machine_bound() else {
            return (report, dir);
        };
        eprintln!("attempt {attempt} of {ATTEMPTS} measured this machine, not the link: {reason}");
        why.push(reason);
    }
    panic!(
        "no valid lab run in {ATTEMPTS} attempts: {}",
        why.join("; ")
    );
}
