//! Pure statistics over measured samples. No I/O, no allocation beyond sorting a copy.
//!
//! What callers can rely on:
//! - Every function returns `None` instead of a made-up number when its input is empty or
//!   meaningless (no samples, all zero, NaN). Non-finite samples (NaN, ±inf) are ignored: a
//!   measurement that produced one is broken, and one bad value must not poison a percentile.
//! - [`percentile`] is numpy's default (`method="linear"`, Hyndman & Fan type 7): for sorted
//!   finite values `v[0..n]` and `p` in `[0, 100]`, the rank is `h = (n - 1) * p / 100` and the
//!   result is `v[floor h] + (h - floor h) * (v[floor h + 1] - v[floor h])`. So p0 is the minimum,
//!   p100 the maximum, and the median of an even count is the mean of the two middle values.
//! - [`Grade`] follows the DSLReports bufferbloat table exactly, half-open at every boundary.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The finite values of `values`, sorted ascending.
fn sorted_finite(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    // total_cmp is a total order, and with only finite values it agrees with `<`.
    v.sort_by(f64::total_cmp);
    v
}

/// Samples sorted once, for asking several percentiles of the same data.
#[derive(Debug, Clone, PartialEq)]
pub struct Sorted(Vec<f64>);

impl Sorted {
    /// Sorts the finite values of `values`.
    pub fn new(values: &[f64]) -> Sorted {
        Sorted(sorted_finite(values))
    }

    /// How many finite samples there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The sorted samples.
    pub fn values(&self) -> &[f64] {
        &self.0
    }

    /// The `p`-th percentile (0..=100) by linear interpolation (see the module doc); `None` for
    /// no samples or `p` outside 0..=100 or NaN.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.0.is_empty() || !(0.0..=100.0).contains(&p) {
            return None;
        }
        let h = (self.0.len() - 1) as f64 * p / 100.0;
        let lo = h.floor() as usize;
        let hi = (lo + 1).min(self.0.len() - 1);
        let (a, b) = (self.0[lo], self.0[hi]);
        // a + f*(b-a) can leave [a, b] by an ulp when f is near 1; clamp so a percentile never
        // lies outside the data it came from.
        Some((a + (h - lo as f64) * (b - a)).clamp(a, b))
    }

    /// The 50th percentile.
    pub fn median(&self) -> Option<f64> {
        self.percentile(50.0)
    }
}

/// The `p`-th percentile (0..=100) of the finite values, numpy's linear method.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    Sorted::new(values).percentile(p)
}

/// The median of the finite values (mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
}

/// The arithmetic mean of the finite values.
pub fn mean(values: &[f64]) -> Option<f64> {
    let finite: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        None
    } else {
        Some(finite.iter().sum::<f64>() / finite.len() as f64)
    }
}

/// The least-squares slope of `(x, y)` points, y per x; `None` below 10 points or when every x is
/// the same (too few to tell a trend from noise).
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 10 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Jain's fairness index, `(Σx)² / (n·Σx²)` (Jain, Chiu & Hawe, DEC-TR-301, 1984): 1 when all
/// shares are equal, `1/n` when one flow has everything. `None` for no values, a negative
/// value (a throughput cannot be negative), or all zeros (nothing to be fair about).
pub fn jain_fairness(values: &[f64]) -> Option<f64> {
    let finite: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() || finite.iter().any(|&x| x < 0.0) {
        return None;
    }
    let sum: f64 = finite.iter().sum();
    let sum_sq: f64 = finite.iter().map(|x| x * x).sum();
    if sum_sq <= 0.0 {
        return None;
    }
    // Rounding can push an all-equal set a hair above 1.
    Some((sum * sum / (finite.len() as f64 * sum_sq)).min(1.0))
}

/// Induced latency: how much the load added, `loaded - idle_median`, in the same unit. Not
/// clamped: a small negative value means "no measurable increase" and is graded A+; hiding it
/// would hide noise in the idle baseline.
pub fn induced_latency(loaded: f64, idle_median: f64) -> Option<f64> {
    let d = loaded - idle_median;
    d.is_finite().then_some(d)
}

/// Responsiveness in round trips per minute: `60000 / rtt_ms`.
///
/// The IETF's "Responsiveness under Working Conditions" draft (draft-ietf-ippm-responsiveness,
/// the metric behind Apple's `networkQuality` "RPM") expresses latency under load as how many
/// round trips fit in a minute, because a bigger-is-better number is easier to read than
/// milliseconds. The draft averages trimmed means of several probe kinds (TCP, TLS and HTTP
/// exchanges on new and on loaded connections); unbloat has UDP and ICMP probes, so callers
/// pass the median loaded round trip of one probe class and we document the difference rather
/// than pretend to be the draft. `None` for a non-positive or non-finite RTT.
pub fn rpm(rtt_ms: f64) -> Option<f64> {
    (rtt_ms.is_finite() && rtt_ms > 0.0).then(|| 60_000.0 / rtt_ms)
}

/// Fraction of probes lost, 0..=1. `None` when nothing was sent; `lost` above `sent` is
/// capped (a probe is lost at most once).
pub fn loss_ratio(lost: usize, sent: usize) -> Option<f64> {
    (sent > 0).then(|| lost.min(sent) as f64 / sent as f64)
}

/// The DSLReports bufferbloat grade, from induced latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Grade {
    #[serde(rename = "A+")]
    APlus,
    A,
    B,
    C,
    D,
    F,
}

impl Grade {
    /// The grade for `induced_ms` of induced latency, by DSLReports' table: A+ below 5 ms,
    /// A below 30, B below 60, C below 200, D below 400, F from 400 on. Negative (no increase)
    /// is A+. `None` for NaN; +inf is F.
    pub fn from_induced_ms(induced_ms: f64) -> Option<Grade> {
        if induced_ms.is_nan() {
            return None;
        }
        Some(if induced_ms < 5.0 {
            Grade::APlus
        } else if induced_ms < 30.0 {
            Grade::A
        } else if induced_ms < 60.0 {
            Grade::B
        } else if induced_ms < 200.0 {
            Grade::C
        } else if induced_ms < 400.0 {
            Grade::D
        } else {
            Grade::F
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Grade::APlus => "A+",
            Grade::A => "A",
            Grade::B => "B",
            Grade::C => "C",
            Grade::D => "D",
            Grade::F => "F",
        }
    }
}

impl fmt::Display for Grade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
    }

    #[test]
    fn percentile_matches_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) == [1, 1.75, 2.5, 3.7, 4]
        let v = [4.0, 1.0, 3.0, 2.0];
        let got: Vec<f64> = [0.0, 25.0, 50.0, 90.0, 100.0]
            .iter()
            .map(|&p| percentile(&v, p).unwrap())
            .collect();
        for (g, want) in got.iter().zip([1.0, 1.75, 2.5, 3.7, 4.0]) {
            assert!(close(*g, want), "{got:?}");
        }
        // numpy.percentile([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 99) == 99.1
        let w: Vec<f64> = (1..=10).map(|i| f64::from(i) * 10.0).collect();
        assert!(close(percentile(&w, 99.0).unwrap(), 99.1));
    }

    #[test]
    fn percentile_edge_cases() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7.0], 0.0), Some(7.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[1.0, 2.0], -0.1), None);
        assert_eq!(percentile(&[1.0, 2.0], 100.1), None);
        assert_eq!(percentile(&[1.0, 2.0], f64::NAN), None);
        // Non-finite samples are ignored, not propagated.
        assert_eq!(
            percentile(&[f64::NAN, 1.0, f64::INFINITY, 3.0], 50.0),
            Some(2.0)
        );
        assert_eq!(percentile(&[f64::NAN], 50.0), None);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn mean_ignores_non_finite() {
        assert_eq!(mean(&[1.0, 2.0, f64::NAN, 6.0]), Some(3.0));
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn slope_of_a_rising_queue_and_of_noise() {
        let rising: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64 * 0.05, 20.0 + i as f64 * 0.25))
            .collect();
        assert!((slope(&rising).unwrap() - 5.0).abs() < 1e-9);
        let flat: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64 * 0.05, 20.0 + (i % 7) as f64))
            .collect();
        assert!(slope(&flat).unwrap().abs() < 0.5);
        assert_eq!(slope(&rising[..9]), None);
        assert_eq!(slope(&[(1.0, 2.0); 20]), None);
    }

    #[test]
    fn jain_known_values() {
        assert!(close(jain_fairness(&[5.0, 5.0, 5.0, 5.0]).unwrap(), 1.0));
        assert!(close(jain_fairness(&[10.0, 0.0, 0.0, 0.0]).unwrap(), 0.25));
        // (1+2+3)^2 / (3 * (1+4+9)) = 36/42
        assert!(close(jain_fairness(&[1.0, 2.0, 3.0]).unwrap(), 36.0 / 42.0));
        assert_eq!(jain_fairness(&[]), None);
        assert_eq!(jain_fairness(&[0.0, 0.0]), None);
        assert_eq!(jain_fairness(&[1.0, -1.0]), None);
    }

    #[test]
    fn induced_latency_is_the_plain_difference() {
        assert_eq!(induced_latency(150.0, 20.0), Some(130.0));
        assert_eq!(induced_latency(19.0, 20.0), Some(-1.0));
        assert_eq!(induced_latency(f64::NAN, 20.0), None);
        assert_eq!(induced_latency(f64::INFINITY, f64::INFINITY), None);
    }

    #[test]
    fn grade_boundaries_are_half_open() {
        let cases = [
            (-3.0, Grade::APlus),
            (0.0, Grade::APlus),
            (4.999, Grade::APlus),
            (5.0, Grade::A),
            (29.999, Grade::A),
            (30.0, Grade::B),
            (59.999, Grade::B),
            (60.0, Grade::C),
            (199.999, Grade::C),
            (200.0, Grade::D),
            (399.999, Grade::D),
            (400.0, Grade::F),
            (10_000.0, Grade::F),
            (f64::INFINITY, Grade::F),
        ];
        for (ms, want) in cases {
            assert_eq!(Grade::from_induced_ms(ms), Some(want), "{ms} ms");
        }
        assert_eq!(Grade::from_induced_ms(f64::NAN), None);
    }

    #[test]
    fn grade_spelling() {
        assert_eq!(Grade::APlus.to_string(), "A+");
        assert_eq!(serde_json::to_string(&Grade::APlus).unwrap(), "\"A+\"");
        assert_eq!(serde_json::from_str::<Grade>("\"F\"").unwrap(), Grade::F);
    }

    #[test]
    fn rpm_and_loss() {
        assert_eq!(rpm(100.0), Some(600.0));
        assert_eq!(rpm(0.0), None);
        assert_eq!(rpm(-1.0), None);
        assert_eq!(rpm(f64::NAN), None);
        assert_eq!(loss_ratio(1, 4), Some(0.25));
        assert_eq!(loss_ratio(0, 0), None);
        assert_eq!(loss_ratio(9, 4), Some(1.0));
    }

    proptest! {
        #[test]
        fn percentile_lies_within_the_data_and_is_monotonic(
            v in prop::collection::vec(-1e6f64..1e6, 1..60),
            p in 0.0f64..=100.0,
            q in 0.0f64..=100.0,
        ) {
            let s = Sorted::new(&v);
            let min = s.values()[0];
            let max = s.values()[s.len() - 1];
            let a = s.percentile(p).unwrap();
            prop_assert!(a >= min && a <= max);
            let (lo, hi) = if p <= q { (p, q) } else { (q, p) };
            prop_assert!(s.percentile(lo).unwrap() <= s.percentile(hi).unwrap());
            prop_assert_eq!(s.percentile(0.0), Some(min));
            prop_assert_eq!(s.percentile(100.0), Some(max));
        }

        #[test]
        fn percentile_ignores_order(mut v in prop::collection::vec(-1e6f64..1e6, 1..40), p in 0.0f64..=100.0) {
            let a = percentile(&v, p);
            v.reverse();
            prop_assert_eq!(a, percentile(&v, p));
        }

        #[test]
        fn median_splits_the_data(v in prop::collection::vec(-1e3f64..1e3, 1..50)) {
            let m = median(&v).unwrap();
            let below = v.iter().filter(|&&x| x < m).count();
            let above = v.iter().filter(|&&x| x > m).count();
            prop_assert!(below <= v.len() / 2 && above <= v.len() / 2);
        }

        #[test]
        fn jain_is_between_1_over_n_and_1_and_scale_free(
            v in prop::collection::vec(0.0f64..1e9, 1..20),
            k in 1e-3f64..1e3,
        ) {
            if let Some(j) = jain_fairness(&v) {
                let n = v.len() as f64;
                prop_assert!(j <= 1.0 && j >= 1.0 / n - 1e-12);
                let scaled: Vec<f64> = v.iter().map(|x| x * k).collect();
                let js = jain_fairness(&scaled).unwrap();
                prop_assert!((j - js).abs() < 1e-9);
            } else {
                prop_assert!(v.iter().all(|&x| x == 0.0));
            }
        }

        #[test]
        fn grade_never_improves_with_more_latency(a in -100.0f64..1000.0, b in -100.0f64..1000.0) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(Grade::from_induced_ms(lo).unwrap() <= Grade::from_induced_ms(hi).unwrap());
        }

        #[test]
        fn rpm_round_trips(ms in 0.01f64..1e5) {
            let r = rpm(ms).unwrap();
            prop_assert!((60_000.0 / r - ms).abs() < 1e-9 * ms);
        }

        #[test]
        fn loss_ratio_in_unit_interval(lost in 0usize..1000, sent in 1usize..1000) {
            let r = loss_ratio(lost, sent).unwrap();
            prop_assert!((0.0..=1.0).contains(&r));
        }
    }
}
