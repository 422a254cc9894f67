//! A short real lab run (issue 4 §8): one profile, `none` vs `unbloat`, 10 s of rrul. The bloat
//! must be there without shaping (induced latency > 100 ms) and gone with it (p95 < 30 ms).
//!
//! It needs the `unbloat` binary (it runs `unbloat serve` and `unbloat test` in the namespaces):
//! `UNBLOAT_EXE` when set, else `target/<profile>/unbloat` beside this test binary, which a
//! workspace build (`cargo build --release`, `make test`) puts there. Missing, the test fails and
//! says how to build it (never a silent skip).

use std::path::PathBuf;

use unbloat_lab::lab::{run_lab, LabArgs};
use unbloat_lab::strategies::Strategy;
use unbloat_units::Time;

fn unbloat_exe() -> PathBuf {
    if let Some(p) = std::env::var_os("UNBLOAT_EXE") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/lab-HASH -> target/<profile>/unbloat
    let exe = std::env::current_exe().expect("this test binary");
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("unbloat"))
        .expect("target dir");
    assert!(
        path.exists(),
        "{} is missing: build it first (`cargo build --release -p unbloat`, or `make test`), or set UNBLOAT_EXE",
        path.display()
    );
    path
}

unbloat_system::real_kernel_test! {
    fn a_short_lab_shows_the_bloat_and_the_cure() needs ["htb", "netem", "pfifo", "cake", "ifb", "mirred", "u32"] {
        // The pid alone repeats from one UML boot to the next; the clock does not.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let out = std::env::temp_dir().join(format!("unbloat-lab-test-{}-{nanos}", std::process::id()));
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
        assert!(report.calibration.ok, "the emulation cannot carry vdsl2 here: {:?}", report.calibration);
        let row = |s: Strategy| report.runs.iter().find(|r| r.row.strategy == s).map(|r| r.row.clone()).expect("row");
        let (none, unbloat) = (row(Strategy::None), row(Strategy::Unbloat));
        let be = |r: &unbloat_lab::table::Row| r.probe("UDP BE").cloned().expect("UDP BE probes");
        let none_p50 = be(&none).induced_p50_ms.expect("none p50");
        assert!(none_p50 > 100.0, "no bloat without shaping? induced p50 {none_p50} ms");
        let cured = be(&unbloat).induced_p95_ms.expect("unbloat p95");
        assert!(cured < 30.0, "unbloat left induced p95 at {cured} ms");
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
