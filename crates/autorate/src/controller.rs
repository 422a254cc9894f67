//! The whole controller: the reflectors' answers and the interface's achieved rates in, both
//! directions' rates out, with a record of every tick for the log.
//!
//! - **Samples.** An ICMP timestamp answer gives each direction its own one-way delta. An echo
//!   gives only the round trip, which cannot say which way the queue is: its delta goes to each
//!   direction that carried at least [`Settings::blame_load`] of its rate at the last tick (and
//!   to both when neither did); the other direction hears a clean sample. So a download that
//!   bloats the link does not also cut an upload that only carries its ACKs.
//! - **Ticks** ([`Config::tick`], cake-autorate's `monitor_achieved_rates_interval_ms`), and at
//!   once when an answer makes bloat certain: each direction moves ([`crate::direction`]),
//!   probes that ran out of time count as misses, and bad reflectors are replaced
//!   ([`crate::reflectors`]).
//! - **Idle.** After [`Config::idle_after`] with both directions under a tenth of their minimum
//!   rate, each reflector is probed every [`Config::idle_interval`] instead of every
//!   [`Config::interval`]; the first busy tick brings the fast pace back. An idle link needs no
//!   fast answers, and its probes are what a metered LTE link pays for.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use unbloat_units::Rate;

use crate::direction::{ratio, Bounds, Direction, Move, Settings, Way};
use crate::probe::{Delay, Method, Probe};
use crate::reflectors::{Deltas, Pool, Replaced};

/// Everything the controller is told up front.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub down: Bounds,
    pub up: Bounds,
    pub settings: Settings,
    /// Every reflector, in order of preference; the first [`Config::active`] are probed.
    pub reflectors: Vec<IpAddr>,
    pub probe: Probe,
    pub active: usize,
    pub interval: Duration,
    pub idle_interval: Duration,
    pub idle_after: Duration,
    pub tick: Duration,
}

impl Config {
    /// cake-autorate's pace: 6 reflectors, each every 0.3 s (20 samples a second), rates
    /// looked at every 0.2 s; when idle for 30 s, each reflector every 2 s.
    pub fn new(down: Bounds, up: Bounds, reflectors: Vec<IpAddr>) -> Config {
        Config {
            down,
            up,
            settings: Settings::default(),
            reflectors,
            probe: Probe::Auto,
            active: 6,
            interval: Duration::from_millis(300),
            idle_interval: Duration::from_secs(2),
            idle_after: Duration::from_secs(30),
            tick: Duration::from_millis(200),
        }
    }
}

impl Config {
    /// [`Config::new`] with the user's probing: `active` reflectors probed at once, `probe`,
    /// and the delay over baseline that counts as delayed.
    pub fn probing(
        down: Bounds,
        up: Bounds,
        reflectors: Vec<IpAddr>,
        active: usize,
        probe: Probe,
        threshold: unbloat_units::Time,
    ) -> Config {
        let mut cfg = Config::new(down, up, reflectors);
        cfg.active = active;
        cfg.probe = probe;
        cfg.settings.delay_threshold_ms = threshold.millis_f64();
        cfg
    }
}

/// One direction at one tick, for the log (rates as bits per second, for plotting tools).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DirTick {
    /// The rate set from this tick on.
    #[serde(rename = "rate_bps", serialize_with = "bps")]
    pub rate: Rate,
    /// What the interface carried since the last tick.
    #[serde(rename = "achieved_bps", serialize_with = "bps")]
    pub achieved: Rate,
    /// The recent deltas' average, in milliseconds.
    pub delta_ms: f64,
    #[serde(rename = "move", serialize_with = "move_name")]
    pub moved: Move,
}

fn bps<S: serde::Serializer>(r: &Rate, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(r.bits_per_sec())
}

fn move_name<S: serde::Serializer>(m: &Move, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(m.name())
}

/// What one tick saw and did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tick {
    /// Seconds since the controller started.
    pub t: f64,
    pub down: DirTick,
    pub up: DirTick,
    /// Reflectors swapped out at this tick.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<Replaced>,
    /// Probing slowed (true) or sped up again (false) at this tick.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle: Option<bool>,
}

impl Tick {
    /// Either direction fell back to its base rate for want of answers.
    pub fn stalled(&self) -> bool {
        self.down.moved == Move::Stalled || self.up.moved == Move::Stalled
    }
}

pub struct Controller {
    cfg: Config,
    pool: Pool,
    down: Direction,
    up: Direction,
    /// The loads (achieved / rate) at the last tick, for blaming a round trip.
    loads: (f64, f64),
    busy_at: Duration,
    idle: bool,
}

impl Controller {
    pub fn new(cfg: Config, now: Duration) -> Controller {
        let pool = Pool::new(&cfg.reflectors, cfg.probe, cfg.active, cfg.interval, now);
        let mut down = Direction::new(cfg.down, Way::Down, cfg.settings.clone());
        let mut up = Direction::new(cfg.up, Way::Up, cfg.settings.clone());
        let stall = stall_after(&cfg, cfg.interval);
        down.set_stall_after(stall);
        up.set_stall_after(stall);
        Controller {
            pool,
            down,
            up,
            loads: (0.0, 0.0),
            busy_at: now,
            idle: false,
            cfg,
        }
    }

    pub fn rates(&self) -> (Rate, Rate) {
        (self.down.rate(), self.up.rate())
    }

    pub fn reflectors(&self) -> Vec<IpAddr> {
        self.pool.active()
    }

    /// The reflectors to probe now, and how.
    pub fn due(&mut self, now: Duration) -> Vec<(IpAddr, Method)> {
        self.pool.due(now)
    }

    /// When the next probe or tick is due, whichever comes first, given the last tick's time.
    pub fn next_wake(&self, last_tick: Duration) -> Duration {
        let tick = last_tick + self.cfg.tick;
        self.pool.next_due().map_or(tick, |p| p.min(tick))
    }

    pub fn sent(&mut self, seq: u32, to: IpAddr, now: Duration) {
        self.pool.sent(seq, to, now);
    }

    /// An answer to probe `seq` from `from`. True when it made a direction's bloat certain and
    /// a cut may come: the caller ticks now rather than at the next tick (cake-autorate acts on
    /// every answer too; the queue grows while we wait).
    pub fn answered(&mut self, seq: u32, from: IpAddr, delay: Delay, now: Duration) -> bool {
        match self.pool.answered(seq, from, delay, now) {
            Some(Deltas::OneWay { down, up }) => {
                self.down.sample(now, down);
                self.up.sample(now, up);
            }
            Some(Deltas::Rtt(delta)) => {
                let b = self.cfg.settings.blame_load;
                let (down_loaded, up_loaded) = (self.loads.0 >= b, self.loads.1 >= b);
                let neither = !down_loaded && !up_loaded;
                for (dir, blamed) in [
                    (&mut self.down, down_loaded || neither),
                    (&mut self.up, up_loaded || neither),
                ] {
                    if blamed {
                        dir.sample(now, delta);
                    } else {
                        dir.heard(now);
                    }
                }
            }
            None => return false,
        }
        self.down.wants_cut(now) || self.up.wants_cut(now)
    }

    /// Moves both rates with what the interface carried since the last tick.
    pub fn tick(&mut self, now: Duration, since: Duration, achieved: (Rate, Rate)) -> Tick {
        let replaced = self.pool.check(now);
        self.loads = (
            ratio(achieved.0, self.down.rate()),
            ratio(achieved.1, self.up.rate()),
        );
        let idle = self.track_idle(now, achieved);
        let dir = |d: &mut Direction, a: Rate| {
            let moved = d.tick(now, a);
            DirTick {
                rate: d.rate(),
                achieved: a,
                delta_ms: d.avg_delta_ms(),
                moved,
            }
        };
        Tick {
            t: now.saturating_sub(since).as_secs_f64(),
            down: dir(&mut self.down, achieved.0),
            up: dir(&mut self.up, achieved.1),
            replaced,
            idle,
        }
    }

    /// Slows or speeds up the probes; says when it changed.
    fn track_idle(&mut self, now: Duration, achieved: (Rate, Rate)) -> Option<bool> {
        let quiet = |a: Rate, b: &Bounds| a.bits_per_sec() * 10 < b.min.bits_per_sec();
        if !(quiet(achieved.0, &self.cfg.down) && quiet(achieved.1, &self.cfg.up)) {
            self.busy_at = now;
        }
        let idle = now.saturating_sub(self.busy_at) >= self.cfg.idle_after;
        if idle == self.idle {
            return None;
        }
        self.idle = idle;
        let interval = if idle {
            self.cfg.idle_interval
        } else {
            self.cfg.interval
        };
        self.pool.set_interval(interval, now);
        let stall = stall_after(&self.cfg, interval);
        self.down.set_stall_after(stall);
        self.up.set_stall_after(stall);
        Some(idle)
    }
}

/// No answer for this long means every reflector has gone: 2 s, or two rounds of the slow pace
/// when a single reflector is probed at it.
fn stall_after(cfg: &Config, interval: Duration) -> Duration {
    let per_sample = interval / cfg.active.clamp(1, cfg.reflectors.len().max(1)) as u32;
    Duration::from_secs(2).max(per_sample * 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn cfg(n: u8) -> Config {
        let b = Bounds {
            min: Rate::from_mbit(2),
            base: Rate::from_mbit(10),
            max: Rate::from_mbit(50),
        };
        let mut c = Config::new(b, b, (1..=n).map(|i| IpAddr::from([10, 0, 0, i])).collect());
        c.probe = Probe::Echo;
        c
    }

    /// Runs the controller from `t0` to `t1` ms: every reflector answers with `delay(t)`
    /// unless `silent(addr)`, and the link carries `carried(rates)`. Returns the ticks.
    fn run(
        c: &mut Controller,
        seq: &mut u32,
        (t0, t1): (u64, u64),
        delay: impl Fn(u64) -> Delay,
        silent: impl Fn(IpAddr) -> bool,
        carried: impl Fn((Rate, Rate)) -> (Rate, Rate),
    ) -> Vec<Tick> {
        let mut ticks = Vec::new();
        let mut t = t0;
        while t < t1 {
            for (addr, _) in c.due(MS(t)) {
                *seq += 1;
                c.sent(*seq, addr, MS(t));
                if !silent(addr) {
                    c.answered(*seq, addr, delay(t), MS(t + 10));
                }
            }
            if t % 200 == 0 {
                let a = carried(c.rates());
                ticks.push(c.tick(MS(t), MS(0), a));
            }
            t += 10;
        }
        ticks
    }

    #[test]
    fn a_round_trip_bloat_cuts_only_the_loaded_direction() {
        let mut c = Controller::new(cfg(6), MS(0));
        let mut seq = 0;
        // Clean, loaded download, idle upload: the download climbs.
        run(
            &mut c,
            &mut seq,
            (0, 2_000),
            |_| Delay::Rtt(20.0),
            |_| false,
            |(d, _)| (d, Rate::from_kbit(100)),
        );
        let (down, up) = c.rates();
        assert!(down > Rate::from_mbit(10), "{down}");
        // The link now carries 6 Mbit/s down and the round trip shows 60 ms of queue.
        let ticks = run(
            &mut c,
            &mut seq,
            (2_000, 3_000),
            |_| Delay::Rtt(80.0),
            |_| false,
            |_| (Rate::from_mbit(6), Rate::from_kbit(100)),
        );
        let (d2, u2) = c.rates();
        // Cut from its rate (see `Way`), by more than a fifth within the second.
        assert!(
            d2.bits_per_sec() < down.bits_per_sec() * 8 / 10,
            "down cut from {down} to {d2}"
        );
        assert!(ticks
            .iter()
            .any(|t| matches!(t.down.moved, Move::Bloat { .. })));
        assert!(
            !ticks
                .iter()
                .any(|t| matches!(t.up.moved, Move::Bloat { .. })),
            "{ticks:?}"
        );
        assert!(u2 >= up.min(Rate::from_mbit(10)), "upload untouched: {u2}");
    }

    #[test]
    fn one_way_delays_cut_the_direction_that_queues() {
        let mut c = Controller::new(cfg(6), MS(0));
        let mut seq = 0;
        let full = |(d, u): (Rate, Rate)| (d, u);
        run(
            &mut c,
            &mut seq,
            (0, 1_000),
            |_| Delay::OneWay {
                down: 10.0,
                up: 10.0,
                rtt: 20.0,
            },
            |_| false,
            full,
        );
        let ticks = run(
            &mut c,
            &mut seq,
            (1_000, 2_000),
            |_| Delay::OneWay {
                down: 10.0,
                up: 70.0,
                rtt: 80.0,
            },
            |_| false,
            full,
        );
        assert!(ticks
            .iter()
            .any(|t| matches!(t.up.moved, Move::Bloat { .. })));
        assert!(!ticks
            .iter()
            .any(|t| matches!(t.down.moved, Move::Bloat { .. })));
    }

    /// Issue 36 item 4: the wall clock steps 5 s forward (NTP after a boot without a real-time
    /// clock): every timestamp answer reads 5 s more on the way down and 5 s less on the way
    /// up. The round trip did not change, so neither may the rates: no cut to the minimum, and
    /// within a bounded number of samples the download climbs again.
    #[test]
    fn a_clock_step_in_the_timestamps_does_not_cut_to_the_minimum() {
        let mut c = Controller::new(cfg(6), MS(0));
        let mut seq = 0;
        let full = |(d, u): (Rate, Rate)| (d, u);
        run(
            &mut c,
            &mut seq,
            (0, 2_000),
            |_| Delay::OneWay {
                down: 10.0,
                up: 10.0,
                rtt: 20.0,
            },
            |_| false,
            full,
        );
        let before = c.rates().0;
        let ticks = run(
            &mut c,
            &mut seq,
            (2_000, 12_000),
            |_| Delay::OneWay {
                down: 5_010.0,
                up: -4_990.0,
                rtt: 20.0,
            },
            |_| false,
            full,
        );
        let lowest = ticks.iter().map(|t| t.down.rate).min().unwrap();
        assert!(
            lowest.bits_per_sec() >= before.bits_per_sec() * 9 / 10,
            "a clock step cut the download from {before} to {lowest}"
        );
        assert!(
            c.rates().0 > before,
            "no climb after the step: {}",
            c.rates().0
        );
    }

    #[test]
    fn silent_reflectors_are_replaced_and_when_all_are_gone_the_rates_go_back_to_base() {
        let mut c = Controller::new(cfg(8), MS(0));
        let mut seq = 0;
        let first = c.reflectors();
        let dead = first[0];
        let ticks = run(
            &mut c,
            &mut seq,
            (0, 3_000),
            |_| Delay::Rtt(20.0),
            |a| a == dead,
            |r| r,
        );
        let swaps: Vec<&Replaced> = ticks.iter().flat_map(|t| &t.replaced).collect();
        assert_eq!(swaps.len(), 1, "{swaps:?}");
        assert_eq!(swaps[0].out, dead);
        assert!(!c.reflectors().contains(&dead));
        assert!(
            c.rates().0 > Rate::from_mbit(10),
            "climbed while loaded and clean"
        );
        // Now nothing answers.
        let ticks = run(
            &mut c,
            &mut seq,
            (3_000, 7_000),
            |_| Delay::Rtt(20.0),
            |_| true,
            |r| r,
        );
        assert!(ticks.iter().any(Tick::stalled));
        assert_eq!(c.rates(), (Rate::from_mbit(10), Rate::from_mbit(10)));
    }

    #[test]
    fn an_idle_link_is_probed_slowly_and_a_busy_one_fast_again() {
        let mut c = Controller::new(cfg(6), MS(0));
        let mut seq = 0;
        let idle = |_| (Rate::from_kbit(10), Rate::from_kbit(10));
        let ticks = run(
            &mut c,
            &mut seq,
            (0, 31_000),
            |_| Delay::Rtt(20.0),
            |_| false,
            idle,
        );
        assert_eq!(ticks.iter().filter(|t| t.idle == Some(true)).count(), 1);
        let before = seq;
        let ticks = run(
            &mut c,
            &mut seq,
            (31_000, 41_000),
            |_| Delay::Rtt(20.0),
            |_| false,
            idle,
        );
        // 6 reflectors every 2 s for 10 s, and no stall for want of answers.
        assert!((seq - before).abs_diff(30) <= 6, "{}", seq - before);
        assert!(!ticks.iter().any(Tick::stalled));
        let ticks = run(
            &mut c,
            &mut seq,
            (41_000, 42_000),
            |_| Delay::Rtt(20.0),
            |_| false,
            |r| r,
        );
        assert_eq!(ticks.iter().filter(|t| t.idle == Some(false)).count(), 1);
    }
}
