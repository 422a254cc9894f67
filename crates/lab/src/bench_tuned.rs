//! Issue 13's goal for `bench lab`: `unbloat-tuned` (the rates and framing `unbloat tune` found
//! in the lab) against the real sqm-scripts `piece_of_cake` at 95 % of the true rates: more
//! goodput at an equal or lower steady-state p99, on at least 3 of the 4 profiles that are not
//! CPU-bound, medians over the runs.
//!
//! "More goodput" is the two directions' median shares of the theoretical goodput, summed: each
//! direction weighs by its own link, so a slow upload counts as much as the download. "Equal or
//! lower p99" is the steady state's UDP BE p99 (the load after its first 3 s): a higher median
//! counts as worse only when the rank test says so ([`crate::spread::SIGNIFICANT`]) or, with
//! one run each, by the medians alone.

use serde::Serialize;

use crate::spread::{self, Spread, StrategySpread};
use crate::strategies::{SqmRecipe, Strategy};

/// How many profiles must hold, and of how many (the profiles that are not CPU-bound).
pub const GOAL: (usize, usize) = (3, 4);

/// The comparison on one profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunedVsSqm {
    pub profile: String,
    /// Whether it holds; `None` when the profile's runs were CPU-bound (not counted).
    pub holds: Option<bool>,
    /// The numbers, in words.
    pub line: String,
}

/// The comparison on one profile's spreads; `None` without both strategies.
pub fn compare(profile: &str, rows: &[StrategySpread], cpu_bound: bool) -> Option<TunedVsSqm> {
    let row = |s: Strategy| rows.iter().find(|r| r.strategy == s);
    let tuned = row(Strategy::UnbloatTuned)?;
    let sqm = row(Strategy::SqmScripts(SqmRecipe::PieceOfCake))?;
    let share = |r: &StrategySpread| -> Option<f64> {
        Some(r.down_share.as_ref()?.median + r.up_share.as_ref()?.median)
    };
    let (a, b) = (share(tuned), share(sqm));
    let more = matches!((a, b), (Some(a), Some(b)) if a > b);
    let (worse, p99) = worse_p99(&tuned.be_steady_p99_ms, &sqm.be_steady_p99_ms);
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1} %", v * 50.0));
    let holds = (!cpu_bound).then_some(more && !worse);
    let verdict = match holds {
        None => "CPU-bound: not counted",
        Some(true) => "holds",
        Some(false) => "does not hold",
    };
    Some(TunedVsSqm {
        profile: profile.into(),
        holds,
        line: format!(
            "{profile}: unbloat-tuned goodput {} of theoretical (mean of the two ways) against \
             sqm-scripts:piece_of_cake {}; steady p99 {p99}: {verdict}",
            pct(a),
            pct(b)
        ),
    })
}

/// Whether `a`'s steady p99 is worse than `b`'s, and the numbers in words.
fn worse_p99(a: &Option<Spread>, b: &Option<Spread>) -> (bool, String) {
    let (Some(a), Some(b)) = (a, b) else {
        return (true, "missing".into());
    };
    let (worse, p) = spread::worse(a, b);
    let evidence = p.map_or(String::new(), |p| format!(", rank test p = {p:.3}"));
    (
        worse,
        format!(
            "{:.1} ms against {:.1} ms ({} + {} runs{evidence})",
            a.median, b.median, a.n, b.n
        ),
    )
}

/// The lines, and the goal's verdict over the profiles counted.
pub fn render(all: &[TunedVsSqm]) -> String {
    if all.is_empty() {
        return String::new();
    }
    let mut out = String::from("unbloat-tuned against the real sqm-scripts piece_of_cake:\n");
    for t in all {
        out.push_str(&format!("  {}\n", t.line));
    }
    let counted: Vec<bool> = all.iter().filter_map(|t| t.holds).collect();
    let held = counted.iter().filter(|h| **h).count();
    let (need, of) = GOAL;
    out.push_str(&format!(
        "  holds on {held} of {} profiles not CPU-bound (goal: {need} of {of})\n",
        counted.len()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(values: &[f64]) -> Option<Spread> {
        Spread::of(values.iter().copied())
    }

    fn row(strategy: Strategy, p99: &[f64], down: f64, up: f64) -> StrategySpread {
        StrategySpread {
            strategy,
            be_p50_ms: None,
            be_p99_ms: None,
            be_steady_p99_ms: spread(p99),
            down_share: spread(&[down]),
            up_share: spread(&[up]),
            grades: vec![],
        }
    }

    const SQM: Strategy = Strategy::SqmScripts(SqmRecipe::PieceOfCake);

    #[test]
    fn more_goodput_at_a_p99_the_rank_test_cannot_call_worse_holds() {
        let rows = [
            row(
                Strategy::UnbloatTuned,
                &[9.0, 10.0, 12.0, 8.0, 11.0],
                0.96,
                0.93,
            ),
            row(SQM, &[8.0, 9.5, 13.0, 7.0, 10.0], 0.93, 0.94),
        ];
        let t = compare("adsl", &rows, false).expect("both there");
        assert_eq!(t.holds, Some(true), "{}", t.line);
        // The same with less goodput does not.
        let rows = [
            row(
                Strategy::UnbloatTuned,
                &[9.0, 10.0, 12.0, 8.0, 11.0],
                0.92,
                0.93,
            ),
            rows[1].clone(),
        ];
        assert_eq!(compare("adsl", &rows, false).unwrap().holds, Some(false));
    }

    #[test]
    fn a_p99_worse_in_every_run_fails_and_cpu_bound_profiles_are_not_counted() {
        let rows = [
            row(
                Strategy::UnbloatTuned,
                &[20.0, 21.0, 22.0, 23.0, 24.0],
                0.99,
                0.99,
            ),
            row(SQM, &[8.0, 9.0, 10.0, 11.0, 12.0], 0.93, 0.94),
        ];
        let t = compare("vdsl2", &rows, false).unwrap();
        assert_eq!(t.holds, Some(false));
        assert!(t.line.contains("p = 0.004"), "{}", t.line);
        let cpu = compare("fiber", &rows, true).unwrap();
        assert_eq!(cpu.holds, None);
        assert!(compare("x", &rows[..1], false).is_none());
        let text = render(&[t, cpu]);
        assert!(
            text.contains("holds on 0 of 1 profiles not CPU-bound (goal: 3 of 4)"),
            "{text}"
        );
    }
}
