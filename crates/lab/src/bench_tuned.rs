//! Issue 13's goal for `bench lab`, as issue 38 restated it: `unbloat-tuned` (the rates and
//! framing `unbloat tune` found in the lab) against the real sqm-scripts `piece_of_cake` at 95 %
//! of the true rates, on at least 3 of the 4 profiles that are not CPU-bound, medians over the
//! runs: a **lower steady-state p99 at goodput within [`WITHIN_POINTS`] of sqm's**, or **more
//! goodput at an equal or lower p99**. Issue 38's question was answered since: where no rate
//! keeps both the bound and sqm's goodput (a deep FIFO ahead of the ingress shaper, which tune
//! sees as no download rate within its bound), **a lower p99 at lower goodput counts** too, as
//! tune chooses it ([`NoRateKept`]).
//!
//! Goodput is the mean of the two directions' median shares of the theoretical goodput: each
//! direction weighs by its own link, so a slow upload counts as much as the download. The p99 is
//! the steady state's UDP BE p99 (the load after its first 3 s). "Lower" and "worse" are the rank
//! test's ([`crate::spread::SIGNIFICANT`]; with one run each, the medians alone): a higher or
//! lower median alone is often one unlucky start of rrul. Three runs against three cannot reach
//! it (their smallest p is 1/20): the issue asks for five.

use serde::Serialize;

use crate::spread::{self, Spread, StrategySpread};
use crate::strategies::{SqmRecipe, Strategy};

/// How many profiles must hold, and of how many (the profiles that are not CPU-bound).
pub const GOAL: (usize, usize) = (3, 4);
/// "Goodput within 2 % of sqm's": points of the theoretical goodput, the unit the lab reports
/// its shares in (adsl's 83.2 % against 84.6 %, issue 38's example, is within).
pub const WITHIN_POINTS: f64 = 2.0;

/// In how many of a profile's runs tune's download search kept no rate within its bound (it
/// said so: `missed` names the download), of how many: where most did, the line has a queue
/// ahead of the ingress shaper that no rate drains, and sqm's goodput costs that queue's delay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoRateKept {
    pub runs: usize,
    pub of: usize,
}

impl NoRateKept {
    fn in_most(self) -> bool {
        self.runs * 2 > self.of
    }
}

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
pub fn compare(
    profile: &str,
    rows: &[StrategySpread],
    cpu_bound: bool,
    no_rate: NoRateKept,
) -> Option<TunedVsSqm> {
    let row = |s: Strategy| rows.iter().find(|r| r.strategy == s);
    let tuned = row(Strategy::UnbloatTuned)?;
    let sqm = row(Strategy::SqmScripts(SqmRecipe::PieceOfCake))?;
    // In percent of the theoretical goodput, the mean of the two ways.
    let share = |r: &StrategySpread| -> Option<f64> {
        Some((r.down_share.as_ref()?.median + r.up_share.as_ref()?.median) * 50.0)
    };
    let (a, b) = (share(tuned), share(sqm));
    let more = matches!((a, b), (Some(a), Some(b)) if a > b);
    let within = matches!((a, b), (Some(a), Some(b)) if a >= b - WITHIN_POINTS);
    let (worse, p99) = worse_p99(&tuned.be_steady_p99_ms, &sqm.be_steady_p99_ms);
    let lower = match (&sqm.be_steady_p99_ms, &tuned.be_steady_p99_ms) {
        (Some(s), Some(t)) => spread::worse(s, t).0,
        _ => false,
    };
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} %"));
    let by_goal = (lower && within) || (more && !worse);
    let by_queue = lower && no_rate.in_most();
    let holds = (!cpu_bound).then_some(by_goal || by_queue);
    let verdict = match holds {
        None => "CPU-bound: not counted".to_string(),
        Some(true) if by_goal => "holds".to_string(),
        Some(true) => format!(
            "holds: a lower p99 at less goodput, which counts where no rate kept tune's download \
             bound ({} of {} runs: a queue ahead of the ingress shaper; issue 38)",
            no_rate.runs, no_rate.of
        ),
        Some(false) => "does not hold".to_string(),
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
    let (_, p_lower) = spread::worse(b, a);
    let evidence = match (p, p_lower) {
        (Some(p), Some(q)) => format!(", rank test p = {p:.3} that it is higher, {q:.3} lower"),
        _ => String::new(),
    };
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
        let t = compare("adsl", &rows, false, NoRateKept::default()).expect("both there");
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
        assert_eq!(
            compare("adsl", &rows, false, NoRateKept::default())
                .unwrap()
                .holds,
            Some(false)
        );
    }

    #[test]
    fn a_lower_p99_holds_at_goodput_within_two_points_and_not_below() {
        // adsl-slow's kind: tune gives up some download for a p99 sqm's 95 % cannot keep.
        let sqm = row(SQM, &[110.0, 114.0, 120.0, 105.0, 130.0], 0.94, 0.84);
        let near = row(
            Strategy::UnbloatTuned,
            &[48.0, 50.0, 45.0, 52.0, 47.0],
            0.83,
            0.92,
        );
        let t = compare(
            "adsl-slow",
            &[near, sqm.clone()],
            false,
            NoRateKept::default(),
        )
        .unwrap();
        assert_eq!(t.holds, Some(true), "{}", t.line);
        assert!(t.line.contains("0.004 lower"), "{}", t.line);
        // Three points short of sqm's goodput: a lower p99 does not make up for it.
        let far = row(
            Strategy::UnbloatTuned,
            &[48.0, 50.0, 45.0, 52.0, 47.0],
            0.80,
            0.92,
        );
        assert_eq!(
            compare(
                "adsl-slow",
                &[far, sqm.clone()],
                false,
                NoRateKept::default()
            )
            .unwrap()
            .holds,
            Some(false)
        );
        // Three runs each cannot show "lower" (the rank test's smallest p is 1/20).
        let three = |r: StrategySpread, v: &[f64]| StrategySpread {
            be_steady_p99_ms: spread(v),
            ..r
        };
        let near3 = three(
            row(Strategy::UnbloatTuned, &[], 0.83, 0.92),
            &[48.0, 50.0, 45.0],
        );
        let sqm3 = three(sqm, &[110.0, 114.0, 120.0]);
        assert_eq!(
            compare("adsl-slow", &[near3, sqm3], false, NoRateKept::default())
                .unwrap()
                .holds,
            Some(false)
        );
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
        let t = compare("vdsl2", &rows, false, NoRateKept::default()).unwrap();
        assert_eq!(t.holds, Some(false));
        assert!(t.line.contains("p = 0.004 that it is higher"), "{}", t.line);
        let cpu = compare("fiber", &rows, true, NoRateKept::default()).unwrap();
        assert_eq!(cpu.holds, None);
        assert!(compare("x", &rows[..1], false, NoRateKept::default()).is_none());
        let text = render(&[t, cpu]);
        assert!(
            text.contains("holds on 0 of 1 profiles not CPU-bound (goal: 3 of 4)"),
            "{text}"
        );
    }

    /// Issue 38's answer: on a line where tune's download search kept no rate within its bound
    /// in most runs (adsl-rural's deep modem queue), a lower p99 counts at less goodput; where
    /// it did, or in too few runs, it still does not.
    #[test]
    fn a_lower_p99_at_less_goodput_holds_where_no_rate_kept_the_download_bound() {
        let sqm = row(SQM, &[700.0, 714.0, 925.0, 624.0, 2207.0], 0.93, 0.68);
        let tuned = row(
            Strategy::UnbloatTuned,
            &[326.0, 480.0, 455.0, 641.0, 300.0],
            0.77,
            0.68,
        );
        let rows = [tuned, sqm];
        let queue = NoRateKept { runs: 5, of: 5 };
        let t = compare("adsl-rural", &rows, false, queue).unwrap();
        assert_eq!(t.holds, Some(true), "{}", t.line);
        assert!(t.line.contains("5 of 5 runs"), "{}", t.line);
        for few in [NoRateKept { runs: 2, of: 5 }, NoRateKept::default()] {
            assert_eq!(
                compare("adsl-rural", &rows, false, few).unwrap().holds,
                Some(false)
            );
        }
        // A p99 the rank test cannot call lower does not hold, whatever the queue.
        let same = [
            row(
                Strategy::UnbloatTuned,
                &[700.0, 714.0, 925.0, 624.0, 2207.0],
                0.77,
                0.68,
            ),
            rows[1].clone(),
        ];
        assert_eq!(
            compare("adsl-rural", &same, false, queue).unwrap().holds,
            Some(false)
        );
    }
}
