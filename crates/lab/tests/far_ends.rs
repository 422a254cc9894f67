//! The lab with the stock far ends (issue 12): the same before/after as `lab.rs`, with the server
//! namespace running Debian's nginx over TLS (the responsiveness test's endpoints), or stock irtt
//! and iperf3 servers, and `unbloat test` speaking their protocols. The bloat must be seen
//! without shaping and be gone with it, judged on the steady state (the load after its first
//! 3 s), whatever the far end.
//!
//! Both run on vdsl2's framing at 20/5 Mbit/s (`common::TEST_PROFILE`). The web server's run was
//! CPU-bound inside one-CPU User-Mode Linux at vdsl2's 80/20 Mbit/s (TLS both ways and a new TLS
//! handshake per probe: CI's cured runs were 100 % busy, and the TCP connect p95 then reached 69
//! and 86 ms while its p50 was 20 to 33 ms), and on an AMD EPYC host with slow system calls
//! both far ends were at 40/10 too (irtt and iperf3: 96 % busy; nginx: 100 %, TCP connect p95
//! 700 ms). The CPU stalls queue in the emulated modem as if the shaper had failed. Its bound is
//! still relative (a quarter of the unshaped median) with a ceiling, since each probe is a new TLS
//! handshake.

mod common;
use common::{unbloat_exe, TEST_PROFILE};

use std::path::Path;

use unbloat_lab::farend::FarEndKind;
use unbloat_lab::lab::{run_lab, LabArgs, LabReport, StrategyRun};
use unbloat_lab::strategies::Strategy;
use unbloat_system::sqm::workdir::WorkDir;
use unbloat_units::Time;

/// A 10 s rrul lab, none vs unbloat, on `profile` with `far_end`, and its report directory
/// (removed when the guard goes, so a failed assertion leaves nothing in /tmp).
fn lab(profile: &str, far_end: FarEndKind) -> (LabReport, WorkDir) {
    let dir = WorkDir::new(&format!("lab-far-{}", far_end.name())).expect("a report directory");
    let out = dir.0.clone();
    let args = LabArgs {
        profile: profile.into(),
        strategies: "none,unbloat".into(),
        duration: Time::from_secs(10),
        far_end,
        out: out.clone(),
        in_kernel: true,
        ..LabArgs::default()
    };
    let report = run_lab(&args, &unbloat_exe()).expect("the lab runs");
    eprint!("{}", report.render_text());
    (report, dir)
}

fn run(report: &LabReport, s: Strategy) -> &StrategyRun {
    report
        .runs
        .iter()
        .find(|r| r.row.strategy == s)
        .expect("run")
}

/// (unshaped induced p50, shaped steady-state p95, shaped start-up peak) of probe class `name`.
fn before_after(report: &LabReport, name: &str) -> (f64, f64, f64) {
    let probe = |s| {
        run(report, s)
            .row
            .probe(name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} probes"))
    };
    let none = probe(Strategy::None).induced_p50_ms.expect("none p50");
    let cured = probe(Strategy::Unbloat);
    let steady = cured.steady_p95_ms.expect("unbloat steady p95");
    let peak = cured.startup_peak_ms.expect("unbloat start-up peak");
    eprintln!("{name}: none induced p50 {none:.1} ms; unbloat steady p95 {steady:.1} ms, start-up peak {peak:.1} ms");
    (none, steady, peak)
}

fn results_exist(report: &LabReport, out: &Path) {
    for run in &report.runs {
        assert!(
            !run.row.partial,
            "{} ended early: {:?}",
            run.row.strategy, report.notes
        );
        assert!(out.join(&run.results_file).exists(), "{}", run.results_file);
    }
}

/// The lab with `far_end` whose cure is judged, with `probe`'s (unshaped induced p50, shaped
/// steady p95). A stall of the host's CPU (CI once saw nginx's cured steady p95 at 207 ms, 21 ms
/// in the next run) queues in the emulated modem as if the shaper had failed, so a run that
/// misses `cured` is measured again once, both runs printed; the caller asserts the bound on the
/// run returned, unchanged.
fn judged_lab(
    far_end: FarEndKind,
    probe: &str,
    cured: impl Fn(f64, f64) -> bool,
) -> (LabReport, WorkDir, f64, f64) {
    let (mut report, mut out) = lab(TEST_PROFILE, far_end);
    results_exist(&report, &out.0);
    let (mut none, mut steady, _peak) = before_after(&report, probe);
    if !cured(none, steady) {
        eprintln!(
            "missed the bound ({steady:.1} ms against {none:.1} ms unshaped): measuring again"
        );
        // The first run's report goes with its guard.
        (report, out) = lab(TEST_PROFILE, far_end);
        results_exist(&report, &out.0);
        (none, steady, _) = before_after(&report, probe);
    }
    (report, out, none, steady)
}

unbloat_testbed::real_kernel_test! {
    fn stock_irtt_and_iperf3_servers_show_the_bloat_and_the_cure() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred", "u32"] {
        let (report, _out, none, steady) =
            judged_lab(FarEndKind::IrttIperf3, "UDP BE", |_, steady| steady < 30.0);
        assert!(none > 100.0, "no bloat without shaping, with irtt's probes? {none} ms");
        assert!(steady < 30.0, "unbloat left {steady} ms at p95 in the steady state (irtt probes)");
        let streams = |s| run(&report, s).row.down_bps.expect("iperf3 download goodput");
        // 60 % of the test profile's 20 Mbit/s download: the shaper's rate less the probes,
        // the upload's ACKs and the framing's overhead is about 90 %.
        let down = streams(Strategy::Unbloat);
        assert!(down > 12e6, "iperf3's load moved too little: {down} bit/s");
    }

    fn nginx_over_tls_shows_the_bloat_and_the_cure() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred", "u32"] {
        let cured = |none: f64, steady: f64| steady < 60.0 && steady < none / 4.0;
        let (report, _out, none, steady) = judged_lab(FarEndKind::Http, "TCP connect", cured);
        assert!(none > 100.0, "no bloat without shaping, with new TCP connections? {none} ms");
        assert!(
            cured(none, steady),
            "unbloat left {steady} ms at p95 in the steady state (TCP connect; unshaped {none} ms)"
        );
        for kind in ["TLS handshake", "HTTP GET new", "HTTP GET loaded"] {
            assert!(run(&report, Strategy::Unbloat).row.probe(kind).is_some(), "no {kind} probes");
        }
    }
}
