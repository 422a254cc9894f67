//! The last phase: the rates the two searches found, checked with both directions loaded at
//! once (rrul, as the lab grades a link).
//!
//! Why: each search loads one direction while the other is shaped at 85 % and nearly idle.
//! Under rrul the ACKs of each direction ride the other, and at the 98-99 % of the line the
//! searches found, the modem kept a queue: 25 ms steady p95 in the lab's vdsl2 run, against
//! 2.4 ms at 95 % (session 4's note). So the pair is loaded together; over the bound, both rates
//! step down by [`BACKOFF_PERCENT`] and are checked again, at most [`MAX_BACKOFFS`] times.
//!
//! When a back-off passes right after a failure and the time holds one more check, the pair
//! halfway back (2.5 % above it) is tried, and kept if it passes too: one back-off's 5 % was what
//! separated tune's result from the best rate in `bench tune` on every profile.
//!
//! A failed pair backs off the direction at fault when the probe's one-way delays tell it: the
//! leg (server to tester for the download, tester to server for the upload) that broke its share
//! of the bound ([`Bounds`]). adsl's pairs failed on the download's start-up queue still draining
//! (falling 1 to 13 ms/s) while the upload, at 98.8 % of its line, kept its leg: backing off both
//! cost the upload 5 % for nothing. Without stamps, or when neither leg broke its share alone
//! (the two tails added up), both back off.
//!
//! A back-off that lowers the delay by less than [`MIN_GAIN`] is not worth its rate: on slow
//! links the delay is the packets' own time on the wire, not a queue (adsl2-pppoa's 1 Mbit/s ATM
//! uplink under rrul: 123, 50.3, then 47.9 ms, where one full packet takes 14 ms). The checks
//! stop there and keep the pair before it. Whether the chosen pair kept the bound is said, not
//! hidden.

use serde::{Deserialize, Serialize};
use unbloat_report::summary::Leg;
use unbloat_units::Rate;

use crate::search;

/// Each back-off keeps this share of both rates.
pub const BACKOFF_PERCENT: u64 = 95;
/// Back-offs after the first check (so at most 1 + this many loaded runs).
pub const MAX_BACKOFFS: usize = 2;
/// The least share of the delay a back-off must remove to be kept.
pub const MIN_GAIN: f64 = 0.10;

/// What one loaded run of both directions gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Steady-state induced latency, p99, ms (the load's first 3 s left out).
    pub steady_p99_ms: f64,
    /// The steady state's trend, ms/s: a pair whose round trip keeps rising is above a line
    /// however low its p99 still is (`search::passes`).
    pub growth_ms_per_s: Option<f64>,
    /// The steady state's second half, p99, ms: judged instead while the trend falls.
    pub late_p99_ms: Option<f64>,
    /// The first 3 s: reported beside it, never deciding.
    pub startup_peak_ms: Option<f64>,
    pub goodput_down: Rate,
    pub goodput_up: Rate,
    /// The download's leg (server to tester) and the upload's, when the far end stamps probes.
    pub down_leg: Option<Leg>,
    pub up_leg: Option<Leg>,
}

impl Measured {
    /// The p99 the run is judged on ([`search::settled_p99_ms`]).
    pub fn judged_p99_ms(&self) -> f64 {
        search::settled_p99_ms(self.steady_p99_ms, self.late_p99_ms, self.growth_ms_per_s)
    }
}

/// The both-ways bound on the round trip, and each leg's share of it (the shares sum to it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub round_trip_ms: f64,
    pub down_ms: f64,
    pub up_ms: f64,
}

impl Bounds {
    /// From the one-way searches' bounds (the user's `bound_ms` plus each direction's packet
    /// slack): the round trip crosses both slacks and the user's bound once; each leg gets its
    /// slack and half the user's bound.
    pub fn new(bound_ms: f64, bound_down_ms: f64, bound_up_ms: f64) -> Bounds {
        Bounds {
            round_trip_ms: bound_down_ms + bound_up_ms - bound_ms,
            down_ms: bound_down_ms - bound_ms / 2.0,
            up_ms: bound_up_ms - bound_ms / 2.0,
        }
    }

    /// Which of (down, up) a failed run backs off: the legs that broke their share, or both
    /// when the legs cannot say.
    fn at_fault(&self, m: &Measured) -> (bool, bool) {
        let broke = |leg: Option<Leg>, share: f64| {
            leg.map(|l| !search::passes(share, l.induced_p99_ms, l.growth_ms_per_s))
        };
        match (broke(m.down_leg, self.down_ms), broke(m.up_leg, self.up_ms)) {
            (Some(d), Some(u)) if d || u => (d, u),
            _ => (true, true),
        }
    }
}

/// One check of a pair of rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BothStep {
    pub down: Rate,
    pub up: Rate,
    pub steady_p99_ms: f64,
    #[serde(default)]
    pub growth_ms_per_s: Option<f64>,
    /// The steady state's second half, p99, ms.
    #[serde(default)]
    pub late_p99_ms: Option<f64>,
    pub startup_peak_ms: Option<f64>,
    pub goodput_down: Rate,
    pub goodput_up: Rate,
    #[serde(default)]
    pub down_leg: Option<Leg>,
    #[serde(default)]
    pub up_leg: Option<Leg>,
    /// Whether the settled p99 ([`BothStep::judged_p99_ms`]) was within the bound.
    pub pass: bool,
    /// The pair the run keeps (exactly one step has it).
    #[serde(default)]
    pub chosen: bool,
}

impl BothStep {
    /// The p99 the step was judged on ([`search::settled_p99_ms`]).
    pub fn judged_p99_ms(&self) -> f64 {
        search::settled_p99_ms(self.steady_p99_ms, self.late_p99_ms, self.growth_ms_per_s)
    }
}

/// Checks `(down, up)` with `measure` (which shapes and loads both ways), backing off the
/// direction at fault ([`Bounds::at_fault`]) while the round trip's bound is broken, backing off still helps and `max_checks` (what the time left holds; at least
/// one, at most 1 + [`MAX_BACKOFFS`]) allows. The steps in order, one of them `chosen`.
pub fn check<E>(
    down: Rate,
    up: Rate,
    bounds: Bounds,
    max_checks: usize,
    mut measure: impl FnMut(Rate, Rate) -> Result<Measured, E>,
) -> Result<Vec<BothStep>, E> {
    let bound_ms = bounds.round_trip_ms;
    let mut steps: Vec<BothStep> = Vec::new();
    let (mut d, mut u) = (down, up);
    let mut halfway = false;
    loop {
        let m = measure(d, u)?;
        // NaN (no steady samples) is not a pass.
        let pass = search::passes(bound_ms, m.judged_p99_ms(), m.growth_ms_per_s);
        steps.push(BothStep {
            down: d,
            up: u,
            steady_p99_ms: m.steady_p99_ms,
            growth_ms_per_s: m.growth_ms_per_s,
            late_p99_ms: m.late_p99_ms,
            startup_peak_ms: m.startup_peak_ms,
            goodput_down: m.goodput_down,
            goodput_up: m.goodput_up,
            down_leg: m.down_leg,
            up_leg: m.up_leg,
            pass,
            chosen: false,
        });
        let n = steps.len();
        if halfway {
            // The pair halfway back: kept when it passed, else the back-off below it.
            steps[if pass { n - 1 } else { n - 2 }].chosen = true;
            return Ok(steps);
        }
        let room = n <= MAX_BACKOFFS && n < max_checks;
        if pass && n >= 2 && !steps[n - 2].pass && room {
            // A back-off passed: the boundary lies between it and the failure above, so the
            // pair halfway back is worth the check the time still holds (2.5 % more rate).
            halfway = true;
            let above = &steps[n - 2];
            (d, u) = (midway(above.down, d), midway(above.up, u));
            continue;
        }
        if n >= 2 && !pass {
            let (before, now) = (&steps[n - 2], &steps[n - 1]);
            // NaN compares false: a run without steady samples is no gain either. A rise that
            // stopped is a gain too (the pair before was over a line, this one is not).
            let helped = now.judged_p99_ms() < before.judged_p99_ms() * (1.0 - MIN_GAIN)
                || (search::rising(bound_ms, before.growth_ms_per_s)
                    && !search::rising(bound_ms, now.growth_ms_per_s));
            if !helped {
                steps[n - 2].chosen = true;
                return Ok(steps);
            }
        }
        if pass || n > MAX_BACKOFFS || n >= max_checks {
            steps[n - 1].chosen = true;
            return Ok(steps);
        }
        let (back_down, back_up) = bounds.at_fault(&m);
        let back = |r: Rate, at_fault: bool| {
            if at_fault {
                r.percent(BACKOFF_PERCENT)
            } else {
                r
            }
        };
        (d, u) = (back(d, back_down), back(u, back_up));
    }
}

/// The rate halfway between two.
fn midway(a: Rate, b: Rate) -> Rate {
    Rate::from_bits_per_sec((a.bits_per_sec() + b.bits_per_sec()) / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p99: f64) -> Measured {
        Measured {
            steady_p99_ms: p99,
            growth_ms_per_s: Some(0.1),
            late_p99_ms: None,
            startup_peak_ms: Some(50.0),
            goodput_down: Rate::from_mbit(70),
            goodput_up: Rate::from_mbit(18),
            down_leg: None,
            up_leg: None,
        }
    }

    /// A round-trip bound whose legs cannot be told apart (no stamps in `m`).
    fn rt(ms: f64) -> Bounds {
        Bounds {
            round_trip_ms: ms,
            down_ms: ms / 2.0,
            up_ms: ms / 2.0,
        }
    }

    fn leg(p99: f64, growth: f64) -> Option<Leg> {
        Some(Leg {
            induced_p99_ms: p99,
            growth_ms_per_s: Some(growth),
        })
    }

    /// adsl in `bench lab`: the pair failed on the download's start-up queue still draining while
    /// the upload's leg kept its share; only the download backs off. Legs that each keep their
    /// share while the round trip does not (two tails added up) back both off.
    #[test]
    fn the_direction_whose_leg_broke_its_share_backs_off_alone() {
        // adsl's bounds: 10 ms, 13.5 down and 43.0 up with the packets' slack.
        let bounds = Bounds::new(10.0, 13.5, 43.0);
        assert_eq!(
            (bounds.round_trip_ms, bounds.down_ms, bounds.up_ms),
            (46.5, 8.5, 38.0)
        );
        let mut asked = vec![];
        let mut seen = vec![
            (73.3, leg(50.0, -8.0), leg(20.0, 0.1)),
            (30.0, leg(6.0, -0.2), leg(21.0, 0.0)),
            (44.0, leg(8.0, 0.1), leg(37.0, 0.2)),
        ]
        .into_iter();
        let steps = check(
            Rate::from_kbit(6474),
            Rate::from_kbit(759),
            bounds,
            3,
            |d, u| {
                asked.push((d, u));
                let (p99, down_leg, up_leg) = seen.next().unwrap();
                Ok::<_, ()>(Measured {
                    down_leg,
                    up_leg,
                    ..m(p99)
                })
            },
        )
        .unwrap();
        let up = Rate::from_kbit(759);
        assert_eq!(
            asked,
            [
                (Rate::from_kbit(6474), up),
                (Rate::from_kbit(6150), up),
                (Rate::from_kbit(6312), up),
            ]
        );
        assert!(steps[2].chosen && steps[2].down_leg.is_some());
        // Neither leg over its share, the round trip over: both back off.
        let both = Measured {
            down_leg: leg(8.0, 0.0),
            up_leg: leg(37.0, 0.0),
            ..m(47.0)
        };
        assert_eq!(bounds.at_fault(&both), (true, true));
        let rising_up = Measured {
            down_leg: leg(2.0, 0.0),
            up_leg: leg(20.0, 5.0),
            ..m(47.0)
        };
        assert_eq!(bounds.at_fault(&rising_up), (false, true));
    }

    #[test]
    fn a_pair_within_the_bound_is_kept_after_one_run() {
        let mut runs = 0;
        let steps = check(
            Rate::from_mbit(78),
            Rate::from_mbit(19),
            rt(10.0),
            3,
            |_, _| {
                runs += 1;
                Ok::<_, ()>(m(4.0))
            },
        )
        .unwrap();
        assert_eq!(runs, 1);
        assert_eq!(
            (steps[0].down, steps[0].up),
            (Rate::from_mbit(78), Rate::from_mbit(19))
        );
        assert!(steps[0].pass && steps[0].chosen);
    }

    #[test]
    fn over_the_bound_both_rates_back_off_until_it_holds() {
        let mut asked = vec![];
        let steps = check(
            Rate::from_mbit(80),
            Rate::from_mbit(20),
            rt(10.0),
            3,
            |d, u| {
                asked.push((d, u));
                Ok::<_, ()>(m(if asked.len() < 2 { 25.0 } else { 6.0 }))
            },
        )
        .unwrap();
        assert_eq!(
            asked,
            vec![
                (Rate::from_mbit(80), Rate::from_mbit(20)),
                (Rate::from_mbit(76), Rate::from_mbit(19)),
                (Rate::from_mbit(78), Rate::from_kbit(19_500)),
            ]
        );
        // Halfway back passed too: it is kept.
        let got: Vec<(bool, bool)> = steps.iter().map(|s| (s.pass, s.chosen)).collect();
        assert_eq!(got, [(false, false), (true, false), (true, true)]);
    }

    #[test]
    fn halfway_back_failing_keeps_the_back_off_and_no_time_means_no_halfway() {
        let mut seen = vec![25.0, 6.0, 14.0].into_iter();
        let steps = check(
            Rate::from_mbit(80),
            Rate::from_mbit(20),
            rt(10.0),
            3,
            |_, _| Ok::<_, ()>(m(seen.next().unwrap())),
        )
        .unwrap();
        let chosen: Vec<bool> = steps.iter().map(|s| s.chosen).collect();
        assert_eq!(chosen, [false, true, false]);
        // Two checks' time: the back-off that passed is the end.
        let mut seen = vec![25.0, 6.0].into_iter();
        let steps = check(
            Rate::from_mbit(80),
            Rate::from_mbit(20),
            rt(10.0),
            2,
            |_, _| Ok::<_, ()>(m(seen.next().unwrap())),
        )
        .unwrap();
        assert_eq!(steps.len(), 2);
        assert!(steps[1].chosen);
    }

    #[test]
    fn the_back_offs_are_bounded_and_a_last_failure_is_kept_as_such() {
        let mut p99 = 100.0;
        let steps = check(
            Rate::from_mbit(80),
            Rate::from_mbit(20),
            rt(10.0),
            3,
            |_, _| {
                p99 /= 2.0;
                Ok::<_, ()>(m(p99))
            },
        )
        .unwrap();
        assert_eq!(steps.len(), 1 + MAX_BACKOFFS);
        assert!(steps.iter().all(|s| !s.pass));
        let last = steps.last().unwrap();
        assert!(last.chosen && last.down == Rate::from_kbit(72_200));
    }

    /// adsl2-pppoa's uplink in `bench tune`: 123, 50.3, 47.9 ms: the second back-off bought
    /// 5 %, so the pair before it is kept.
    #[test]
    fn a_back_off_that_barely_helps_is_not_kept() {
        let mut seen = vec![123.0, 50.3, 47.9].into_iter();
        let steps = check(
            Rate::from_kbit(15_763),
            Rate::from_kbit(1_001),
            rt(35.0),
            3,
            |_, _| Ok::<_, ()>(m(seen.next().unwrap())),
        )
        .unwrap();
        assert_eq!(steps.len(), 3);
        let chosen: Vec<bool> = steps.iter().map(|s| s.chosen).collect();
        assert_eq!(chosen, [false, true, false]);
        assert_eq!(steps[1].up, Rate::from_bits_per_sec(950_950));
        // Runs without steady samples gain nothing either: the first pair is kept.
        let steps = check(
            Rate::from_mbit(80),
            Rate::from_mbit(20),
            rt(10.0),
            3,
            |_, _| Ok::<_, ()>(m(f64::NAN)),
        )
        .unwrap();
        assert_eq!(steps.len(), 2);
        assert!(steps[0].chosen);
    }

    /// A pair whose round trip keeps rising is above a line: it fails however low its p99 still
    /// is, as a search step does (8 s of rrul cannot show a small excess in its p99 alone).
    #[test]
    fn a_rising_pair_fails_within_the_bound_and_a_back_off_that_stops_the_rise_helps() {
        // Each check's (p99, trend) in turn, on adsl2-pppoa's pair and both-ways bound.
        let run = |readings: Vec<(f64, f64)>| {
            let mut seen = readings.into_iter();
            check(
                Rate::from_kbit(15_282),
                Rate::from_kbit(995),
                rt(36.5),
                3,
                |_, _| {
                    let (p99, growth) = seen.next().unwrap();
                    Ok::<_, ()>(Measured {
                        growth_ms_per_s: Some(growth),
                        ..m(p99)
                    })
                },
            )
            .unwrap()
        };
        let steps = run(vec![(20.0, 5.0), (19.0, 0.2), (19.5, 0.1)]);
        let got: Vec<(bool, bool)> = steps.iter().map(|s| (s.pass, s.chosen)).collect();
        // Rising at 5 ms/s fails; the back-off passes; halfway back passes too and is kept.
        assert_eq!(got, [(false, false), (true, false), (true, true)]);
        // A back-off that still rises but lowers the p99 by less than 10 % is no gain: unless
        // it stopped the rise, the pair before is kept.
        let steps = run(vec![(20.0, 5.0), (19.0, 4.0), (18.5, 4.0)]);
        assert_eq!(steps.len(), 2);
        assert!(steps[0].chosen && !steps[0].pass);
    }

    /// adsl at 92 % in `bench tune`: +50.3 ms over the 46.5 ms bound with the round trip falling
    /// (the start-up queue draining); its second half settled within it, so the pair is kept.
    /// The same figures on a flat trend fail and back off.
    #[test]
    fn a_falling_pair_is_judged_on_its_second_half() {
        let run = |growth: f64| {
            let mut seen = vec![(50.3, 37.0), (40.0, 39.0), (42.0, 41.0)].into_iter();
            check(
                Rate::from_kbit(6440),
                Rate::from_kbit(759),
                rt(46.5),
                3,
                |_, _| {
                    let (p99, late) = seen.next().unwrap();
                    Ok::<_, ()>(Measured {
                        growth_ms_per_s: Some(growth),
                        late_p99_ms: Some(late),
                        ..m(p99)
                    })
                },
            )
            .unwrap()
        };
        let falling = run(-1.1);
        assert_eq!(falling.len(), 1);
        assert!(falling[0].pass && falling[0].chosen);
        assert_eq!(falling[0].judged_p99_ms(), 37.0);
        let flat = run(0.1);
        assert!(!flat[0].pass && flat.len() > 1, "{flat:?}");
        assert_eq!(flat[0].judged_p99_ms(), 50.3);
    }

    #[test]
    fn the_time_left_caps_the_back_offs() {
        let steps = check(
            Rate::from_mbit(80),
            Rate::from_mbit(20),
            rt(10.0),
            1,
            |_, _| Ok::<_, ()>(m(40.0)),
        )
        .unwrap();
        assert_eq!(steps.len(), 1);
        assert!(steps[0].chosen && !steps[0].pass);
    }

    #[test]
    fn a_measurement_error_ends_the_check() {
        let r = check(
            Rate::from_mbit(80),
            Rate::from_mbit(20),
            rt(10.0),
            3,
            |_, _| Err::<Measured, _>("the far end went away"),
        );
        assert_eq!(r, Err("the far end went away"));
    }
}
