//! `unbloat autorate` on a variable link (issue 16): the lab's modem follows a step (20 Mbit/s
//! down and 5 up for 15 s, half that for 15 s, then full again), `unbloat autorate` runs in the
//! router through 45 s of rrul, and its own log must show it follow the step: at or under the
//! new rate within 2 s of the halving, back at 90 % of the full rate within 10 s of the return.
//! The latency the test saw must stay bounded meanwhile: the steady state's p95 under 100 ms and
//! its p99 under 200 ms, where no shaping at all holds seconds; and neither direction may be
//! starved (goodput at least half of what the link carried). The halving's transient is in both:
//! the download's first cut after a fall is mild (cake-autorate's, see `unbloat_autorate::
//! direction::Way`), so the modem's queue takes 1.5 to 2 s to drain, not one cut; in 42 s of
//! steady state those 2 s are the p95 and p99 (65 to 80 ms and 97 to 139 ms in four runs),
//! where a controller that cut the download to what it carried held p95 under 60 ms and
//! carried a quarter less of the download on the LTE traces.
//!
//! It runs `alone` (no other test's guest beside it): beside the other lane's guests (CI,
//! 2026-12-01) one run's steady p95 was 122 ms and the next followed the halving in 2.02 s.
//!
//! It needs the `unbloat` binary (see `common::unbloat_exe`).

mod common;
use common::unbloat_exe;

use unbloat_lab::lab::{run_lab, LabArgs};
use unbloat_lab::strategies::Strategy;
use unbloat_lab::table::loaded_rtts;
use unbloat_report::files::read_results;
use unbloat_report::stats;
use unbloat_system::sqm::workdir::WorkDir;
use unbloat_units::Time;

/// mahimahi's format: a line per 1500-byte delivery opportunity, at its millisecond.
fn steps(segments: &[(f64, u64)]) -> String {
    let mut out = String::new();
    let mut t = 0;
    for &(mbit, secs) in segments {
        let per_ms = mbit * 1e6 / 8.0 / 1500.0 / 1000.0;
        let mut acc = 0.0;
        for ms in 0..secs * 1000 {
            acc += per_ms;
            while acc >= 1.0 {
                out += &format!("{}\n", t + ms + 1);
                acc -= 1.0;
            }
        }
        t += secs * 1000;
    }
    out
}

const PHASE_S: f64 = 15.0;

/// Runs the test may take: one 45 s run on a busy machine can stall (a stall queues in the
/// emulated modem as if the controller had failed), so a miss is measured again once, both runs
/// printed; the bounds themselves do not move.
const ATTEMPTS: usize = 2;

/// One 45 s lab of `unbloat-autorate` on the step link in `d`: `Err` names the first bound it
/// missed.
fn one_run(d: &std::path::Path) -> Result<(), String> {
    let profile = d.join("step.toml");
    let out = d.join("report");
    let _ = std::fs::remove_dir_all(&out);
    let args = LabArgs {
        profile: profile.display().to_string(),
        strategies: "unbloat-autorate".into(),
        duration: Time::from_secs(45),
        out: out.clone(),
        in_kernel: true,
        ..LabArgs::default()
    };
    let report = run_lab(&args, &unbloat_exe()).expect("the lab runs");
    eprint!("{}", report.render_text());
    let run = report
        .runs
        .iter()
        .find(|r| r.row.strategy == Strategy::UnbloatAutorate)
        .expect("its run");
    let ctl = run.controller.as_ref().expect("the controller's run");
    let start = ctl.trace_start_s.expect("when the trace started");
    let log = std::fs::read_to_string(out.join("unbloat-autorate-controller/autorate.log"))
        .expect("its log");
    let ticks = unbloat_autorate::log::read_ticks(&log).expect("the log reads");
    let when = |from: f64, ok: &dyn Fn(u64) -> bool| {
        ticks
            .iter()
            .find(|t| t.t >= from && ok(t.down.rate_bps))
            .map(|t| t.t - from)
    };
    let (down_at, up_at) = (start + PHASE_S, start + 2.0 * PHASE_S);
    let followed_down = when(down_at, &|r| r <= 10_000_000);
    let followed_up = when(up_at, &|r| r >= 18_000_000);
    eprintln!("trace from {start:.2} s of the controller's clock: at or under 10 Mbit/s {followed_down:?} s after the halving, \
        at 18 Mbit/s {followed_up:?} s after the return; {}", ctl.summary());
    assert!(
        out.join("unbloat-autorate/controller-rates.svg").exists(),
        "the controller's plot"
    );
    if !followed_down.is_some_and(|s| s <= 2.0) {
        return Err(format!(
            "the download's rate did not follow the step down within 2 s: {followed_down:?}"
        ));
    }
    if !followed_up.is_some_and(|s| s <= 10.0) {
        return Err(format!(
            "the download's rate did not come back within 10 s: {followed_up:?}"
        ));
    }
    // The latency the user saw, judged on the steady state (the load's first 3 s left out).
    let results = read_results(&out.join(&run.results_file)).expect("results");
    let rtts =
        loaded_rtts(&results, "UDP BE", unbloat_report::summary::STARTUP_S).expect("UDP BE probes");
    let idle = run
        .row
        .probe("UDP BE")
        .and_then(|p| p.idle_ms)
        .expect("idle median");
    let induced = |p| {
        stats::induced_latency(stats::percentile(&rtts, p).expect("percentile"), idle)
            .expect("finite")
    };
    let (p95, p99) = (induced(95.0), induced(99.0));
    eprintln!(
        "steady induced UDP BE p95 {p95:.1} ms, p99 {p99:.1} ms over {} probes",
        rtts.len()
    );
    if !(p95 < 100.0 && p99 < 200.0) {
        return Err(format!("steady p95 {p95:.1} ms, p99 {p99:.1} ms"));
    }
    for (dir, share) in [("down", run.row.down_share), ("up", run.row.up_share)] {
        let share = share.expect("a goodput share");
        if share < 0.5 {
            return Err(format!(
                "{dir}load starved: {:.0} % of what the link carried",
                share * 100.0
            ));
        }
    }
    Ok(())
}

unbloat_testbed::real_kernel_test! {
    fn autorate_follows_a_step_down_within_2s_and_back_up_within_10s() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred", "u32"] alone {
        let dir = WorkDir::new("autorate-step").expect("a directory");
        let d = &dir.0;
        std::fs::write(d.join("step.down"), steps(&[(20.0, 15), (10.0, 15), (20.0, 15)])).unwrap();
        std::fs::write(d.join("step.up"), steps(&[(5.0, 15), (2.5, 15), (5.0, 15)])).unwrap();
        std::fs::write(d.join("step.toml"), "name = \"step\"\ndescription = \"a step: 20/5 Mbit/s, half, full again, 15 s each\"\n\
            down = \"20mbit\"\nup = \"5mbit\"\ndown_trace = \"step.down\"\nup_trace = \"step.up\"\nbase_rtt = \"40ms\"\n\
            [link]\npreset = \"ethernet\"\n").unwrap();
        let mut missed = vec![];
        for attempt in 1..=ATTEMPTS {
            match one_run(d) {
                Ok(()) => return,
                Err(why) => {
                    eprintln!("attempt {attempt} of {ATTEMPTS} missed: {why}");
                    missed.push(why);
                }
            }
        }
        panic!("every attempt missed a bound: {}", missed.join("; "));
    }
}
