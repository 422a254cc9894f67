//! The last phase: the rates the two searches found, checked with both directions loaded at
//! once (rrul, as the lab grades a link).
//!
//! Why: each search loads one direction while the other is shaped at 85 % and nearly idle.
//! Under rrul the ACKs of each direction ride the other, and at the 98-99 % of the line the
//! searches found, the modem kept a queue: 25 ms steady p95 in the lab's vdsl2 run, against
//! 2.4 ms at 95 % (session 4's note). So the pair is loaded together; over the bound, both rates
//! step down by [`BACKOFF_PERCENT`] and are checked again, at most [`MAX_BACKOFFS`] times. The
//! last pair checked is the result, and whether it kept the bound is said, not hidden.

use serde::{Deserialize, Serialize};
use unbloat_units::Rate;

/// Each back-off keeps this share of both rates.
pub const BACKOFF_PERCENT: u64 = 95;
/// Back-offs after the first check (so at most 1 + this many loaded runs).
pub const MAX_BACKOFFS: usize = 2;

/// What one loaded run of both directions gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Steady-state induced latency, p99, ms (the load's first 3 s left out).
    pub steady_p99_ms: f64,
    /// The first 3 s: reported beside it, never deciding.
    pub startup_peak_ms: Option<f64>,
    pub goodput_down: Rate,
    pub goodput_up: Rate,
}

/// One check of a pair of rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BothStep {
    pub down: Rate,
    pub up: Rate,
    pub steady_p99_ms: f64,
    pub startup_peak_ms: Option<f64>,
    pub goodput_down: Rate,
    pub goodput_up: Rate,
    /// Whether `steady_p99_ms` was within the bound.
    pub pass: bool,
}

/// Checks `(down, up)` with `measure` (which shapes and loads both ways), backing off while the
/// bound is broken. The steps in order; the last one's rates are the result.
pub fn check<E>(
    down: Rate,
    up: Rate,
    bound_ms: f64,
    mut measure: impl FnMut(Rate, Rate) -> Result<Measured, E>,
) -> Result<Vec<BothStep>, E> {
    let mut steps: Vec<BothStep> = Vec::new();
    let (mut d, mut u) = (down, up);
    loop {
        let m = measure(d, u)?;
        // NaN (no steady samples) is not a pass.
        let pass = m.steady_p99_ms <= bound_ms;
        steps.push(BothStep {
            down: d,
            up: u,
            steady_p99_ms: m.steady_p99_ms,
            startup_peak_ms: m.startup_peak_ms,
            goodput_down: m.goodput_down,
            goodput_up: m.goodput_up,
            pass,
        });
        if pass || steps.len() > MAX_BACKOFFS {
            return Ok(steps);
        }
        (d, u) = (d.percent(BACKOFF_PERCENT), u.percent(BACKOFF_PERCENT));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p99: f64) -> Measured {
        Measured {
            steady_p99_ms: p99,
            startup_peak_ms: Some(50.0),
            goodput_down: Rate::from_mbit(70),
            goodput_up: Rate::from_mbit(18),
        }
    }

    #[test]
    fn a_pair_within_the_bound_is_kept_after_one_run() {
        let mut runs = 0;
        let steps = check(Rate::from_mbit(78), Rate::from_mbit(19), 10.0, |_, _| {
            runs += 1;
            Ok::<_, ()>(m(4.0))
        })
        .unwrap();
        assert_eq!(runs, 1);
        assert_eq!(
            (steps[0].down, steps[0].up),
            (Rate::from_mbit(78), Rate::from_mbit(19))
        );
        assert!(steps[0].pass);
    }

    #[test]
    fn over_the_bound_both_rates_back_off_until_it_holds() {
        let mut asked = vec![];
        let steps = check(Rate::from_mbit(80), Rate::from_mbit(20), 10.0, |d, u| {
            asked.push((d, u));
            Ok::<_, ()>(m(if asked.len() < 2 { 25.0 } else { 6.0 }))
        })
        .unwrap();
        assert_eq!(
            asked,
            vec![
                (Rate::from_mbit(80), Rate::from_mbit(20)),
                (Rate::from_mbit(76), Rate::from_mbit(19)),
            ]
        );
        assert_eq!(
            steps.iter().map(|s| s.pass).collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn the_back_offs_are_bounded_and_a_last_failure_is_kept_as_such() {
        let mut runs = 0;
        let steps = check(Rate::from_mbit(80), Rate::from_mbit(20), 10.0, |_, _| {
            runs += 1;
            Ok::<_, ()>(m(f64::NAN))
        })
        .unwrap();
        assert_eq!(runs, 1 + MAX_BACKOFFS);
        assert!(steps.iter().all(|s| !s.pass));
        assert_eq!(steps.last().unwrap().down, Rate::from_kbit(72_200));
    }

    #[test]
    fn a_measurement_error_ends_the_check() {
        let r = check(Rate::from_mbit(80), Rate::from_mbit(20), 10.0, |_, _| {
            Err::<Measured, _>("the far end went away")
        });
        assert_eq!(r, Err("the far end went away"));
    }
}
