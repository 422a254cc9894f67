//! fq_codel: flow queueing with CoDel on each flow, the leaf qdisc of the HTB strategy.
//!
//! Heads up! Man page `tc-fq_codel(8)`; kernel `net/sched/sch_fq_codel.c`; RFC 8290 (FQ-CoDel)
//! and RFC 8289 (CoDel). fq_codel has no shaper: HTB above it makes the bottleneck, fq_codel keeps
//! the queue at that bottleneck short.
//!
//! unbloat's defaults at a shaped rate R, and why:
//! - `target` = max(5 ms, 1.5 x the time one full frame (1500 bytes IP + the link's overhead,
//!   framing included) takes at R). RFC 8289 §4.4: target must exceed one MTU's transmission
//!   time or CoDel drops on a queue of one packet; at 1 Mbit/s a 1538-byte frame takes 12.3 ms.
//! - `interval` = 100 ms + (target - 5 ms): the RTT allowance stays what it was above the
//!   target, as sqm-scripts does (interval grows with target).
//! - `quantum` 300 below 100 Mbit/s, else the kernel's 1514: a small quantum lets small packets
//!   (DNS, VoIP, ACKs) of sparse flows through between full frames, which matters when a full frame
//!   takes a millisecond or more (12 Mbit/s); above 100 Mbit/s a full frame takes < 0.12 ms and the
//!   extra DRR rounds are only CPU.
//! - ECN: off on egress below 4 Mbit/s, on otherwise and always on ingress (seed 001): on a slow
//!   uplink a dropped packet frees link time for others, a marked one still uses it; on ingress the
//!   packet has already crossed the bottleneck, so marking costs nothing and saves a retransmit.
//! - `limit` 1001 packets (sqm-scripts) up to the rate where 1001 full frames hold less than
//!   100 ms, then enough for 100 ms, at most the kernel's 10240: a cap against unresponsive floods,
//!   never the thing that keeps latency low (CoDel is).
//! - `flows` 1024 (the kernel's), `memory_limit` the kernel's 32 MB unless told.

pub mod attr;
pub mod params;

pub use params::FqCodelOptions;

use crate::linklayer::LinkLayer;
use crate::model::{Direction, FqCodelParams};
use crate::options::{option_name, ShapeOptions};
use std::fmt;
use unbloat_units::{Rate, Time};

/// Kernel defaults, `fq_codel_init()` in net/sched/sch_fq_codel.c.
pub const KERNEL_LIMIT: u32 = 10 * 1024;
pub const KERNEL_FLOWS: u32 = 1024;
/// `psched_mtu(dev)`: 1500 + the 14-byte Ethernet header.
pub const KERNEL_QUANTUM: u32 = 1514;
pub const KERNEL_TARGET: Time = Time::from_millis(5);
pub const KERNEL_INTERVAL: Time = Time::from_millis(100);
/// The kernel raises a smaller quantum to 256 without saying so (`max(256U, quantum)`), and
/// refuses more than `FQ_CODEL_QUANTUM_MAX` (1 << 20); unbloat refuses both.
pub const QUANTUM_MIN: u32 = 256;
pub const QUANTUM_MAX: u32 = 1 << 20;
/// The kernel refuses 0 or more than 65536 flows (`fq_codel_change`).
pub const FLOWS_MAX: u32 = 65536;
/// The longest `target` or `interval`. tc sends them as u32 microseconds, but the kernel keeps
/// CoDel times as u32 counts of 1024 ns (`codel_time_t`, include/net/codel.h) and compares them
/// as signed 32-bit differences (`codel_time_after`): from 2^31 units (2199.02 s) on, a delay of
/// zero compares as above the target and CoDel drops everything. Whole seconds below that.
pub const TIME_MAX: Time = Time::from_secs(2199);
/// The largest `memory_limit`: the kernel silently caps it at 2^31 bytes (`fq_codel_change`:
/// `min(1U << 31, ...)`), so a larger one would not be what the kernel holds. 0 would drop every
/// packet (the limit is checked after each enqueue).
pub const MEMORY_LIMIT_MAX: u64 = 1 << 31;

/// sqm-scripts' leaf limit.
pub const SQM_LIMIT: u32 = 1001;
/// Below this rate, quantum 300.
pub const SMALL_QUANTUM_BELOW: Rate = Rate::from_mbit(100);
pub const SMALL_QUANTUM: u32 = 300;
/// Below this rate, no ECN on egress.
pub const EGRESS_ECN_FROM: Rate = Rate::from_mbit(4);
/// The IP packet size the target is computed for.
pub const MTU: u32 = 1500;

/// Why an fq_codel option cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FqCodelError {
    #[error("{} {value}: out of range {range} ({why})", option_name(.option))]
    Range {
        option: &'static str,
        value: String,
        range: String,
        why: &'static str,
    },
    #[error("--interval {interval}: must be longer than --target {target} (RFC 8289: target is a few per cent of interval)")]
    IntervalBelowTarget { interval: Time, target: Time },
}

impl FqCodelError {
    /// The config key the error is about.
    pub fn option(&self) -> &'static str {
        match self {
            FqCodelError::Range { option, .. } => option,
            FqCodelError::IntervalBelowTarget { .. } => "interval",
        }
    }
}

/// fq_codel's parameters for one direction.
pub fn params(
    rate: Rate,
    link: &LinkLayer,
    mac_header: u32,
    opts: &ShapeOptions,
    dir: Direction,
) -> Result<FqCodelParams, FqCodelError> {
    let frame = link.wire_bytes(MTU, mac_header) as u64;
    // 1.5 frames at the rate, in µs, rounded up.
    let frame_us = (frame * 8 * 1_000_000 * 3).div_ceil(rate.bits_per_sec().max(1) * 2);
    let auto_target = Time::from_micros(frame_us.max(KERNEL_TARGET.micros()));
    let target = opts.target.unwrap_or(auto_target);
    let interval = opts.interval.unwrap_or_else(|| {
        Time::from_micros(
            KERNEL_INTERVAL.micros() + target.micros().saturating_sub(KERNEL_TARGET.micros()),
        )
    });
    let times = format!("1us..{TIME_MAX}");
    let codel = "CoDel compares times as signed 32-bit counts of 1024 ns, and tc does not send 0";
    if target.micros() == 0 || target > TIME_MAX {
        return Err(range("target", target, &times, codel));
    }
    if interval.micros() == 0 || interval > TIME_MAX {
        return Err(range("interval", interval, &times, codel));
    }
    if interval <= target {
        return Err(FqCodelError::IntervalBelowTarget { interval, target });
    }
    let quantum = opts.quantum.unwrap_or(if rate < SMALL_QUANTUM_BELOW {
        SMALL_QUANTUM
    } else {
        KERNEL_QUANTUM
    });
    if !(QUANTUM_MIN..=QUANTUM_MAX).contains(&quantum) {
        return Err(range(
            "quantum",
            quantum,
            "256..1048576",
            "the kernel's limits",
        ));
    }
    // Full frames that fit in 100 ms at the rate.
    let per_100ms = (rate.bytes_per_sec() / 10 / frame.max(1)) as u32;
    let limit = opts
        .limit
        .unwrap_or(per_100ms.clamp(SQM_LIMIT, KERNEL_LIMIT));
    if limit == 0 {
        return Err(range(
            "limit",
            limit,
            "1..",
            "a queue of no packets drops everything",
        ));
    }
    let flows = opts.flows.unwrap_or(KERNEL_FLOWS);
    if !(1..=FLOWS_MAX).contains(&flows) {
        return Err(range("flows", flows, "1..65536", "the kernel's limit"));
    }
    if let Some(m) = opts.memory_limit {
        if !(1..=MEMORY_LIMIT_MAX).contains(&m.bytes()) {
            return Err(range(
                "memory-limit",
                m,
                &format!("1..{MEMORY_LIMIT_MAX} bytes"),
                "the kernel caps it at 2 GiB, and 0 drops every packet",
            ));
        }
    }
    let ecn = match dir {
        Direction::Egress => opts.ecn_egress.unwrap_or(rate >= EGRESS_ECN_FROM),
        Direction::Ingress => opts.ecn_ingress.unwrap_or(true),
    };
    Ok(FqCodelParams {
        limit,
        flows,
        target,
        interval,
        quantum,
        ecn,
        memory_limit: opts.memory_limit,
    })
}

fn range(
    option: &'static str,
    value: impl fmt::Display,
    range: &str,
    why: &'static str,
) -> FqCodelError {
    FqCodelError::Range {
        option,
        value: value.to_string(),
        range: range.to_string(),
        why,
    }
}

/// What the kernel reports back (`tc -j` `target`/`interval`, µs) for a time written to it:
/// sch_fq_codel.c keeps CoDel times in units of 1024 ns (`(us * NSEC_PER_USEC) >> CODEL_SHIFT`)
/// and dumps `codel_time_to_us()`, so 29983us reads back as 29982 and 5ms as 4999. Verification
/// compares this of the planned time with the live value, not the planned time.
pub fn codel_time_readback(t: Time) -> Time {
    const CODEL_SHIFT: u32 = 10;
    let ns = u128::from(t.micros()) * 1_000;
    // codel_time_t is 32 bits: anything above about 73 minutes wraps in the kernel; saturate.
    let units = (ns >> CODEL_SHIFT).min(u128::from(u32::MAX));
    Time::from_micros(((units << CODEL_SHIFT) / 1_000) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linklayer::LinkPreset;

    fn p(rate: Rate, dir: Direction) -> FqCodelParams {
        params(
            rate,
            &LinkPreset::Ethernet.link_layer(),
            14,
            &ShapeOptions::default(),
            dir,
        )
        .unwrap()
    }

    #[test]
    fn fast_links_keep_the_kernel_defaults() {
        let f = p(Rate::from_mbit(100), Direction::Egress);
        assert_eq!(
            (f.target, f.interval, f.quantum, f.ecn),
            (KERNEL_TARGET, KERNEL_INTERVAL, 1514, true)
        );
        assert_eq!(f.limit, SQM_LIMIT);
        let g = p(Rate::from_gbit_for_test(1), Direction::Egress);
        // 1 Gbit/s * 100 ms / 1538 bytes = 8127 frames.
        assert_eq!(g.limit, 8127);
    }

    #[test]
    fn slow_links_get_a_longer_target_small_quantum_and_no_egress_ecn() {
        let f = p(Rate::from_kbit(1000), Direction::Egress);
        // 1538 bytes at 1 Mbit/s = 12304 µs; x 1.5 = 18456 µs.
        assert_eq!(f.target, Time::from_micros(18_456));
        assert_eq!(f.interval, Time::from_micros(113_456));
        assert_eq!(f.quantum, 300);
        assert!(!f.ecn);
        assert!(p(Rate::from_kbit(1000), Direction::Ingress).ecn);
    }

    #[test]
    fn kernel_times_are_1024ns_units() {
        // Seen in UML 6.1: target 29983us planned, 29982 in `tc -j qdisc`.
        assert_eq!(
            codel_time_readback(Time::from_micros(29_983)),
            Time::from_micros(29_982)
        );
        assert_eq!(
            codel_time_readback(Time::from_micros(124_983)),
            Time::from_micros(124_982)
        );
        assert_eq!(
            codel_time_readback(Time::from_millis(5)),
            Time::from_micros(4_999)
        );
    }

    #[test]
    fn bad_values_name_the_option() {
        let l = LinkPreset::Ethernet.link_layer();
        let o = ShapeOptions {
            quantum: Some(100),
            ..Default::default()
        };
        let e = params(Rate::from_mbit(10), &l, 14, &o, Direction::Egress).unwrap_err();
        assert!(
            e.to_string().starts_with("--quantum 100: out of range"),
            "{e}"
        );
        let o = ShapeOptions {
            target: Some(Time::from_millis(50)),
            interval: Some(Time::from_millis(20)),
            ..Default::default()
        };
        let e = params(Rate::from_mbit(10), &l, 14, &o, Direction::Egress).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--interval 20ms: must be longer than --target 50ms"),
            "{e}"
        );
        let o = ShapeOptions {
            flows: Some(70000),
            ..Default::default()
        };
        assert!(params(Rate::from_mbit(10), &l, 14, &o, Direction::Egress).is_err());
    }

    #[test]
    fn times_and_memory_the_kernel_cannot_hold_are_refused() {
        let l = LinkPreset::Ethernet.link_layer();
        let err = |o: ShapeOptions| {
            params(Rate::from_mbit(10), &l, 14, &o, Direction::Egress)
                .expect_err("refused")
                .to_string()
        };
        let t = |target: Option<Time>, interval: Option<Time>| ShapeOptions {
            target,
            interval,
            ..Default::default()
        };
        let s = Time::from_secs;
        let e = err(t(Some(s(5000)), None));
        assert!(
            e.starts_with("--target 5000s: out of range 1us..2199s (CoDel"),
            "{e}"
        );
        let e = err(t(None, Some(s(5000))));
        assert!(
            e.starts_with("--interval 5000s: out of range 1us..2199s"),
            "{e}"
        );
        let e = err(t(Some(Time::from_micros(0)), None));
        assert!(e.starts_with("--target 0us: out of range"), "{e}");
        let e = err(t(Some(s(1)), Some(Time::from_micros(0))));
        assert!(e.starts_with("--interval 0us: out of range"), "{e}");
        let e = err(t(Some(s(2199)), Some(s(2200))));
        assert!(e.starts_with("--interval 2200s: out of range"), "{e}");
        let mem = |b: u64| ShapeOptions {
            memory_limit: Some(unbloat_units::Size::from_bytes(b)),
            ..Default::default()
        };
        let e = err(mem(0));
        assert!(e.starts_with("--memory-limit 0"), "{e}");
        assert!(e.contains("out of range 1..2147483648 bytes"), "{e}");
        assert!(err(mem((1 << 31) + 1)).contains("out of range 1..2147483648 bytes"));
        // The limits themselves are fine.
        for o in [t(Some(s(1)), Some(TIME_MAX)), mem(1), mem(MEMORY_LIMIT_MAX)] {
            assert!(params(Rate::from_mbit(10), &l, 14, &o, Direction::Egress).is_ok());
        }
    }

    trait Gbit {
        fn from_gbit_for_test(g: u64) -> Rate;
    }
    impl Gbit for Rate {
        fn from_gbit_for_test(g: u64) -> Rate {
            Rate::from_mbit(g * 1000)
        }
    }
}
