//! `bench tune --runs N`: tune's findings on one profile over repeated runs, as issue 55 judges
//! them: how often the framing family is right, how often an ATM line's overhead is within 4 bytes
//! of the truth (never "straight" on ATM), and the medians of the confidence, the rates against the
//! line and the time. Each run's row is kept as `DIR/PROFILE/run-K.json`, so that `--resume`
//! carries a long benchmark over several sittings.

use std::path::{Path, PathBuf};

use unbloat_report::stats;

use crate::tune_lab::TuneRow;

/// How far an ATM overhead may be from the truth and still count as found (issue 55).
pub const OVERHEAD_SLACK: i64 = 4;

/// Where run `k` (from 1) of `profile` keeps its row.
pub fn row_path(out: &Path, profile: &str, k: u32) -> PathBuf {
    out.join(profile).join(format!("run-{k}.json"))
}

/// A run's row kept by an earlier sitting; `None` when there is none or it does not parse (the
/// run is then made again).
pub fn kept_row(path: &Path) -> Option<TuneRow> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

pub fn keep_row(path: &Path, row: &TuneRow) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let json = serde_json::to_string_pretty(row).map_err(std::io::Error::other)?;
    std::fs::write(path, json + "\n")
}

/// Whether the overhead tune found is the truth's within [`OVERHEAD_SLACK`]; only asked of ATM.
pub fn overhead_right(row: &TuneRow) -> bool {
    row.family_found == "atm"
        && row
            .overhead_found
            .is_some_and(|o| (o - i64::from(row.overhead_truth)).abs() <= OVERHEAD_SLACK)
}

/// One profile's runs in a line, and whether they meet issue 55's rule on an ATM line.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRuns {
    pub profile: String,
    pub atm: bool,
    pub runs: usize,
    pub family_right: usize,
    pub overhead_right: usize,
    /// Runs that named an ATM line "straight": the one answer issue 55 never accepts.
    pub straight_on_atm: usize,
    pub confidence: Option<f64>,
    pub down_of_line: Option<f64>,
    pub up_of_line: Option<f64>,
    pub seconds: Option<f64>,
}

impl ProfileRuns {
    /// `rows` are one profile's runs.
    pub fn new(rows: &[TuneRow]) -> ProfileRuns {
        let atm = rows.first().is_some_and(|r| r.family_truth == "atm");
        let median = |f: &dyn Fn(&TuneRow) -> Option<f64>| {
            stats::median(&rows.iter().filter_map(f).collect::<Vec<_>>())
        };
        let share = |found: Option<unbloat_units::Rate>, line: unbloat_units::Rate| {
            let found = found?;
            (!line.is_zero()).then(|| 100.0 * found.kbit_f64() / line.kbit_f64())
        };
        ProfileRuns {
            profile: rows.first().map(|r| r.profile.clone()).unwrap_or_default(),
            atm,
            runs: rows.len(),
            family_right: rows.iter().filter(|r| r.family_right()).count(),
            overhead_right: rows.iter().filter(|r| overhead_right(r)).count(),
            straight_on_atm: rows
                .iter()
                .filter(|r| r.family_truth == "atm" && r.family_found == "straight")
                .count(),
            confidence: median(&|r| r.confidence),
            down_of_line: median(&|r| share(r.down_found, r.down_line)),
            up_of_line: median(&|r| share(r.up_found, r.up_line)),
            seconds: median(&|r| Some(r.seconds)),
        }
    }

    /// Issue 55's rule for an ATM line: ATM with the overhead within 4 bytes in at least 4 of 5
    /// runs (the same share of any other count), and never "straight". Any other line: the family
    /// right in as many.
    pub fn holds(&self) -> bool {
        let enough = |k: usize| k * 5 >= self.runs * 4;
        if self.atm {
            enough(self.overhead_right) && self.straight_on_atm == 0
        } else {
            enough(self.family_right)
        }
    }

    pub fn line(&self) -> String {
        let f = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
        let overhead = if self.atm {
            format!(
                ", overhead within {OVERHEAD_SLACK} bytes {}/{}, straight {}",
                self.overhead_right, self.runs, self.straight_on_atm
            )
        } else {
            String::new()
        };
        format!(
            "{}: family right {}/{}{overhead}; median confidence {}, down {} % and up {} % of \
             the line, {} s: {}",
            self.profile,
            self.family_right,
            self.runs,
            f(self.confidence, 2),
            f(self.down_of_line, 0),
            f(self.up_of_line, 0),
            f(self.seconds, 0),
            if self.holds() {
                "holds"
            } else {
                "does not hold"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_units::Rate;

    fn row(found: &str, overhead: Option<i64>, down_kbit: u64) -> TuneRow {
        TuneRow {
            profile: "adsl-remote".into(),
            family_truth: "atm".into(),
            family_found: found.into(),
            overhead_truth: 40,
            overhead_found: overhead,
            confidence: Some(0.9),
            assumed: None,
            down_line: Rate::from_kbit(1000),
            up_line: Rate::from_kbit(128),
            down_found: Some(Rate::from_kbit(down_kbit)),
            up_found: None,
            down_searched: None,
            up_searched: None,
            seconds: 270.0,
            both_bound_ms: None,
            missed: vec![],
            down_best: None,
            up_best: None,
        }
    }

    #[test]
    fn four_of_five_with_the_overhead_near_the_truth_hold() {
        let mut rows = vec![row("atm", Some(40), 850); 3];
        rows.push(row("atm", Some(44), 900));
        rows.push(row("atm", Some(48), 800));
        let p = ProfileRuns::new(&rows);
        assert_eq!((p.family_right, p.overhead_right), (5, 4));
        assert!(p.holds(), "{}", p.line());
        assert_eq!(p.down_of_line, Some(85.0));
        assert_eq!(p.up_of_line, None);
        assert!(p.line().contains("overhead within 4 bytes 4/5, straight 0"));
    }

    #[test]
    fn one_straight_on_atm_fails_however_many_are_right() {
        let mut rows = vec![row("atm", Some(40), 850); 4];
        rows.push(row("straight", None, 900));
        let p = ProfileRuns::new(&rows);
        assert_eq!(p.straight_on_atm, 1);
        assert!(!p.holds());
        rows[4] = row("undecided", None, 900);
        assert!(
            ProfileRuns::new(&rows).holds(),
            "an undecided run is no straight"
        );
    }

    #[test]
    fn rows_survive_the_file_and_a_broken_file_is_run_again() {
        let dir = std::env::temp_dir().join(format!("unbloat-bench-tune-{}", std::process::id()));
        let path = row_path(&dir, "adsl-remote", 2);
        let r = row("atm", Some(40), 850);
        keep_row(&path, &r).unwrap();
        assert_eq!(kept_row(&path), Some(r));
        std::fs::write(&path, "{ half").unwrap();
        assert_eq!(kept_row(&path), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
