//! A class from the kernel's `RTM_NEWTCLASS` answer, as [`unbloat_shaper::tcjson`] has it from
//! `tc -s -d class show` (iproute2 tc/tc_class.c `print_class`, tc/q_htb.c `htb_print_opt`
//! and `htb_print_xstats`). HTB's rates are exact here ([`Source::Netlink`]), where tc's text
//! rounds them.
//!
//! Heads up! `struct tc_htb_opt` and `struct tc_htb_xstats`, `TCA_HTB_*` from
//! include/uapi/linux/pkt_sched.h.

use super::attr::{i32_at, u32_at, Attrs};
use super::qdisc::{counters, handle};
use super::Header;
use unbloat_shaper::qdisc::netlink::{TCA_KIND, TCA_OPTIONS, TCA_STATS2};
use unbloat_shaper::tcjson::{Class, ClassKind, ClassStats, HtbClassOptions, Source};
use unbloat_units::{Rate, Size};

// `TC_H_ROOT`: the parent of a class at the top of its qdisc; `TCA_STATS_APP` in
// `TCA_STATS2`: the kind's own statistics.
use unbloat_shaper::qdisc::netlink::{TCA_STATS_APP, TC_H_ROOT};

/// The class of one answer.
pub(super) fn class(h: &Header, a: &Attrs) -> Result<Class, String> {
    let kind = a.string(TCA_KIND).ok_or("no TCA_KIND")?;
    let stats2 = a.nested(TCA_STATS2, "TCA_STATS2")?;
    // The same counters as a qdisc's, under the names the class model gives them.
    let stats = stats2.as_ref().and_then(counters).map(|c| ClassStats {
        bytes: c.bytes,
        packets: c.packets,
        drops: c.drops,
        overlimits: c.overlimits,
        requeues: c.requeues,
        backlog_bytes: c.backlog,
        backlog_packets: c.qlen,
    });
    let details = if kind == "htb" {
        let xstats = stats2.as_ref().and_then(|s| s.get(TCA_STATS_APP));
        let options = Attrs::parse(a.get(TCA_OPTIONS).unwrap_or_default(), "TCA_OPTIONS")?;
        ClassKind::Htb(htb(&options, xstats).map_err(|e| format!("htb class: {e}"))?)
    } else {
        // cake's and fq_codel's classes are their busy flows: nothing unbloat reads.
        ClassKind::Other(String::new())
    };
    Ok(Class {
        kind,
        handle: handle(h.handle),
        parent: (h.parent != TC_H_ROOT && h.parent != 0).then(|| handle(h.parent)),
        // tcm_info holds the handle of the qdisc attached below the class (`leaf 110:`).
        leaf: (h.info != 0).then(|| handle(h.info & 0xFFFF_0000)),
        stats,
        details,
        source: Source::Netlink,
    })
}

/// `TCA_HTB_PARMS` (`struct tc_htb_opt`: rate and ceil `struct tc_ratespec` of 12 bytes each
/// (cell_log u8, linklayer u8, overhead u16, cell_align s16, mpu u16, rate u32), then buffer,
/// cbuffer, quantum, level, prio), the 64-bit rates beside it, and `struct tc_htb_xstats`
/// (lends, borrows, giants, tokens, ctokens).
fn htb(a: &Attrs, xstats: Option<&[u8]>) -> Result<HtbClassOptions, String> {
    const PARMS: u16 = 1;
    const RATE64: u16 = 6;
    const CEIL64: u16 = 7;
    let p = a.get(PARMS).ok_or("no TCA_HTB_PARMS")?;
    let field = |at| u32_at(p, at).ok_or("a short TCA_HTB_PARMS");
    let rate = a.u64(RATE64).unwrap_or(u64::from(field(8)?));
    let ceil = a.u64(CEIL64).unwrap_or(u64::from(field(20)?));
    let (buffer, cbuffer, quantum, level, prio) =
        (field(24)?, field(28)?, field(32)?, field(36)?, field(40)?);
    // tc shows prio and quantum for leaves only.
    let leaf = level == 0;
    let x = |at| xstats.and_then(|x| u32_at(x, at));
    let linklayer = match p[1] & 0x0F {
        2 => "atm",
        _ => "ethernet",
    };
    Ok(HtbClassOptions {
        prio: leaf.then_some(prio),
        quantum: leaf.then_some(quantum),
        rate: Rate::from_bytes_per_sec(rate),
        ceil: Rate::from_bytes_per_sec(ceil),
        burst: Some(Size::from_bytes(xmit_size(rate, buffer))),
        cburst: Some(Size::from_bytes(xmit_size(ceil, cbuffer))),
        level: Some(level),
        linklayer: Some(linklayer.into()),
        lended: x(0).map(u64::from),
        borrowed: x(4).map(u64::from),
        giants: x(8).map(u64::from),
        tokens: xstats.and_then(|x| i32_at(x, 12)).map(i64::from),
        ctokens: xstats.and_then(|x| i32_at(x, 16)).map(i64::from),
    })
}

/// The bytes a token bucket of `ticks` holds at `rate` bytes per second, as tc computes a
/// burst (tc/tc_core.c `tc_calc_xmitsize`): the kernel's buffers are in psched ticks of 64 ns
/// (include/net/pkt_sched.h `PSCHED_SHIFT` 6), which tc turns into whole microseconds first.
fn xmit_size(rate: u64, ticks: u32) -> u64 {
    let micros = u128::from(ticks) * 64 / 1_000;
    (u128::from(rate) * micros / 1_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_what_tc_prints_for_the_same_ticks() {
        // 10016 ticks of 64 ns are 641 whole microseconds, which at 2493750 B/s (19950kbit)
        // hold 1598.49 bytes: tc prints `burst 1598b`.
        assert_eq!(xmit_size(2_493_750, 10_016), 1_598);
        assert_eq!(xmit_size(0, 10_016), 0);
        // Below one microsecond nothing is left, as in tc.
        assert_eq!(xmit_size(1_000_000_000, 15), 0);
        assert_eq!(xmit_size(1_000_000_000, 16), 1_000);
    }
}
