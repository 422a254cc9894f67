//! The same lab run repeated: per strategy, the median and the range over the runs of each
//! number issue 4 §7 checks. Pure: nothing here runs.
//!
//! Why: on a slow link one run's UDP BE p99 is its worst one or two samples (150 probes in 30 s),
//! and whether a probe falls into the first few hundred milliseconds of rrul, while the downloads'
//! slow start fills the modem's FIFO, decides it. Identical runs on adsl ranged from 110 to 330 ms.
//! One run cannot rank two strategies there. Several can, with a rank test that says whether one
//! strategy's numbers are larger than another's by more than chance ([`p_larger`]).

use serde::{Deserialize, Serialize};
use unbloat_report::stats::{Grade, Sorted};

use crate::lab::LabReport;
use crate::strategies::Strategy;
use crate::table::Row;

/// The median, smallest and largest of one number over the runs that had it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// How many runs had the number.
    pub n: usize,
    /// Every run's value, sorted.
    pub values: Vec<f64>,
}

impl Spread {
    /// The spread of the finite values, or `None` when there are none. The median of an even
    /// count is the mean of the middle two.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let values: Vec<f64> = values.into_iter().collect();
        let sorted = Sorted::new(&values);
        let median = sorted.median()?;
        let values = sorted.values().to_vec();
        Some(Spread {
            median,
            min: values[0],
            max: values[values.len() - 1],
            n: values.len(),
            values,
        })
    }
}

/// Below this p-value of the rank test, one strategy's p99 over several runs counts as worse than
/// another's (unbloat's than piece_of_cake's, unbloat-tuned's than the real sqm-scripts'): a
/// higher median alone is often one unlucky start of rrul (see this module's head).
pub const SIGNIFICANT: f64 = 0.05;

/// Whether `a`'s values are worse (larger) than `b`'s over the runs: a higher median counts only
/// when the rank test says so (p below [`SIGNIFICANT`]), or by the medians alone with one run
/// each. The p-value comes along when there is one to report (not with one run each).
pub fn worse(a: &Spread, b: &Spread) -> (bool, Option<f64>) {
    let single = a.n == 1 && b.n == 1;
    let p = p_larger(&a.values, &b.values);
    let worse = a.median > b.median && (single || p.is_some_and(|p| p < SIGNIFICANT));
    (worse, p.filter(|_| !single))
}

/// The one-sided p-value of the Mann-Whitney U test that `a`'s values tend to be larger than
/// `b`'s: the share of all ways to split the pooled values into groups of `a`'s and `b`'s sizes
/// whose U is at least the observed one (ties count a half). Exact, by enumeration, up to 20
/// values in all (a benchmark's runs); above that the normal approximation. `None` when a group
/// is empty. Five runs against five can reach p = 1/252, so a real difference shows.
pub fn p_larger(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let u = |x: &[f64], y: &[f64]| -> f64 {
        x.iter()
            .flat_map(|p| y.iter().map(move |q| (p, q)))
            .map(|(p, q)| match p.total_cmp(q) {
                std::cmp::Ordering::Greater => 1.0,
                std::cmp::Ordering::Equal => 0.5,
                std::cmp::Ordering::Less => 0.0,
            })
            .sum()
    };
    let observed = u(a, b);
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let (n, total) = (a.len(), pooled.len());
    if total > 20 {
        return Some(p_normal(observed, n, b.len()));
    }
    let (mut at_least, mut splits) = (0u32, 0u32);
    for mask in 0u32..(1 << total) {
        if mask.count_ones() as usize != n {
            continue;
        }
        let (mut x, mut y) = (Vec::with_capacity(n), Vec::with_capacity(total - n));
        for (i, v) in pooled.iter().enumerate() {
            if mask & (1 << i) != 0 {
                x.push(*v);
            } else {
                y.push(*v);
            }
        }
        splits += 1;
        if u(&x, &y) >= observed - 1e-9 {
            at_least += 1;
        }
    }
    Some(f64::from(at_least) / f64::from(splits))
}

/// P(U >= observed) for groups of `n` and `m` by the normal approximation, with continuity
/// correction (ties are not corrected for; runs' latencies rarely tie).
fn p_normal(observed: f64, n: usize, m: usize) -> f64 {
    let (n, m) = (n as f64, m as f64);
    let sd = (n * m * (n + m + 1.0) / 12.0).sqrt();
    let z = (observed - n * m / 2.0 - 0.5) / sd;
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' erfcc, relative error below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// One strategy over every run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategySpread {
    pub strategy: Strategy,
    /// UDP BE induced latency, ms.
    pub be_p50_ms: Option<Spread>,
    pub be_p99_ms: Option<Spread>,
    /// UDP BE induced p99 of the steady state (the load after its first 3 s), ms.
    #[serde(default)]
    pub be_steady_p99_ms: Option<Spread>,
    /// Goodput as a share of the theoretical (0..1).
    pub down_share: Option<Spread>,
    pub up_share: Option<Spread>,
    /// Each run's grade, in run order.
    pub grades: Vec<Option<Grade>>,
}

impl StrategySpread {
    /// The best grade any run got (A+ is best), so that "C or worse" means in every run.
    pub fn best_grade(&self) -> Option<Grade> {
        self.grades.iter().flatten().min().copied()
    }
}

/// The spread of every strategy of the first run, in its order, over `runs` (the same profile).
pub fn spreads(runs: &[LabReport]) -> Vec<StrategySpread> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .runs
        .iter()
        .map(|r| r.row.strategy.clone())
        .map(|strategy| {
            let rows: Vec<&Row> = runs
                .iter()
                .filter_map(|rep| rep.runs.iter().find(|r| r.row.strategy == strategy))
                .map(|r| &r.row)
                .collect();
            let be = |pick: fn(&crate::table::ProbeRow) -> Option<f64>| {
                Spread::of(rows.iter().filter_map(|r| r.probe("UDP BE").and_then(pick)))
            };
            StrategySpread {
                strategy,
                be_p50_ms: be(|p| p.induced_p50_ms),
                be_p99_ms: be(|p| p.induced_p99_ms),
                be_steady_p99_ms: be(|p| p.steady_p99_ms),
                down_share: Spread::of(rows.iter().filter_map(|r| r.down_share)),
                up_share: Spread::of(rows.iter().filter_map(|r| r.up_share)),
                grades: rows.iter().map(|r| r.grade).collect(),
            }
        })
        .collect()
}

/// The spread table: `median (min-max)` per number, and every run's grade.
pub fn render_text(rows: &[StrategySpread]) -> String {
    let ms = |s: &Option<Spread>| match s {
        Some(s) => format!("{} ({}-{})", num(s.median), num(s.min), num(s.max)),
        None => "-".into(),
    };
    let pct = |s: &Option<Spread>| match s {
        Some(s) => format!(
            "{:.0}% ({:.0}-{:.0})",
            s.median * 100.0,
            s.min * 100.0,
            s.max * 100.0
        ),
        None => "-".into(),
    };
    // As wide as the longest name (`sqm-scripts:piece_of_cake`, a script's path).
    let w = rows
        .iter()
        .map(|r| r.strategy.name().chars().count())
        .fold(18, usize::max);
    let mut out = format!(
        "{:<w$} {:<20} {:<20} {:<16} {:<16} {}\n",
        "strategy", "UDP BE p50 ms", "UDP BE p99 ms", "down share", "up share", "grades"
    );
    for r in rows {
        let grades: Vec<String> = r
            .grades
            .iter()
            .map(|g| g.map_or("-".into(), |g| g.to_string()))
            .collect();
        out.push_str(&format!(
            "{:<w$} {:<20} {:<20} {:<16} {:<16} {}\n",
            r.strategy.name(),
            ms(&r.be_p50_ms),
            ms(&r.be_p99_ms),
            pct(&r.down_share),
            pct(&r.up_share),
            grades.join(" ")
        ));
    }
    out
}

/// Three significant figures at most, as the lab table prints latency.
fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_and_of_an_even_count_the_mean_of_two() {
        let s = Spread::of([30.0, 10.0, 20.0]).expect("values");
        assert_eq!((s.median, s.min, s.max, s.n), (20.0, 10.0, 30.0, 3));
        let s = Spread::of([4.0, 1.0, 3.0, 2.0]).expect("values");
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 4.0, 4));
    }

    #[test]
    fn values_that_are_not_numbers_are_left_out_and_none_gives_no_spread() {
        let s = Spread::of([f64::NAN, 5.0, f64::INFINITY]).expect("one value");
        assert_eq!((s.median, s.n), (5.0, 1));
        assert_eq!(Spread::of([f64::NAN]), None);
        assert_eq!(Spread::of([]), None);
    }

    #[test]
    fn the_rank_test_finds_a_clear_difference_and_not_an_overlap() {
        // Every value of a above every value of b: only 1 of C(10,5) = 252 splits is as extreme.
        let a = [20.0, 21.0, 22.0, 23.0, 24.0];
        let b = [10.0, 11.0, 12.0, 13.0, 14.0];
        assert!((p_larger(&a, &b).expect("p") - 1.0 / 252.0).abs() < 1e-12);
        assert!(p_larger(&b, &a).expect("p") > 0.99);
        // Five docsis runs (UDP BE p99, ms): unbloat's median 19.5 against piece_of_cake's 18.1,
        // the ranges overlapping: no evidence either way.
        let u = [19.46, 23.23, 35.49, 15.04, 14.71];
        let c = [10.39, 18.14, 24.78, 43.2, 8.38];
        assert!(p_larger(&u, &c).expect("p") > 0.2);
        // A single run each: 1 of 2 splits.
        assert_eq!(p_larger(&[2.0], &[1.0]), Some(0.5));
        assert_eq!(p_larger(&[], &[1.0]), None);
    }

    #[test]
    fn above_twenty_values_the_normal_approximation_is_used_and_agrees_with_the_exact_test() {
        // Ten against ten, shifted by three: exact by enumeration, and the approximation for
        // the same U.
        let a: Vec<f64> = (0..10).map(|i| f64::from(i) + 3.0).collect();
        let b: Vec<f64> = (0..10).map(f64::from).collect();
        let exact = p_larger(&a, &b).expect("p");
        // Of the 100 pairs, b wins 21 (6 + 5 + ... + 1) and 7 tie: U = 72 + 7 / 2.
        let approx = p_normal(75.5, 10, 10);
        assert!((0.01..0.1).contains(&exact), "{exact}");
        assert!((approx - exact).abs() < 0.01, "{approx} {exact}");
        // Eleven against eleven goes the approximate way and gives a p of the same size.
        let a: Vec<f64> = (0..11).map(|i| f64::from(i) + 3.0).collect();
        let b: Vec<f64> = (0..11).map(f64::from).collect();
        assert!((0.01..0.1).contains(&p_larger(&a, &b).expect("p")));
        assert!((erfc(0.0) - 1.0).abs() < 1e-7 && (erfc(1.0) - 0.157_299_2).abs() < 1e-6);
    }

    #[test]
    fn the_best_grade_is_the_best_of_any_run() {
        let s = StrategySpread {
            strategy: Strategy::None,
            be_p50_ms: None,
            be_p99_ms: None,
            be_steady_p99_ms: None,
            down_share: None,
            up_share: None,
            grades: vec![Some(Grade::F), None, Some(Grade::B), Some(Grade::D)],
        };
        assert_eq!(s.best_grade(), Some(Grade::B));
    }
}
