//! One reflector's delay baseline, and how healthy it is.
//!
//! The baseline is the delay of an empty path. It follows a lower sample quickly (a shorter
//! route, or the queue draining) and a higher one slowly (a longer route), so a queue that builds
//! for seconds shows as a delta over it long before the baseline catches up. The delta of a sample
//! is taken against the baseline as it was before the sample.

use std::time::Duration;

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
