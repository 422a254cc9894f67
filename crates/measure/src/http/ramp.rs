//! When to add load connections: the draft's saturation rule, as a pure state machine.
//!
//! draft-ietf-ippm-responsiveness, "Reaching Working Conditions": the client opens a few
//! load-generating connections per direction and, each interval, adds more while the aggregate
//! goodput still increases; once adding connections no longer raises goodput, the link is at
//! working conditions and the set stays as it is. (Later revisions judge "no longer raises" with
//! a moving average and a 5 % tolerance; this keeps the 5 % tolerance and asks for two intervals
//! in a row without a rise, so one noisy interval does not end the ramp early.)
//!
//! What callers can rely on: [`Ramp::next`] never asks for more than `max - open` connections,
//! and once it said "saturated" it asks for none again.

/// Goodput must beat the best interval so far by this fraction to count as rising (the
/// draft's 5 % stability tolerance).
pub const RISE: f64 = 0.05;
/// Intervals in a row without a rise before the direction counts as saturated.
pub const FLAT_INTERVALS: u32 = 2;

/// The ramp of one direction.
#[derive(Debug, Clone)]
pub struct Ramp {
    step: usize,
    max: usize,
    best_bps: f64,
    flat: u32,
    saturated_at: Option<usize>,
}

impl Ramp {
    /// `step` connections are added per rising interval, up to `max` in all.
    pub fn new(step: usize, max: usize) -> Ramp {
        Ramp {
            step,
            max,
            best_bps: 0.0,
            flat: 0,
            saturated_at: None,
        }
    }

    /// The goodput of the interval that just ended, with `open` connections: how many to add.
    pub fn next(&mut self, goodput_bps: f64, open: usize) -> usize {
        if self.saturated_at.is_some() {
            return 0;
        }
        if goodput_bps > self.best_bps * (1.0 + RISE) {
            self.best_bps = goodput_bps;
            self.flat = 0;
        } else {
            self.best_bps = self.best_bps.max(goodput_bps);
            self.flat += 1;
            if self.flat >= FLAT_INTERVALS {
                self.saturated_at = Some(open);
                return 0;
            }
            // Flat once: wait an interval before adding more, the new ones may still ramp up.
            return 0;
        }
        if open >= self.max {
            self.saturated_at = Some(open);
            return 0;
        }
        self.step.min(self.max - open)
    }

    /// The connection count at which goodput stopped rising (or the maximum was reached).
    pub fn saturated_at(&self) -> Option<usize> {
        self.saturated_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_while_rising_and_stops_after_two_flat_intervals() {
        let mut r = Ramp::new(4, 16);
        assert_eq!(r.next(10e6, 4), 4);
        assert_eq!(r.next(18e6, 8), 4);
        assert_eq!(r.next(18.5e6, 12), 0, "< 5 % rise: wait");
        assert_eq!(r.next(30e6, 12), 4, "rising again");
        assert_eq!(r.next(30e6, 16), 0);
        assert_eq!(r.next(29e6, 16), 0);
        assert_eq!(r.saturated_at(), Some(16));
        assert_eq!(r.next(90e6, 16), 0, "saturated stays saturated");
    }

    #[test]
    fn never_exceeds_the_maximum() {
        let mut r = Ramp::new(4, 6);
        assert_eq!(r.next(1e6, 4), 2);
        assert_eq!(r.next(2e6, 6), 0);
        assert_eq!(r.saturated_at(), Some(6));
    }
}
