//! A short real lab run (issue 4 §8): one profile, `none` vs `unbloat`, 10 s of rrul. The bloat
//! must be there without shaping (induced latency > 100 ms) and gone with it (p95 < 30 ms).
//!
//! "Gone" is asserted on the steady state, the probes sent after the load's first 3 s, and the start-up is
//! bounded apart. rrul starts four downloads at once; their slow start overshoots into the modem's
//! FIFO, upstream of the router, and a shaper at 95 % of the line drains that backlog at only 5 %
//! of the rate. On vdsl2 the probes at 0.2 and 0.4 s see 20-60 ms; every later one a few ms. With
//! a probe every 200 ms, the whole load's p95 is its third-worst of 50 samples, so it passed or
//! failed on whether the burst touched two probes or three (CI once saw 32 ms). The cure's steady
//! state is what the shaper controls, so that is what must be under 30 ms; the burst must still
//! stay below the unshaped link's median. A run the lab itself calls CPU-bound is redone (see
//! [`ATTEMPTS`]).
//!
//! It needs the `unbloat` binary (it runs `unbloat serve` and `unbloat test` in the namespaces):
//! `UNBLOAT_EXE` when set, else `target/<profile>/unbloat` beside this test binary, which a
//! workspace build (`cargo build --release`, `make test`) puts there. Missing, the test fails and
//! says how to build it (never a silent skip).

mod common;
use common::unbloat_exe;

use std::path::PathBuf;

use unbloat_lab::lab::{run_lab, LabArgs, LabReport, StrategyRun};
use unbloat_lab::strategies::Strategy;
use unbloat_lab::table::loaded_rtts;
use unbloat_report::files::read_results;
use unbloat_report::stats;
use unbloat_units::Time;

/// The start-up every latency bound leaves out (the task's rule: the steady state is judged, the
/// start-up's peak is reported beside it); on vdsl2 the burst is over after the first second.
const START_S: f64 = unbloat_report::summary::STARTUP_S;

/// The induced UDP BE p95 of the probes sent after the load's first [`START_S`], from the run's
/// results file: loaded RTTs minus the idle median the lab's table uses.
fn p95_after_the_start(out: &std::path::Path, run: &StrategyRun) -> f64 {
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
const ATTEMPTS: usize = 3;

/// The first of [`ATTEMPTS`] lab runs whose calibration passed and whose strategies' loads were
/// not CPU-bound, with its report directory.
fn a_valid_run() -> (LabReport, PathBuf) {
    let mut why = vec![];
    for attempt in 1..=ATTEMPTS {
        // The pid alone repeats from one UML boot to the next; the clock does not.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let out =
            std::env::temp_dir().join(format!("unbloat-lab-test-{}-{nanos}", std::process::id()));
        let args = LabArgs {
            profile: "vdsl2".into(),
            strategies: "none,unbloat".into(),
            duration: Time::from_secs(10),
            out: out.clone(),
            in_kernel: true,
            ..LabArgs::default()
        };
        let report = run_lab(&args, &unbloat_exe()).expect("the lab runs");
        eprint!("{}", report.render_text());
        let Some(reason) = report.machine_bound() else {
            return (report, out);
        };
        eprintln!("attempt {attempt} of {ATTEMPTS} measured this machine, not the link: {reason}");
        why.push(reason);
        std::fs::remove_dir_all(&out).expect("remove the report");
    }
    panic!(
        "no valid lab run in {ATTEMPTS} attempts: {}",
        why.join("; ")
    );
}

unbloat_system::real_kernel_test! {
    fn a_short_lab_shows_the_bloat_and_the_cure() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred", "u32"] {
        let (report, out) = a_valid_run();
        let run = |s: Strategy| report.runs.iter().find(|r| r.row.strategy == s).expect("run");
        let (none, unbloat) = (run(Strategy::None), run(Strategy::Unbloat));
        let be = |r: &StrategyRun| r.row.probe("UDP BE").cloned().expect("UDP BE probes");
        let none_p50 = be(none).induced_p50_ms.expect("none p50");
        assert!(none_p50 > 100.0, "no bloat without shaping? induced p50 {none_p50} ms");
        let cured = p95_after_the_start(&out, unbloat);
        let whole = be(unbloat);
        assert!(
            cured < 30.0,
            "unbloat left induced p95 at {cured} ms after the first {START_S} s (whole load: {:?})",
            whole.induced_p95_ms
        );
        let burst = whole.induced_p99_ms.expect("unbloat p99");
        assert!(burst < none_p50, "unbloat's worst probes ({burst} ms) as bad as no shaping ({none_p50} ms)");
        for f in ["index.html", "lab.json", "table.txt"] {
            assert!(out.join(f).exists(), "{f} missing");
        }
        for run in &report.runs {
            assert!(out.join(&run.results_file).exists(), "{}", run.results_file);
        }
        let html = std::fs::read_to_string(out.join("index.html")).expect("index.html");
        assert!(html.contains("<svg"), "plots are inline");
        std::fs::remove_dir_all(&out).expect("remove the report");
    }
}
