//! One reflector's delay baseline, and how healthy it is.
//!
//! The baseline is the delay of an empty path. It follows a lower sample quickly (a shorter
//! route, or the queue draining) and a higher one slowly (a longer route), so a queue that builds
//! for seconds shows as a delta over it long before the baseline catches up. The delta of a sample
//! is taken against the baseline as it was before the sample.

use std::time::Duration;

use crate::probe::Deltas;

/// How fast the baseline follows a sample below it (the share of the difference taken).
pub const ALPHA_DOWN: f64 = 0.9;
/// How fast it follows a sample above it: at one sample every 0.3 s, a 10 ms rise takes about
/// 5 minutes to be half absorbed, while bloat is acted on within a second.
pub const ALPHA_UP: f64 = 0.001;
/// A reflector that has not answered for this long is replaced.
pub const DEADLINE: Duration = Duration::from_secs(1);
/// Missed answers out of [`HEALTH_WINDOW`] that make a reflector bad.
pub const MAX_MISSES: usize = 3;
pub const HEALTH_WINDOW: usize = 20;

#[derive(Debug, Clone, Default)]
pub struct Baseline {
    value: Option<f64>,
}

impl Baseline {
    /// The sample's delta over the baseline (0 for the first sample), then the baseline moved.
    pub fn delta(&mut self, sample_ms: f64) -> f64 {
        let Some(b) = self.value else {
            self.value = Some(sample_ms);
            return 0.0;
        };
        let alpha = if sample_ms < b { ALPHA_DOWN } else { ALPHA_UP };
        self.value = Some(b + alpha * (sample_ms - b));
        (sample_ms - b).max(0.0)
    }

    pub fn value(&self) -> Option<f64> {
        self.value
    }
}

/// How far a timestamp answer's one-way deltas may stray from its round trip's before the
/// one-way baselines are taken to be wrong. With true baselines a one-way delta exceeds the round
/// trip's by the paths' jitter at most (the round trip's baseline is the least *sum*, which may
/// be a little over the sum of the two least one-way delays), and the two add up to no less than
/// it; 50 ms is well over an LTE link's one-way jitter, and well under any clock step that
/// matters.
pub const RELEARN_MS: f64 = 50.0;
/// Answers after a re-learn whose one-way deltas are not used: the round trip's delta stands
/// in, while the new baselines find the path's floor (3 s at one answer every 0.3 s).
pub const RELEARN_SAMPLES: u32 = 10;

/// A reflector's one-way baselines, held to the round trip of the same probes (issue 36 item 4).
///
/// A one-way delay is two clocks' difference: the reflector's and ours. When either steps (NTP
/// syncing a router that booted without a real-time clock, an admin setting the date), every
/// one-way delay moves by the step, up one way and down the other, and the baselines, which
/// rise at [`ALPHA_UP`], would take minutes to follow: in the controller's test a step of 5 s
/// cut the download to its minimum within 10 s. The round trip comes from our monotonic clock
/// alone and cannot step. Hence:
/// - a one-way delta is never more than the round trip's delta: a queue one way is in the round
///   trip too (it is clamped to it);
/// - when one of them is more than [`RELEARN_MS`] over the round trip's, or the two add up to
///   [`RELEARN_MS`] less than it, the baselines are not this path's any more: they are learnt
///   again, and for [`RELEARN_SAMPLES`] answers the round trip's delta is given instead (blamed
///   like an echo's, see [`crate::controller`]). The shortfall also catches one-way baselines
///   learnt again while a queue stood that the round trip's baseline knows of: they would hide
///   that queue for as long as it lasts.
///
/// Our own clock's steps do not reach here (the pinger's clock is monotonic after its start);
/// a reflector's do, and are caught at its next answer.
#[derive(Debug, Clone, Default)]
pub struct OneWay {
    down: Baseline,
    up: Baseline,
    relearning: u32,
}

impl OneWay {
    /// The deltas of one answer's one-way delays, given its round trip's delta `rtt_delta` (over
    /// the reflector's round-trip baseline, [`Baseline::delta`]).
    pub fn deltas(&mut self, down: f64, up: f64, rtt_delta: f64) -> Deltas {
        let raw = |b: &Baseline, sample: f64| b.value().map(|v| sample - v);
        if let (Some(dd), Some(du)) = (raw(&self.down, down), raw(&self.up, up)) {
            let over = dd.max(du) > rtt_delta + RELEARN_MS;
            let short = dd + du < rtt_delta - RELEARN_MS;
            if over || short {
                *self = OneWay {
                    relearning: RELEARN_SAMPLES,
                    ..OneWay::default()
                };
            }
        }
        let (dd, du) = (self.down.delta(down), self.up.delta(up));
        if self.relearning > 0 {
            self.relearning -= 1;
            return Deltas::Rtt(rtt_delta);
        }
        Deltas::OneWay {
            down: dd.min(rtt_delta),
            up: du.min(rtt_delta),
        }
    }

    pub fn relearning(&self) -> bool {
        self.relearning > 0
    }
}

/// A reflector's answers: the last time it answered, and its recent misses.
#[derive(Debug, Clone)]
pub struct Health {
    last_answer: Option<Duration>,
    started: Duration,
    recent: Vec<bool>,
}

impl Health {
    pub fn new(now: Duration) -> Health {
        Health {
            last_answer: None,
            started: now,
            recent: Vec::new(),
        }
    }

    /// One probe's outcome: answered in time or not.
    pub fn record(&mut self, now: Duration, answered: bool) {
        if answered {
            self.last_answer = Some(now);
        }
        self.recent.push(answered);
        if self.recent.len() > HEALTH_WINDOW {
            self.recent.remove(0);
        }
    }

    /// Silent for [`DEADLINE`] (counted from its start when it never answered), or missing
    /// [`MAX_MISSES`] of its last answers.
    pub fn is_bad(&self, now: Duration) -> bool {
        self.silent(now) || self.recent.iter().filter(|a| !**a).count() >= MAX_MISSES
    }

    /// No answer for [`DEADLINE`] (counted from its start when it never answered).
    pub fn silent(&self, now: Duration) -> bool {
        let since = self.last_answer.unwrap_or(self.started);
        now.saturating_sub(since) > DEADLINE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_drops_fast_and_rises_slowly() {
        let mut b = Baseline::default();
        assert_eq!(b.delta(40.0), 0.0);
        // A queue of 50 ms: the delta shows it whole, the baseline barely moves.
        assert_eq!(b.delta(90.0), 50.0);
        assert!((b.value().unwrap() - 40.05).abs() < 1e-9);
        // A shorter path: taken almost at once, and no negative delta.
        assert_eq!(b.delta(20.0), 0.0);
        assert!(b.value().unwrap() < 22.1);
    }

    #[test]
    fn a_clock_step_is_learnt_again_and_meanwhile_the_round_trip_stands_in() {
        let mut w = OneWay::default();
        assert_eq!(
            w.deltas(10.0, 10.0, 0.0),
            Deltas::OneWay { down: 0.0, up: 0.0 }
        );
        // A queue of 40 ms on the way up, in the round trip too: taken as it is.
        assert_eq!(
            w.deltas(10.0, 50.0, 40.0),
            Deltas::OneWay {
                down: 0.0,
                up: 40.0
            }
        );
        // Jitter one way that the round trip does not show: clamped to it.
        assert_eq!(
            w.deltas(10.0, 25.0, 5.0),
            Deltas::OneWay { down: 0.0, up: 5.0 }
        );
        // The reflector's clock steps 5 s back: 5 s "up" less, 5 s "down" more.
        assert_eq!(w.deltas(5_010.0, -4_990.0, 0.0), Deltas::Rtt(0.0));
        assert!(w.relearning());
        for _ in 1..RELEARN_SAMPLES {
            assert_eq!(w.deltas(5_010.0, -4_990.0, 4.0), Deltas::Rtt(4.0));
        }
        assert!(!w.relearning());
        // Learnt again: a queue down shows down.
        assert_eq!(
            w.deltas(5_040.0, -4_990.0, 30.0),
            Deltas::OneWay {
                down: 30.0,
                up: 0.0
            }
        );
    }

    #[test]
    fn one_way_baselines_learnt_during_a_queue_are_learnt_again() {
        let mut w = OneWay::default();
        // The first answer came during a 200 ms queue down, which the round trip's baseline
        // (older) knows of and the new one-way baselines do not.
        w.deltas(210.0, 10.0, 200.0);
        assert_eq!(w.deltas(210.0, 10.0, 200.0), Deltas::Rtt(200.0));
    }

    #[test]
    fn silence_or_repeated_misses_make_a_reflector_bad() {
        let s = Duration::from_millis;
        let mut h = Health::new(s(0));
        assert!(!h.is_bad(s(900)));
        assert!(h.is_bad(s(1_100)), "never answered within the deadline");
        h.record(s(1_200), true);
        assert!(!h.is_bad(s(1_300)));
        for t in [1_500, 1_800] {
            h.record(s(t), false);
        }
        assert!(!h.is_bad(s(1_900)));
        h.record(s(2_000), false);
        assert!(h.is_bad(s(2_000)), "three misses");
    }
}
