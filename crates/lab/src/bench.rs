//! `unbloat bench lab`: every shipped profile x every strategy, one lab run per profile, and the
//! table issue 4 §7 asks for, with its checks:
//! - `none` gets grade C or worse on every profile;
//! - `unbloat` keeps UDP BE induced p99 within 10 ms + two full-size packet times of the slower
//!   direction, with goodput at least 90 % of the theoretical both ways;
//! - `unbloat` is no worse than `sqm-piece-of-cake` on latency (UDP BE induced p99) or goodput.
//!
//! A whole matrix takes about 5 profiles x (calibration + 5 strategies x (load + 15 s)): with the
//! default 30 s of load, roughly 20 minutes.

use std::path::{Path, PathBuf};

use unbloat_report::stats::Grade;
use unbloat_units::Time;

use crate::lab::{run_lab, LabArgs, LabError, LabReport};
use crate::profile::{shipped_names, LinkProfile};
use crate::strategies::Strategy;
use crate::table::Row;

/// `unbloat bench lab` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchLabArgs {
    /// Profiles to run, comma-separated (default: every shipped profile).
    #[arg(long, value_name = "A,B,..")]
    pub profiles: Option<String>,
    /// The `unbloat test` profile.
    #[arg(long, value_name = "T", default_value = "rrul")]
    pub test: String,
    /// Load per test.
    #[arg(long, value_name = "D", default_value = "30s")]
    pub duration: Time,
    /// Report directory: one subdirectory per profile.
    #[arg(long, value_name = "DIR", default_value = "unbloat-bench-lab")]
    pub out: PathBuf,
}

/// The bound on unbloat's UDP BE induced p99 for a profile, ms: 10 ms plus two times one
/// full-size (1500-byte) packet takes on the wire of the slower direction (issue 4 §7).
pub fn latency_bound_ms(profile: &LinkProfile) -> f64 {
    let wire = unbloat_shaper::goodput::LinkFraming::from(&profile.link_layer()).wire_bytes(1500);
    10.0 + 2.0 * profile.slower_rate().seconds_for(wire) * 1000.0
}

/// One failed check, in words.
pub fn checks(report: &LabReport) -> Vec<String> {
    let mut failed = Vec::new();
    let name = &report.profile.name;
    let row = |s: Strategy| {
        report
            .runs
            .iter()
            .find(|r| r.row.strategy == s)
            .map(|r| &r.row)
    };
    let be_p99 = |r: &Row| r.probe("UDP BE").and_then(|p| p.induced_p99_ms);
    if let Some(none) = row(Strategy::None) {
        if none.grade.is_some_and(|g| g < Grade::C) {
            failed.push(format!(
                "{name}: none graded {} (expected C or worse)",
                none.grade.map_or("-".into(), |g| g.to_string())
            ));
        }
    }
    if let Some(u) = row(Strategy::Unbloat) {
        let bound = latency_bound_ms(&report.profile);
        match be_p99(u) {
            Some(p) if p <= bound => {}
            Some(p) => failed.push(format!(
                "{name}: unbloat UDP BE induced p99 {p:.1} ms above {bound:.1} ms"
            )),
            None => failed.push(format!("{name}: unbloat has no UDP BE induced p99")),
        }
        for (dir, share) in [("down", u.down_share), ("up", u.up_share)] {
            match share {
                Some(s) if s >= 0.90 => {}
                Some(s) => failed.push(format!(
                    "{name}: unbloat {dir} goodput {:.0} % below 90 % of theoretical",
                    s * 100.0
                )),
                None => failed.push(format!("{name}: unbloat has no {dir} goodput")),
            }
        }
        if let Some(c) = row(Strategy::SqmPieceOfCake) {
            if let (Some(a), Some(b)) = (be_p99(u), be_p99(c)) {
                if a > b {
                    failed.push(format!(
                        "{name}: unbloat p99 {a:.1} ms worse than sqm-piece-of-cake {b:.1} ms"
                    ));
                }
            }
            for (dir, a, b) in [
                ("down", u.down_share, c.down_share),
                ("up", u.up_share, c.up_share),
            ] {
                if let (Some(a), Some(b)) = (a, b) {
                    if a + 0.01 < b {
                        failed.push(format!(
                            "{name}: unbloat {dir} goodput {:.0} % below sqm-piece-of-cake {:.0} %",
                            a * 100.0,
                            b * 100.0
                        ));
                    }
                }
            }
        }
    }
    if !report.calibration.ok {
        failed.push(format!(
            "{name}: CPU-bound (calibration failed): numbers are not the link's"
        ));
    }
    failed
}

/// The whole matrix as text: each profile's lab table, then the failed checks (or "all hold").
pub fn render_benchmark(reports: &[LabReport]) -> String {
    let mut out = String::new();
    for r in reports {
        out.push_str(&r.render_text());
        out.push_str(&format!(
            "unbloat's UDP BE p99 bound on {}: {:.1} ms\n\n",
            r.profile.name,
            latency_bound_ms(&r.profile)
        ));
    }
    let failed: Vec<String> = reports.iter().flat_map(checks).collect();
    if failed.is_empty() {
        out.push_str("every check of issue 4 §7 holds\n");
    } else {
        out.push_str("checks that failed:\n");
        for f in failed {
            out.push_str(&format!("  {f}\n"));
        }
    }
    out
}

/// Runs every profile (or those asked) with every strategy. Progress on stderr.
pub fn run_benchmark(args: &BenchLabArgs, unbloat_exe: &Path) -> Result<Vec<LabReport>, LabError> {
    let names: Vec<String> = match &args.profiles {
        Some(list) => list.split(',').map(|s| s.trim().to_string()).collect(),
        None => shipped_names().iter().map(|s| s.to_string()).collect(),
    };
    let all: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
    let mut reports = Vec::new();
    for name in names {
        let lab = LabArgs {
            profile: name.clone(),
            strategies: all.join(","),
            test: args.test.clone(),
            duration: args.duration,
            out: args.out.join(&name),
            ..LabArgs::default()
        };
        reports.push(run_lab(&lab, unbloat_exe)?);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_bounds_are_those_of_issue_4() {
        // dsl-2002: 1500 + 10 = 1510 bytes -> 32 cells = 1696 bytes at 220 kbit/s = 61.7 ms.
        let dsl = latency_bound_ms(&LinkProfile::shipped("dsl-2002").expect("dsl-2002"));
        assert!(
            (dsl - (10.0 + 2.0 * 1696.0 * 8.0 / 220.0)).abs() < 1e-6,
            "{dsl}"
        );
        assert!((130.0..136.0).contains(&dsl), "{dsl}");
        // vdsl2: ~1.2 ms per packet at 20 Mbit/s: about 11 ms.
        let v = latency_bound_ms(&LinkProfile::shipped("vdsl2").expect("vdsl2"));
        assert!((11.0..11.5).contains(&v), "{v}");
    }
}
