//! A short real lab run (issue 4 §8): one profile, `none` vs `unbloat`, 10 s of rrul. The bloat
//! must be there without shaping (induced latency > 100 ms) and gone with it (p95 < 30 ms).
//!
//! "Gone" is asserted on the steady state, the probes sent after the load's first 3 s, and the start-up is
//! bounded apart. rrul starts four downloads at once; their slow start overshoots into the modem's
//! FIFO, upstream of the router, and a shaper at 95 % of the line drains that backlog at only 5 %
//! of the rate. On the test's VDSL2 link the probes at 0.2 and 0.4 s see 20-60 ms; every later one a few ms. With
//! a probe every 200 ms, the whole load's p95 is its third-worst of 50 samples, so it passed or
//! failed on whether the burst touched two probes or three (CI once saw 32 ms). The cure's steady
//! state is what the shaper controls, so that is what must be under 30 ms; the burst must still
//! stay below the unshaped link's median. A run the lab itself calls CPU-bound is redone (see
//! [`ATTEMPTS`]). It runs `alone` (no other test's guest beside it): the lab cannot see host CPU
//! that another guest takes after its calibration, and beside the far-end tests' unshaped
//! transfers CI once measured a steady p95 of 57 ms, p50 28 ms, on a run the lab called valid.
//!
//! Then it looks at the run's report in headless Chromium, at a laptop's and a phone's width
//! (`common/report_view.rs`; screenshots in `target/test-reports/lab-report/`).
//!
//! It needs the `unbloat` binary (it runs `unbloat serve` and `unbloat test` in the namespaces):
//! `UNBLOAT_EXE` when set, else `target/<profile>/unbloat` beside this test binary, which a
//! workspace build (`cargo build --release`, `make test`) puts there. Missing, the test fails and
//! says how to build it (never a silent skip).

mod common;
use common::unbloat_exe;
#[path = "common/lab_run.rs"]
mod lab_run;
use lab_run::{a_valid_run, p95_after_the_start, START_S};
#[path = "common/report_view.rs"]
mod report_view;

use unbloat_lab::lab::StrategyRun;
use unbloat_lab::strategies::Strategy;

unbloat_testbed::real_kernel_test! {
    fn a_short_lab_shows_the_bloat_and_the_cure() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred", "u32"] alone {
        let (report, out) = a_valid_run("none,unbloat", &unbloat_exe());
        let out = &out.0;
        let run = |s: Strategy| report.runs.iter().find(|r| r.row.strategy == s).expect("run");
        let (none, unbloat) = (run(Strategy::None), run(Strategy::Unbloat));
        let be = |r: &StrategyRun| r.row.probe("UDP BE").cloned().expect("UDP BE probes");
        let none_p50 = be(none).induced_p50_ms.expect("none p50");
        assert!(none_p50 > 100.0, "no bloat without shaping? induced p50 {none_p50} ms");
        let cured = p95_after_the_start(out, unbloat);
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
        // Issue 57: the report as a new user sees it, after the measuring is done (Chromium
        // would take the guest's CPU from the runs).
        let names: Vec<String> = report.runs.iter().map(|r| r.row.strategy.name()).collect();
        report_view::check_svgs(out, &names);
        report_view::look_at_the_report(out, &names);
    }
}
