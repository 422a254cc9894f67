//! The reflectors: which ones are probed now, when each is due, which probes are still out, and
//! which ones to replace.
//!
//! A few reflectors are active at a time ([`Pool::new`]'s `active`, cake-autorate's `no_pingers`);
//! the rest of the list waits as spares. Each active reflector is probed every `interval`, its
//! probes staggered so that the samples arrive evenly. A probe not answered within
//! [`DEADLINE`] is a miss for the reflector's health, but an answer that comes later,
//! up to [`LATE_LIMIT`], is still a sample: a queue of seconds is the worst bloat of all, and its
//! answers are late, not lost.
//!
//! A reflector that goes silent or misses too often ([`crate::baseline::Health::is_bad`]) is
//! swapped for the first spare and goes to the back of the spares: it may come back later, when
//! the others fail in turn. Only while another active reflector is healthy, though: when all of
//! them miss at once, the path is at fault (a queue, an outage), not the reflectors, and swapping
//! them would throw their baselines away. With no spare left a bad reflector stays active too;
//! when none answers at all, the directions fall back to their base rate (see
//! [`crate::direction`]).
//!
//! Each reflector keeps its own baselines (one for the round trip, and one per direction with
//! one-way delays, which are held to the round trip: [`crate::baseline::OneWay`]): paths
//! differ, so their delays cannot share one.
//!
//! Pure: times are passed in; the sockets are the caller's.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

/// cake-autorate's default reflectors: public anycast resolvers that answer ping.
pub const DEFAULT_REFLECTORS: &str = "1.1.1.1,1.0.0.1,8.8.8.8,8.8.4.4,9.9.9.9,9.9.9.10,9.9.9.11,\
94.140.14.15,94.140.14.140,94.140.14.141,94.140.15.15,94.140.15.16,208.67.220.2,208.67.220.123,\
208.67.220.220,208.67.222.2,208.67.222.123,185.228.168.9,185.228.168.10";

/// [`DEFAULT_REFLECTORS`] as addresses.
pub fn default_reflectors() -> Vec<std::net::IpAddr> {
    DEFAULT_REFLECTORS
        .split(',')
        .filter_map(|a| a.parse().ok())
        .collect()
}

use serde::Serialize;

use crate::baseline::{Baseline, Health, OneWay, DEADLINE};
use crate::probe::{Delay, Method, Probe};

/// How long an answer is waited for before its probe is forgotten.
pub const LATE_LIMIT: Duration = Duration::from_secs(10);

pub use crate::probe::Deltas;

/// A reflector swapped out, for the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replaced {
    pub out: IpAddr,
    #[serde(rename = "in")]
    pub replacement: IpAddr,
    pub why: &'static str,
}

#[derive(Debug, Clone)]
struct Active {
    addr: IpAddr,
    method: Method,
    /// Ever answered: a timestamp-probed reflector that never has is asked with echo instead.
    answered: bool,
    health: Health,
    rtt: Baseline,
    /// The one-way baselines, held to the round trip (timestamp probes time both).
    one_way: OneWay,
    next_probe: Duration,
}

impl Active {
    fn new(addr: IpAddr, method: Method, now: Duration, first_probe: Duration) -> Active {
        Active {
            addr,
            method,
            answered: false,
            health: Health::new(now),
            rtt: Baseline::default(),
            one_way: OneWay::default(),
            next_probe: first_probe,
        }
    }
}

/// The reflectors in use and in reserve.
#[derive(Debug, Clone)]
pub struct Pool {
    active: Vec<Active>,
    spares: VecDeque<IpAddr>,
    probe: Probe,
    interval: Duration,
    /// Probes sent and not yet answered: sequence -> (reflector, when sent, counted as a miss).
    out: BTreeMap<u32, (IpAddr, Duration, bool)>,
}

impl Pool {
    /// The first `active` reflectors of `list` are probed, the rest wait. Repeats in `list` are
    /// dropped.
    pub fn new(
        list: &[IpAddr],
        probe: Probe,
        active: usize,
        interval: Duration,
        now: Duration,
    ) -> Pool {
        let mut unique: Vec<IpAddr> = Vec::new();
        for a in list {
            if !unique.contains(a) {
                unique.push(*a);
            }
        }
        let n = active.clamp(1, unique.len().max(1)).min(unique.len());
        let spares: VecDeque<IpAddr> = unique.split_off(n).into();
        let mut pool = Pool {
            active: Vec::new(),
            spares,
            probe,
            interval,
            out: BTreeMap::new(),
        };
        for (i, addr) in unique.into_iter().enumerate() {
            let first = now + pool.stagger(i, n);
            pool.active
                .push(Active::new(addr, probe.first(addr), now, first));
        }
        pool
    }

    /// The offset of the `i`th of `n` reflectors within one interval.
    fn stagger(&self, i: usize, n: usize) -> Duration {
        self.interval.mul_f64(i as f64 / n.max(1) as f64)
    }

    pub fn active(&self) -> Vec<IpAddr> {
        self.active.iter().map(|a| a.addr).collect()
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Probes every reflector each `interval` from now on (each keeps its place in the cycle).
    pub fn set_interval(&mut self, interval: Duration, now: Duration) {
        if interval == self.interval {
            return;
        }
        self.interval = interval;
        let n = self.active.len();
        for i in 0..n {
            let at = now + self.stagger(i, n);
            self.active[i].next_probe = at;
        }
    }

    /// The reflectors due for a probe at `now`, and how to probe each; each is then due again an
    /// interval later.
    pub fn due(&mut self, now: Duration) -> Vec<(IpAddr, Method)> {
        let mut due = Vec::new();
        for a in &mut self.active {
            if a.next_probe <= now {
                due.push((a.addr, a.method));
                a.next_probe += self.interval;
                // After a stall of the caller (a suspended process), do not fire a burst.
                if a.next_probe <= now {
                    a.next_probe = now + self.interval;
                }
            }
        }
        due
    }

    /// When the next probe is due, for the caller's wait.
    pub fn next_due(&self) -> Option<Duration> {
        self.active.iter().map(|a| a.next_probe).min()
    }

    /// A probe with sequence `seq` went to `addr` at `now`.
    pub fn sent(&mut self, seq: u32, addr: IpAddr, now: Duration) {
        self.out.insert(seq, (addr, now, false));
    }

    /// An answer to probe `seq`: its deltas over the reflector's baselines, or None when the
    /// probe is not one of ours still out (late, after its deadline, or a stranger's).
    pub fn answered(
        &mut self,
        seq: u32,
        from: IpAddr,
        delay: Delay,
        now: Duration,
    ) -> Option<Deltas> {
        let (addr, _, missed) = self.out.get(&seq).copied()?;
        if addr != from {
            return None;
        }
        self.out.remove(&seq);
        let a = self.active.iter_mut().find(|a| a.addr == addr)?;
        a.answered = true;
        if !missed {
            a.health.record(now, true);
        }
        Some(match delay {
            Delay::Rtt(ms) => Deltas::Rtt(a.rtt.delta(ms)),
            Delay::OneWay { down, up, rtt } => {
                let rtt_delta = a.rtt.delta(rtt);
                a.one_way.deltas(down, up, rtt_delta)
            }
        })
    }

    /// Counts the probes out longer than the deadline as misses (once each), forgets the ones
    /// out longer than [`LATE_LIMIT`], then swaps bad reflectors for spares while another
    /// reflector is healthy. Returns the swaps made.
    pub fn check(&mut self, now: Duration) -> Vec<Replaced> {
        self.out
            .retain(|_, (_, at, _)| now.saturating_sub(*at) <= LATE_LIMIT);
        for (addr, at, missed) in self.out.values_mut() {
            if !*missed && now.saturating_sub(*at) > DEADLINE {
                *missed = true;
                if let Some(a) = self.active.iter_mut().find(|a| a.addr == *addr) {
                    a.health.record(now, false);
                }
            }
        }
        // `--probe auto`: a reflector that never answered a timestamp gets echoes instead, with
        // a fresh start, before it can count as bad.
        if self.probe == Probe::Auto {
            for a in &mut self.active {
                if a.method == Method::Timestamp && !a.answered && a.health.silent(now) {
                    a.method = Method::Echo;
                    a.health = Health::new(now);
                }
            }
        }
        let mut swaps = Vec::new();
        for i in 0..self.active.len() {
            let healthy_other = self
                .active
                .iter()
                .enumerate()
                .any(|(j, a)| j != i && !a.health.is_bad(now));
            if !self.active[i].health.is_bad(now) || !healthy_other {
                continue;
            }
            let Some(replacement) = self.spares.pop_front() else {
                break;
            };
            let first = now + self.stagger(i, self.active.len());
            let method = self.probe.first(replacement);
            let old = std::mem::replace(
                &mut self.active[i],
                Active::new(replacement, method, now, first),
            );
            self.out.retain(|_, (addr, _, _)| *addr != old.addr);
            self.spares.push_back(old.addr);
            swaps.push(Replaced {
                out: old.addr,
                replacement,
                why: if old.health.silent(now) {
                    "no answer for a second"
                } else {
                    "missed 3 of its last 20 probes"
                },
            });
        }
        swaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn addrs(n: u8) -> Vec<IpAddr> {
        (1..=n).map(|i| IpAddr::from([10, 0, 0, i])).collect()
    }

    #[test]
    fn active_reflectors_are_probed_each_interval_staggered() {
        let mut p = Pool::new(&addrs(5), Probe::Echo, 3, MS(300), MS(0));
        assert_eq!(p.active(), addrs(3));
        let e = |a: IpAddr| vec![(a, Method::Echo)];
        assert_eq!(p.due(MS(0)), e(addrs(1)[0]));
        assert_eq!(p.due(MS(100)), e(addrs(2)[1]));
        assert_eq!(p.due(MS(200)), e(addrs(3)[2]));
        assert!(p.due(MS(250)).is_empty());
        assert_eq!(p.due(MS(300)), e(addrs(1)[0]));
        assert_eq!(p.next_due(), Some(MS(400)));
    }

    #[test]
    fn answers_give_deltas_over_each_reflectors_own_baseline() {
        let a = addrs(2);
        let mut p = Pool::new(&a, Probe::Echo, 2, MS(300), MS(0));
        p.sent(1, a[0], MS(0));
        p.sent(2, a[1], MS(0));
        assert_eq!(
            p.answered(1, a[0], Delay::Rtt(20.0), MS(20)),
            Some(Deltas::Rtt(0.0))
        );
        assert_eq!(
            p.answered(2, a[1], Delay::Rtt(50.0), MS(50)),
            Some(Deltas::Rtt(0.0))
        );
        p.sent(3, a[0], MS(300));
        assert_eq!(
            p.answered(3, a[0], Delay::Rtt(45.0), MS(345)),
            Some(Deltas::Rtt(25.0))
        );
        // Answered twice, from the wrong host, or never sent: not counted.
        assert_eq!(p.answered(3, a[0], Delay::Rtt(45.0), MS(346)), None);
        p.sent(4, a[0], MS(600));
        assert_eq!(p.answered(4, a[1], Delay::Rtt(45.0), MS(646)), None);
        assert_eq!(p.answered(99, a[0], Delay::Rtt(45.0), MS(646)), None);
    }

    #[test]
    fn a_silent_reflector_is_swapped_for_a_spare_and_waits_at_the_back() {
        let a = addrs(4);
        let mut p = Pool::new(&a, Probe::Echo, 2, MS(300), MS(0));
        let mut seq = 0;
        let mut t = 0;
        let mut swaps = Vec::new();
        while t <= 2_000 {
            for (addr, _) in p.due(MS(t)) {
                seq += 1;
                p.sent(seq, addr, MS(t));
                // a[1] never answers.
                if addr != a[1] {
                    p.answered(seq, addr, Delay::Rtt(20.0), MS(t + 20));
                }
            }
            swaps.extend(p.check(MS(t)));
            t += 50;
        }
        assert_eq!(
            swaps,
            vec![Replaced {
                out: a[1],
                replacement: a[2],
                why: "no answer for a second"
            }]
        );
        assert_eq!(p.active(), vec![a[0], a[2]]);
        assert_eq!(p.spares, VecDeque::from(vec![a[3], a[1]]));
    }

    #[test]
    fn a_late_answer_is_a_sample_and_all_missing_at_once_swaps_none() {
        let a = addrs(4);
        let mut p = Pool::new(&a, Probe::Echo, 2, MS(300), MS(0));
        p.sent(1, a[0], MS(0));
        p.sent(2, a[1], MS(0));
        // Both late by 2 s (a queue, not the reflectors): no swap, and the answers count.
        assert!(p.check(MS(1_500)).is_empty());
        assert!(p.check(MS(2_000)).is_empty());
        assert_eq!(
            p.answered(1, a[0], Delay::Rtt(2_000.0), MS(2_000)),
            Some(Deltas::Rtt(0.0))
        );
        assert_eq!(p.active(), vec![a[0], a[1]]);
        // Forgotten after the late limit.
        p.sent(3, a[0], MS(2_000));
        p.check(MS(12_500));
        assert_eq!(p.answered(3, a[0], Delay::Rtt(20.0), MS(12_600)), None);
    }

    #[test]
    fn auto_probes_timestamps_first_and_echo_where_they_go_unanswered() {
        let a = addrs(2);
        let mut p = Pool::new(&a, Probe::Auto, 2, MS(300), MS(0));
        let mut seq = 0;
        let mut t = 0;
        while t <= 2_000 {
            for (addr, method) in p.due(MS(t)) {
                seq += 1;
                p.sent(seq, addr, MS(t));
                // a[1] answers echoes only, as many hosts do.
                if addr == a[0] || method == Method::Echo {
                    p.answered(seq, addr, Delay::Rtt(20.0), MS(t + 20));
                }
            }
            assert!(p.check(MS(t)).is_empty(), "no swap: a[1] answers echoes");
            t += 50;
        }
        assert_eq!(
            p.due(MS(2_100))
                .into_iter()
                .chain(p.due(MS(2_250)))
                .collect::<Vec<_>>(),
            vec![(a[0], Method::Timestamp), (a[1], Method::Echo)]
        );
    }

    #[test]
    fn with_no_spare_a_bad_reflector_stays() {
        let a = addrs(1);
        let mut p = Pool::new(&a, Probe::Echo, 6, MS(300), MS(0));
        assert_eq!(p.active(), a);
        p.sent(1, a[0], MS(0));
        assert!(p.check(MS(5_000)).is_empty());
        assert_eq!(p.active(), a);
    }
}
