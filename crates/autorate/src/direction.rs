//! One direction's shaper rate, moved by what the link shows.
//!
//! Each delay sample's delta (over its reflector's baseline) goes into a short window; bloat is
//! [`Settings::detect`] delayed samples out of the last [`Settings::window`], a delayed sample
//! one over the threshold plus a full packet's time at the current rate. At each tick, with
//! the rate the interface achieved since the last one:
//! - **bloat**: down by a factor from 0.99 (delta just over the threshold) to 0.75 (delta three
//!   thresholds over it), from one of two rates. The upload is cut from what it carried, so a
//!   link whose rate halved is caught in one cut. The download is cut from its rate, as
//!   cake-autorate does, unless the link *holds its rate*: this overshoot carried within 10 %
//!   of what one of the last three did, within [`Settings::memory`]; then it too is cut from
//!   what it carried. On the T-Mobile trace a download carried under 70 % of its rate at three
//!   cuts in four (TCP after a burst of loss, and the cell's own bursts), and cuts from that
//!   cost a third of its goodput; the upload's cuts from its rate let rrul's p99 grow by more
//!   than a third (see [`Way`]). A direction that carried under [`Settings::blame_load`] of its
//!   rate is always cut from its rate, since what it carried says nothing of the link. Then the
//!   window starts afresh, and no other cut comes within [`Settings::bloat_refractory`]; cuts
//!   less than [`EPISODE`] apart are one episode, and only its first is an overshoot;
//! - **loaded and clean** (achieved over [`Settings::high_load`] of the rate): up by 4 % while
//!   the mean delta is under half the threshold, less as it nears the threshold, and more (up to
//!   10 %) the longer the load has stayed clean; but after an overshoot on a link that holds its
//!   rate, by at most 0.75 % from 3 % under to 10 % over what it carried, for
//!   [`Settings::memory`]: the climb back is fast, the probe past the point where the queue
//!   last built slow, and fast again beyond it (CUBIC's shape, in steps), so the sawtooth's
//!   peaks overshoot less and a link that grew is still found in seconds. On a link whose rate
//!   keeps moving, the slow probe held the rate under a link that had already come back;
//! - **light load**: back towards the base rate by 1 % at most every [`Settings::decay_every`]:
//!   an idle link is not probed for capacity it may no longer have.
//!
//! Rates stay within min..max. With no delay sample for [`Settings::stall_after`] (every
//! reflector gone), the rate falls back to base and [`Move::Stalled`] says so.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;
use unbloat_units::Rate;

/// The rates a direction may take: the config's type, so a table and the flags check theirs
/// alike ([`Bounds::new`]).
pub use unbloat_shaper::autorate_config::RateBounds as Bounds;
use unbloat_shaper::autorate_config::DEFAULT_THRESHOLD;

/// Cuts closer together than this are one episode: the queue of one overshoot draining.
pub const EPISODE: Duration = Duration::from_secs(1);

/// How many overshoots back a link that holds its rate may have shown it.
const OVERSHOOTS: usize = 3;

/// Which way a direction's traffic goes: what its cuts start from.
///
/// Measured with `unbloat-lab bench autorate` (1 run each): cutting the download from what it
/// carried whenever that was under 75 % of its rate gave 43.5 % of the T-Mobile trace's
/// capacity, against 64.1 % from its rate (3 runs of the old controller, which always cut
/// from what was carried: 45.9 %); cutting the upload from its rate gave rrul a p99 of
/// 1188 ms on the Verizon trace against 862 ms from what it carried (cake-autorate: 1059).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    Down,
    Up,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    /// A sample this far over its baseline counts as delayed, plus a full packet's time on the
    /// wire at the current rate ([`Settings::packet_bits`]).
    pub delay_threshold_ms: f64,
    /// The largest packet on the wire, in bits. At a low rate, a probe that waits behind one
    /// packet in the shaper is delayed by the shaper's own serialization, not by a queue: at
    /// 0.5 Mbit/s a 1538-byte frame takes 25 ms, more than the threshold, and counted as
    /// bloat it held the rate at its minimum while the link carried ten times as much
    /// (cake-autorate compensates its thresholds the same way).
    pub packet_bits: u64,
    pub window: usize,
    pub detect: usize,
    pub high_load: f64,
    /// Under this share of its rate, what a direction carried is not the link's measure.
    pub blame_load: f64,
    pub bloat_refractory: Duration,
    /// How long the rate carried at an overshoot slows the climb past it.
    pub memory: Duration,
    pub decay_every: Duration,
    pub stall_after: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            delay_threshold_ms: DEFAULT_THRESHOLD.millis_f64(),
            packet_bits: 1538 * 8,
            window: 6,
            detect: 3,
            high_load: 0.75,
            blame_load: 0.3,
            bloat_refractory: Duration::from_millis(300),
            memory: Duration::from_secs(10),
            decay_every: Duration::from_secs(1),
            stall_after: Duration::from_secs(2),
        }
    }
}

/// What a tick did, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "move", rename_all = "snake_case")]
pub enum Move {
    Hold,
    Bloat { achieved: Rate },
    Up,
    Decay,
    Stalled,
}

impl Move {
    /// The move's name in the log.
    pub fn name(&self) -> &'static str {
        match self {
            Move::Hold => "hold",
            Move::Bloat { .. } => "bloat",
            Move::Up => "up",
            Move::Decay => "decay",
            Move::Stalled => "stalled",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Direction {
    pub bounds: Bounds,
    way: Way,
    settings: Settings,
    rate: Rate,
    /// The last [`Settings::window`] deltas (0 for a sample that is not this direction's).
    deltas: VecDeque<f64>,
    last_sample: Option<Duration>,
    last_cut: Option<Duration>,
    /// What the link carried at the last overshoot, if it held its rate there.
    bloat_at: Option<Rate>,
    /// When the last [`OVERSHOOTS`] overshoots were, and what the link carried at each.
    overshoots: VecDeque<(Duration, Rate)>,
    last_decay: Duration,
    /// Since when the direction has been loaded and clean, without a cut.
    climbing_since: Option<Duration>,
}

impl Direction {
    pub fn new(bounds: Bounds, way: Way, settings: Settings) -> Direction {
        Direction {
            bounds,
            way,
            settings,
            rate: bounds.base,
            deltas: VecDeque::new(),
            last_sample: None,
            last_cut: None,
            bloat_at: None,
            overshoots: VecDeque::new(),
            last_decay: Duration::ZERO,
            climbing_since: None,
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The recent deltas' average, in milliseconds.
    /// The window's mean delta: how hard to cut, how freely to climb (cake-autorate's
    /// `avg_owd_delta`).
    pub fn avg_delta_ms(&self) -> f64 {
        self.deltas.iter().sum::<f64>() / self.deltas.len().max(1) as f64
    }

    fn push(&mut self, delta_ms: f64) {
        self.deltas.push_back(delta_ms.max(0.0));
        while self.deltas.len() > self.settings.window {
            self.deltas.pop_front();
        }
    }

    /// How long without a sample before falling back to base (longer while probing is slow).
    pub fn set_stall_after(&mut self, after: Duration) {
        self.settings.stall_after = after;
    }

    /// A sample that says nothing about this direction's delay (a round trip while only the
    /// other direction is loaded): counted as clean, and as a sign the reflectors answer.
    pub fn heard(&mut self, now: Duration) {
        self.push(0.0);
        self.last_sample = Some(now);
    }

    /// A delay sample's delta over its reflector's baseline, at `now`.
    pub fn sample(&mut self, now: Duration, delta_ms: f64) {
        self.push(delta_ms);
        self.last_sample = Some(now);
    }

    /// Bloat is detected and a cut may come now: worth a tick before the next one is due.
    pub fn wants_cut(&self, now: Duration) -> bool {
        self.bloated()
            && self
                .last_cut
                .is_none_or(|t| now.saturating_sub(t) >= self.settings.bloat_refractory)
    }

    /// The packet's time on the wire at the current rate, in milliseconds.
    fn wire_ms(&self) -> f64 {
        self.settings.packet_bits as f64 * 1000.0 / self.rate.bits_per_sec().max(1) as f64
    }

    /// The threshold at the current rate: the configured one plus [`Direction::wire_ms`].
    fn threshold_ms(&self) -> f64 {
        self.settings.delay_threshold_ms + self.wire_ms()
    }

    fn bloated(&self) -> bool {
        let thr = self.threshold_ms();
        self.deltas.iter().filter(|d| **d > thr).count() >= self.settings.detect
    }

    /// The new rate at `now`, given what the interface carried since the last tick.
    pub fn tick(&mut self, now: Duration, achieved: Rate) -> Move {
        let s = &self.settings;
        let b = self.bounds;
        let stalled = self
            .last_sample
            .is_none_or(|t| now.saturating_sub(t) > s.stall_after)
            && now > s.stall_after;
        if stalled {
            self.rate = b.base;
            return Move::Stalled;
        }
        let thr = self.threshold_ms();
        // What the direction carried, as a share of its rate: what a cut starts from, and
        // whether the climb may go on.
        let load = ratio(achieved, self.rate);
        let clamp = |r: Rate| r.max(b.min).min(b.max);
        let since_cut = self.last_cut.map(|t| now.saturating_sub(t));
        let cut_allowed = since_cut.is_none_or(|d| d >= s.bloat_refractory);
        if self.bloated() {
            self.climbing_since = None;
            if !cut_allowed {
                return Move::Hold;
            }
            // 0 at the threshold, 1 at three configured thresholds over it.
            let depth =
                ((self.avg_delta_ms() - thr) / (3.0 * s.delay_threshold_ms)).clamp(0.0, 1.0);
            let factor = 0.99 - depth * (0.99 - 0.75);
            let carried = achieved.min(self.rate);
            let over = load >= s.high_load;
            let holds = over
                && self.overshoots.iter().any(|&(t, r)| {
                    now.saturating_sub(t) < s.memory && (0.9..1.1).contains(&ratio(carried, r))
                });
            let from = if load >= s.blame_load && (holds || self.way == Way::Up) {
                carried
            } else {
                self.rate
            };
            self.rate = clamp(scale(from, factor));
            if since_cut.is_none_or(|d| d >= EPISODE) {
                self.bloat_at = holds.then_some(carried);
                if over {
                    self.overshoots.push_back((now, carried));
                    if self.overshoots.len() > OVERSHOOTS {
                        self.overshoots.pop_front();
                    }
                }
            }
            self.deltas.clear();
            self.last_cut = Some(now);
            return Move::Bloat { achieved };
        }
        if load > s.high_load {
            // The full step up to half the configured threshold over the wire time, none at
            // the threshold (cake-autorate's shape: 1 up to 10 ms, 0 at 30): on a jittery
            // link the clean deltas sit near half the threshold, and a step scaled down from
            // 0 ms climbed at half speed after every dip.
            let half = s.delay_threshold_ms / 2.0;
            let room = ((thr - self.avg_delta_ms()) / half).clamp(0.0, 1.0);
            let recent = since_cut.is_some_and(|d| d < s.memory);
            let near = self
                .bloat_at
                .filter(|_| recent)
                .is_some_and(|at| (0.97..1.1).contains(&ratio(self.rate, at)));
            // The step grows from 4 % to 10 % over the first 4.5 s loaded and clean:
            // after a dip a link comes back faster than 4 % a tick climbs (from a dip to 0.5
            // Mbit/s to 6 took 12 s on the Verizon trace), and a climb that has been clean
            // for seconds is not near the link's rate. Past the slow probe it starts again at 4 %.
            let step = if near {
                self.climbing_since = Some(now);
                0.0075
            } else {
                let since = now.saturating_sub(*self.climbing_since.get_or_insert(now));
                0.04 * (1.0 + since.as_secs_f64() / 3.0).min(2.5)
            };
            let up = clamp(scale(self.rate, 1.0 + step * room));
            if up == self.rate {
                return Move::Hold;
            }
            self.rate = up;
            return Move::Up;
        }
        self.climbing_since = None;
        if now.saturating_sub(self.last_decay) >= s.decay_every && self.rate != b.base {
            self.last_decay = now;
            self.rate = if self.rate > b.base {
                scale(self.rate, 0.99).max(b.base)
            } else {
                scale(self.rate, 1.01).min(b.base)
            };
            return Move::Decay;
        }
        Move::Hold
    }
}

/// `a` over `b`.
pub(crate) fn ratio(a: Rate, b: Rate) -> f64 {
    a.bits_per_sec() as f64 / b.bits_per_sec().max(1) as f64
}

fn scale(r: Rate, f: f64) -> Rate {
    Rate::from_bits_per_sec((r.bits_per_sec() as f64 * f).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// A download between 2 and 50 Mbit/s, at its base of 10.
    fn dir() -> Direction {
        way(Way::Down)
    }

    fn way(way: Way) -> Direction {
        let bounds = Bounds {
            min: Rate::from_mbit(2),
            base: Rate::from_mbit(10),
            max: Rate::from_mbit(50),
        };
        Direction::new(bounds, way, Settings::default())
    }

    /// `n` samples of `delta`, 50 ms apart from `t`; the time after them.
    fn feed(d: &mut Direction, t: u64, n: u64, delta: f64) -> u64 {
        for i in 0..n {
            d.sample(MS(t + i * 50), delta);
        }
        t + n * 50
    }

    /// `n` ticks of a clean link carrying all of the rate, from `t`: the time after them and
    /// each tick's step (new rate over old).
    fn climb(d: &mut Direction, mut t: u64, n: usize) -> (u64, Vec<f64>) {
        let mut steps = vec![];
        for _ in 0..n {
            t = feed(d, t, 4, 0.0);
            let before = d.rate();
            d.tick(MS(t), before);
            steps.push(ratio(d.rate(), before));
        }
        (t, steps)
    }

    #[test]
    fn a_loaded_clean_link_climbs_and_stops_at_max() {
        let mut d = dir();
        let mut t = 0;
        for _ in 0..200 {
            t = feed(&mut d, t, 4, 1.0);
            let full = d.rate();
            d.tick(MS(t), full);
        }
        assert_eq!(d.rate(), Rate::from_mbit(50));
        assert_eq!(d.tick(MS(t + 10), Rate::from_mbit(50)), Move::Hold);
    }

    #[test]
    fn bloat_cuts_the_upload_below_what_it_carried_then_waits_out_the_refractory_period() {
        let mut d = way(Way::Up);
        let t = feed(&mut d, 0, 6, 40.0);
        let achieved = Rate::from_mbit(8);
        assert_eq!(d.tick(MS(t), achieved), Move::Bloat { achieved });
        assert!(d.rate() < achieved, "{}", d.rate());
        assert!(d.rate() >= Rate::from_mbit(6), "{}", d.rate());
        let after = d.rate();
        // Bloat again at once: held until the refractory period ends.
        let t = feed(&mut d, t, 6, 40.0);
        assert_eq!(d.tick(MS(t - 100), achieved), Move::Hold);
        assert_eq!(d.rate(), after);
        assert!(matches!(d.tick(MS(t + 300), achieved), Move::Bloat { .. }));
        assert!(d.rate() < after);
    }

    #[test]
    fn the_download_is_cut_from_its_rate_until_the_link_holds_one() {
        let mut d = dir();
        // 2.5 times the threshold (a cut of 13 %) while the download carried 8 of its 10
        // Mbit/s: from its rate, since one overshoot says little of an LTE link.
        let t = feed(&mut d, 0, 6, 50.0);
        d.tick(MS(t), Rate::from_mbit(8));
        let first = d.rate();
        assert!(
            first > Rate::from_mbit(8) && first < Rate::from_mbit(9),
            "{first}"
        );
        // Back over 10 (under 10.67, so 8 is still 75 % of it), and it overshoots carrying 8
        // again: the link holds 8.
        let (t, _) = climb(&mut d, t + 1_000, 4);
        assert!(d.rate() > Rate::from_mbit(10), "{}", d.rate());
        let t = feed(&mut d, t, 6, 50.0);
        d.tick(MS(t), Rate::from_mbit(8));
        assert!(d.rate() < Rate::from_mbit(8), "{}", d.rate());
    }

    #[test]
    fn the_climb_slows_only_where_the_link_has_held_its_rate() {
        // Two overshoots carrying 10 Mbit/s, 2.5 times the threshold each.
        let mut d = dir();
        let mut t = 0;
        let mut steps = vec![];
        for _ in 0..2 {
            d.rate = Rate::from_mbit(11);
            t = feed(&mut d, t, 6, 50.0);
            d.tick(MS(t), Rate::from_mbit(10));
            // Clean and loaded: fast while well under what it carried, slow near it.
            (t, steps) = climb(&mut d, t + 1_000, 10);
        }
        assert!(steps[0] > 1.035, "{steps:?}");
        assert!(steps.last().is_some_and(|s| *s < 1.008), "{steps:?}");
        // One overshoot alone, at 10 Mbit/s: the climb stays fast past it.
        let mut d = dir();
        d.rate = Rate::from_mbit(11);
        let t = feed(&mut d, 0, 6, 50.0);
        d.tick(MS(t), Rate::from_mbit(10));
        let (_, steps) = climb(&mut d, t + 1_000, 10);
        assert!(steps.iter().all(|s| *s > 1.035), "{steps:?}");
    }

    #[test]
    fn a_full_packet_at_a_low_rate_is_not_bloat() {
        let bounds = Bounds {
            min: Rate::from_kbit(500),
            base: Rate::from_kbit(500),
            max: Rate::from_mbit(50),
        };
        let mut d = Direction::new(bounds, Way::Down, Settings::default());
        // 30 ms over the baseline: a 1538-byte frame's 24.6 ms at 500 kbit/s and a little.
        let t = feed(&mut d, 0, 6, 30.0);
        assert!(!d.wants_cut(MS(t)));
        assert!(!matches!(
            d.tick(MS(t), Rate::from_kbit(500)),
            Move::Bloat { .. }
        ));
        // 50 ms is a queue at any rate.
        let t = feed(&mut d, t, 6, 50.0);
        assert!(matches!(
            d.tick(MS(t), Rate::from_kbit(500)),
            Move::Bloat { .. }
        ));
        // At 10 Mbit/s the frame takes 1.2 ms: 30 ms is bloat there.
        let mut d = dir();
        let t = feed(&mut d, 0, 6, 30.0);
        assert!(matches!(
            d.tick(MS(t), Rate::from_mbit(10)),
            Move::Bloat { .. }
        ));
    }

    #[test]
    fn a_long_clean_climb_speeds_up_and_a_cut_starts_it_again() {
        let mut d = dir();
        // 4.2 s of it, from 10 Mbit/s: 50 would stop it at 4.8 s.
        let (t, steps) = climb(&mut d, 0, 21);
        assert!((steps[0] - 1.04).abs() < 0.001, "{steps:?}");
        assert!(steps[20] > 1.09, "{steps:?}");
        // A cut where the link fell (it carried a third of the rate): the climb back starts
        // at 4 % and is not held near that rate.
        let t = feed(&mut d, t, 6, 60.0);
        let fell = scale(d.rate(), 0.35);
        assert!(matches!(d.tick(MS(t), fell), Move::Bloat { .. }));
        let (_, back) = climb(&mut d, t + 400, 8);
        assert!(back.iter().all(|s| *s > 1.035), "{back:?}");
        assert!(back[0] < 1.045, "{back:?}");
    }

    #[test]
    fn never_below_min_nor_above_max() {
        let mut d = dir();
        let mut t = 0;
        for _ in 0..50 {
            t = feed(&mut d, t, 6, 200.0);
            d.tick(MS(t + 400), Rate::from_kbit(100));
            t += 400;
        }
        assert_eq!(d.rate(), Rate::from_mbit(2));
    }

    #[test]
    fn light_load_decays_towards_base_once_a_second() {
        let mut d = dir();
        let mut t = 0;
        for _ in 0..100 {
            t = feed(&mut d, t, 4, 0.0);
            let r = d.rate();
            d.tick(MS(t), r);
        }
        let high = d.rate();
        assert!(high > Rate::from_mbit(10));
        let t = feed(&mut d, t, 4, 0.0);
        assert_eq!(d.tick(MS(t + 1_000), Rate::ZERO), Move::Decay);
        assert!(d.rate() < high);
        assert_eq!(d.tick(MS(t + 1_100), Rate::ZERO), Move::Hold);
    }

    #[test]
    fn no_samples_for_two_seconds_falls_back_to_base() {
        let mut d = dir();
        let t = feed(&mut d, 0, 6, 40.0);
        d.tick(MS(t), Rate::from_mbit(4));
        assert!(d.rate() < Rate::from_mbit(10));
        assert_eq!(d.tick(MS(t + 2_500), Rate::ZERO), Move::Stalled);
        assert_eq!(d.rate(), Rate::from_mbit(10));
    }

    proptest::proptest! {
        /// Whatever the link does, the rate stays within min..max.
        #[test]
        fn the_rate_stays_within_its_bounds(
            steps in proptest::collection::vec((0.0f64..300.0, 0u64..100_000_000, 1u64..2_000), 1..300)
        ) {
            let mut d = dir();
            let mut t = 0;
            for (delta, achieved, gap) in steps {
                t += gap;
                d.sample(MS(t), delta);
                d.tick(MS(t), Rate::from_bits_per_sec(achieved));
                proptest::prop_assert!(d.rate() >= d.bounds.min && d.rate() <= d.bounds.max, "{}", d.rate());
            }
        }
    }
}
