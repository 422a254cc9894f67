//! HTB: the shaper of the fq_codel strategy, with one tier or three tiers by DSCP.
//!
//! Heads up! Man pages `tc-htb(8)` and `tc-u32(8)`; kernel `net/sched/sch_htb.c` and
//! `net/sched/cls_u32.c`; DSCP per RFC 2474, names per RFC 2597/3246/5865/8622. The shape is
//! sqm-scripts' simple.qos (PEERS.md), with these changes, each for a reason:
//!
//! - Tiers by the same DSCPs as cake's `diffserv3`, so that a mark means the same whichever qdisc
//!   the user picks: priority 1:11 = CS7, CS6, EF, VA (cake's voice tin); bulk 1:13 = CS1, LE;
//!   everything else best effort 1:12 (the default class). simple.qos also prioritises AF42 and
//!   sends ICMP to bulk; it needs iptables marks for that. unbloat classifies with u32 filters on
//!   the DS field, IPv4 (`match ip dsfield`) and IPv6 (`match ip6 priority`), no iptables.
//! - Guaranteed rates like cake's tin thresholds: priority 1/4 of the rate, bulk 1/16, best
//!   effort the rest (11/16), so the guarantees sum to exactly the parent's rate; each may borrow
//!   up to the full rate (ceil). simple.qos gives priority 128 kbit guaranteed and caps it at 1/3:
//!   a voice call on a slow link could then not even get its guarantee.
//! - burst = cburst = the bytes of 1 ms at the rate (sqm's rule), but at least one full frame as
//!   the stab will count it (sqm: a fixed 1749 bytes, the ATM worst case): HTB must be able to send
//!   one whole frame in a burst. quantum the same, capped at 200000 bytes (sch_htb.c warns above
//!   that), so the DRR between tiers still interleaves.
//! - Rates are rounded down to whole kbit/s (whole bytes per second below 100 kbit/s), because
//!   the kernel keeps them in bytes (`struct tc_ratespec`, `TCA_HTB_RATE64`): what is planned is
//!   exactly what is read back, and the script stays readable.

pub mod attr;

use crate::model::{
    DscpFilter, FilterProtocol, FqCodelLeaf, FqCodelParams, Handle, HtbClass, HtbTree, Stab,
};
use unbloat_units::{Dscp, Rate, Size};

pub const ROOT: Handle = Handle::new(1, 0);
pub const PARENT: Handle = Handle::new(1, 1);
pub const SINGLE: Handle = Handle::new(1, 0x10);
pub const PRIORITY: Handle = Handle::new(1, 0x11);
pub const BEST_EFFORT: Handle = Handle::new(1, 0x12);
pub const BULK: Handle = Handle::new(1, 0x13);
/// HTB's largest sensible quantum (sch_htb.c `htb_change_class`: "quantum of class is big").
pub const QUANTUM_MAX: u64 = 200_000;
/// The burst window, sqm-scripts' `SHAPER_BURST_DUR_US`.
pub const BURST_MICROS: u64 = 1_000;
/// The u32 mask for the DSCP bits of the DS field (the low two bits are ECN).
pub const DSCP_MASK: u8 = 0xfc;

/// DSCPs of the priority tier (cake diffserv3's voice tin) and of the bulk tier.
pub fn priority_dscps() -> [Dscp; 4] {
    // VA is 44 (RFC 5865); 44 < 64, so `new` cannot fail.
    let va = Dscp::new(44).unwrap_or(Dscp::EF);
    [Dscp::CS7, Dscp::CS6, Dscp::EF, va]
}
pub const BULK_DSCPS: [Dscp; 2] = [Dscp::CS1, Dscp::LE];

/// The whole HTB tree for `rate` with `tiers` (1 or 3) and an fq_codel on each leaf.
/// `max_frame` is the largest frame as the stab counts it.
pub fn tree(
    rate: Rate,
    tiers: u8,
    stab: Option<Stab>,
    fq: &FqCodelParams,
    max_frame: u32,
) -> HtbTree {
    let burst = burst_for(rate, max_frame);
    let quantum = Size::from_bytes(burst.bytes().min(QUANTUM_MAX));
    let class = |classid, r: Rate, prio, label: &str| HtbClass {
        parent: PARENT,
        classid,
        rate: whole_bytes(r),
        ceil: whole_bytes(rate),
        burst,
        cburst: burst,
        quantum,
        prio,
        label: label.to_string(),
    };
    let mut classes = vec![HtbClass {
        parent: ROOT,
        classid: PARENT,
        rate: whole_bytes(rate),
        ceil: whole_bytes(rate),
        burst,
        cburst: burst,
        quantum,
        prio: None,
        label: "all traffic".to_string(),
    }];
    let mut filters = Vec::new();
    let default_class = if tiers == 3 {
        let bps = rate.bits_per_sec();
        let prio = Rate::from_bits_per_sec(bps / 4);
        let bulk = Rate::from_bits_per_sec(bps / 16);
        // Best effort gets what is left after the rounding of the others, so the sum is exact.
        let be = Rate::from_bits_per_sec(
            whole_bytes(rate).bits_per_sec()
                - whole_bytes(prio).bits_per_sec()
                - whole_bytes(bulk).bits_per_sec(),
        );
        classes.push(class(PRIORITY, prio, Some(1), "priority"));
        classes.push(class(BEST_EFFORT, be, Some(2), "best effort"));
        classes.push(class(BULK, bulk, Some(3), "bulk"));
        // IPv4 filters at prio 1, IPv6 at prio 2: one u32 instance per protocol and priority.
        for (protocol, pref) in [(FilterProtocol::Ip, 1), (FilterProtocol::Ipv6, 2)] {
            for (dscps, flowid) in [(&priority_dscps()[..], PRIORITY), (&BULK_DSCPS[..], BULK)] {
                for &dscp in dscps {
                    filters.push(DscpFilter {
                        parent: ROOT,
                        protocol,
                        prio: pref,
                        dscp,
                        flowid,
                    });
                }
            }
        }
        BEST_EFFORT
    } else {
        classes.push(class(SINGLE, rate, Some(1), "all traffic"));
        SINGLE
    };
    let leaves = classes
        .iter()
        .filter(|c| c.classid != PARENT)
        .map(|c| FqCodelLeaf {
            parent: c.classid,
            // 1:11 -> 110:, a handle that reads as its class.
            handle: Handle::new(c.classid.minor << 4, 0),
            params: fq.clone(),
        })
        .collect();
    HtbTree {
        handle: ROOT,
        default_class,
        stab,
        classes,
        leaves,
        filters,
    }
}

/// The bytes of [`BURST_MICROS`] at `rate`, at least one full frame.
pub fn burst_for(rate: Rate, max_frame: u32) -> Size {
    let window = rate.bytes_per_sec() * BURST_MICROS / 1_000_000;
    Size::from_bytes(window.max(max_frame as u64))
}

/// `rate` as HTB will hold it: rounded down to whole kbit/s from 100 kbit/s up (readable, and a
/// kbit is 125 whole bytes), to whole bytes per second below (at least one).
pub fn whole_bytes(rate: Rate) -> Rate {
    if rate >= Rate::from_kbit(100) {
        Rate::from_kbit(rate.bits_per_sec() / 1000)
    } else {
        Rate::from_bytes_per_sec(rate.bytes_per_sec().max(1))
    }
}

impl HtbClass {
    /// The words after `tc class add dev DEV`: `parent 1:1 classid 1:11 htb rate ... prio 1`.
    pub fn words(&self) -> Vec<String> {
        let mut w: Vec<String> = vec![
            "parent".into(),
            self.parent.to_string(),
            "classid".into(),
            self.classid.to_string(),
            "htb".into(),
            "rate".into(),
            self.rate.to_string(),
            "ceil".into(),
            self.ceil.to_string(),
            "burst".into(),
            self.burst.bytes().to_string(),
            "cburst".into(),
            self.cburst.bytes().to_string(),
            "quantum".into(),
            self.quantum.bytes().to_string(),
        ];
        if let Some(p) = self.prio {
            w.push("prio".into());
            w.push(p.to_string());
        }
        w
    }
}

impl DscpFilter {
    /// The words after `tc filter add dev DEV`: `parent 1: protocol ip prio 1 u32 match ip
    /// dsfield 0xb8 0xfc flowid 1:11` (IPv6: `match ip6 priority 0xb8 0xfc`).
    pub fn words(&self) -> Vec<String> {
        let (proto_word, field) = match self.protocol {
            FilterProtocol::Ipv6 => ("ip6", "priority"),
            _ => ("ip", "dsfield"),
        };
        vec![
            "parent".into(),
            self.parent.to_string(),
            "protocol".into(),
            self.protocol.to_string(),
            "prio".into(),
            self.prio.to_string(),
            "u32".into(),
            "match".into(),
            proto_word.into(),
            field.into(),
            format!("{:#04x}", self.dscp.tos()),
            format!("{DSCP_MASK:#04x}"),
            "flowid".into(),
            self.flowid.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_units::Time;

    fn fq() -> FqCodelParams {
        FqCodelParams {
            limit: 1001,
            flows: 1024,
            target: Time::from_millis(5),
            interval: Time::from_millis(100),
            quantum: 300,
            ecn: true,
            memory_limit: None,
        }
    }

    #[test]
    fn three_tier_guarantees_sum_to_the_rate() {
        for bps in [8_000u64, 1_000_001, 19_950_000, 78_000_000, 999_999_999] {
            let t = tree(Rate::from_bits_per_sec(bps), 3, None, &fq(), 1514);
            let leaves: u64 = t.classes[1..].iter().map(|c| c.rate.bits_per_sec()).sum();
            assert!(leaves <= t.classes[0].rate.bits_per_sec(), "{bps}");
            assert!(t
                .classes
                .iter()
                .all(|c| c.rate.bits_per_sec() % 8 == 0 && c.rate.bits_per_sec() > 0));
            assert_eq!(t.default_class, BEST_EFFORT);
            assert_eq!(t.filters.len(), 12);
            assert_eq!(t.leaves.len(), 3);
        }
    }

    #[test]
    fn burst_is_one_ms_but_at_least_a_frame() {
        assert_eq!(
            burst_for(Rate::from_mbit(100), 1514),
            Size::from_bytes(12_500)
        );
        assert_eq!(burst_for(Rate::from_mbit(1), 1749), Size::from_bytes(1749));
        let t = tree(Rate::from_mbit(10_000), 1, None, &fq(), 1514);
        assert_eq!(t.classes[0].quantum, Size::from_bytes(QUANTUM_MAX));
    }

    #[test]
    fn filters_match_the_dscp_bits_of_both_families() {
        let t = tree(Rate::from_mbit(10), 3, None, &fq(), 1514);
        let ef4 = t
            .filters
            .iter()
            .find(|f| f.dscp == Dscp::EF && f.protocol == FilterProtocol::Ip)
            .unwrap();
        assert_eq!(
            ef4.words().join(" "),
            "parent 1: protocol ip prio 1 u32 match ip dsfield 0xb8 0xfc flowid 1:11"
        );
        let le6 = t
            .filters
            .iter()
            .find(|f| f.dscp == Dscp::LE && f.protocol == FilterProtocol::Ipv6)
            .unwrap();
        assert_eq!(
            le6.words().join(" "),
            "parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0x04 0xfc flowid 1:13"
        );
        assert_eq!(t.leaves[0].handle.to_string(), "110:");
    }
}
