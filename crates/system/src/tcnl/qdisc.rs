//! A qdisc from the kernel's `RTM_NEWQDISC` answer, as [`unbloat_shaper::tcjson`] has it from
//! `tc -j -s -d qdisc show`: each value is the one tc would print, read from the same
//! attribute (iproute2 tc/tc_qdisc.c `print_qdisc`, tc/tc_util.c `print_tcstats2_attr`,
//! tc/tc_stab.c, tc/q_cake.c, tc/q_fq_codel.c, tc/q_htb.c).
//!
//! Heads up! Attribute numbers and structs from include/uapi/linux/rtnetlink.h (`TCA_*`),
//! gen_stats.h (`TCA_STATS_*`, `struct gnet_stats_basic`, `struct gnet_stats_queue`) and
//! pkt_sched.h (`TCA_CAKE_*`, `TCA_FQ_CODEL_*`, `struct tc_fq_codel_xstats`, `TCA_HTB_*`,
//! `struct tc_htb_glob`, `struct tc_sizespec`).

use super::attr::{i32_at, u32_at, u64_at, Attrs};
use super::Header;
use unbloat_shaper::model::Handle;
use unbloat_shaper::tcjson::{
    CakeOptions, CakeStats, CakeTin, FqCodelOptions, FqCodelStats, HtbOptions, Qdisc, QdiscKind,
    QdiscStats, StabInfo,
};
use unbloat_units::{Rate, Time};

use unbloat_shaper::qdisc::netlink::{
    TCA_KIND, TCA_OPTIONS, TCA_STAB, TCA_STAB_BASE, TCA_STATS2, TCA_STATS_APP, TCA_STATS_BASIC,
    TCA_STATS_PKT64, TCA_STATS_QUEUE, TCA_XSTATS, TC_H_ROOT,
};
use unbloat_shaper::qdisc::{cake, fq_codel, htb};

/// The qdisc of one answer.
pub(super) fn qdisc(h: &Header, a: &Attrs) -> Result<Qdisc, String> {
    let kind = a.string(TCA_KIND).ok_or("no TCA_KIND")?;
    let handle = handle(h.handle);
    let stats2 = a.nested(TCA_STATS2, "TCA_STATS2")?;
    let stats = stats2.as_ref().and_then(counters);
    // tc reads the kind's statistics from TCA_STATS2's TCA_STATS_APP, or the old TCA_XSTATS.
    let xstats = stats2
        .as_ref()
        .and_then(|s| s.get(TCA_STATS_APP))
        .or_else(|| a.get(TCA_XSTATS));
    let options = a.get(TCA_OPTIONS).unwrap_or_default();
    let details = details(&kind, options, xstats).unwrap_or_else(|e| QdiscKind::Other {
        options: serde_json::Value::Null,
        error: Some(format!("{kind} {handle}: {e}")),
    });
    Ok(Qdisc {
        kind,
        handle,
        // tc prints no parent for a root qdisc, and none for parent 0.
        parent: (h.parent != TC_H_ROOT && h.parent != 0).then(|| self::handle(h.parent)),
        root: h.parent == TC_H_ROOT,
        stab: a.nested(TCA_STAB, "TCA_STAB")?.and_then(|s| stab(&s)),
        stats,
        details,
    })
}

pub(super) fn handle(h: u32) -> Handle {
    Handle::new((h >> 16) as u16, h as u16)
}

/// `TCA_STATS_BASIC` (`struct gnet_stats_basic`: u64 bytes, u32 packets; the 64-bit packet
/// count `TCA_STATS_PKT64` wins when non-zero, as tc reads it) and `TCA_STATS_QUEUE` (`struct
/// gnet_stats_queue`: qlen, backlog, drops, requeues, overlimits). None without the basic
/// counters: tc then prints no `bytes`, which is how the JSON reader tells "no statistics".
/// Classes and actions have the same counters: they read them from this too.
pub(super) fn counters(s: &Attrs) -> Option<QdiscStats> {
    let basic = s.get(TCA_STATS_BASIC)?;
    let queue = s.get(TCA_STATS_QUEUE).unwrap_or_default();
    let q = |at| u64::from(u32_at(queue, at).unwrap_or(0));
    let packets = match s.u64(TCA_STATS_PKT64) {
        Some(p) if p != 0 => p,
        _ => u64::from(u32_at(basic, 8).unwrap_or(0)),
    };
    Some(QdiscStats {
        bytes: u64_at(basic, 0).unwrap_or(0),
        packets,
        qlen: q(0),
        backlog: q(4),
        drops: q(8),
        requeues: q(12),
        overlimits: q(16),
    })
}

/// `TCA_STAB_BASE`'s `struct tc_sizespec` (cell_log u8, size_log u8, cell_align s16, overhead
/// s32, linklayer, mpu, mtu, tsize u32). tc leaves out zeros; linklayer 2 is atm.
fn stab(s: &Attrs) -> Option<StabInfo> {
    let b = s.get(TCA_STAB_BASE)?;
    Some(StabInfo {
        linklayer: if u32_at(b, 8) == Some(2) {
            "atm"
        } else {
            "ethernet"
        }
        .into(),
        overhead: i32_at(b, 4).unwrap_or(0),
        mpu: u32_at(b, 12).unwrap_or(0),
        mtu: u32_at(b, 16).unwrap_or(0),
        tsize: u32_at(b, 20).unwrap_or(0),
    })
}

/// The kind's options and statistics; an error keeps the qdisc, as `Other` with why.
fn details(kind: &str, options: &[u8], xstats: Option<&[u8]>) -> Result<QdiscKind, String> {
    let opts = || Attrs::parse(options, "TCA_OPTIONS");
    Ok(match kind {
        "cake" => QdiscKind::Cake {
            options: CakeOptions::from_attrs(&opts()?)?,
            stats: xstats.map(cake_stats).transpose()?,
        },
        "fq_codel" => QdiscKind::FqCodel {
            options: FqCodelOptions::from_attrs(&opts()?)?,
            stats: xstats.and_then(fq_codel_stats),
        },
        "htb" => QdiscKind::Htb(htb_options(&opts()?)?),
        "ingress" | "clsact" => QdiscKind::Ingress,
        // Other kinds: what unbloat reads of them is their place, kind and counters.
        _ => QdiscKind::Other {
            options: serde_json::Value::Null,
            error: None,
        },
    })
}

/// cake's `TCA_STATS_APP`: `TCA_CAKE_STATS_*`, with the tins nested in order.
fn cake_stats(xstats: &[u8]) -> Result<CakeStats, String> {
    use cake::attr::stats::*;
    let s = Attrs::parse(xstats, "cake's statistics")?;
    let n = |k| u64::from(s.u32(k).unwrap_or(0));
    let mut tins: Vec<(u16, CakeTin)> = match s.nested(TIN_STATS, "cake's tins")? {
        None => vec![],
        Some(list) => list
            .all()
            .map(|(i, bytes)| Ok((i, cake_tin(&Attrs::parse(bytes, "a cake tin")?))))
            .collect::<Result<_, String>>()?,
    };
    tins.sort_by_key(|(i, _)| *i);
    Ok(CakeStats {
        memory_used: n(MEMORY_USED),
        memory_limit: n(MEMORY_LIMIT),
        capacity_estimate: Rate::from_bytes_per_sec(s.u64(CAPACITY_ESTIMATE64).unwrap_or(0)),
        min_network_size: n(MIN_NETLEN),
        max_network_size: n(MAX_NETLEN),
        min_adj_size: n(MIN_ADJLEN),
        max_adj_size: n(MAX_ADJLEN),
        avg_hdr_offset: n(AVG_NETOFF),
        tins: tins.into_iter().map(|(_, t)| t).collect(),
    })
}

/// `TCA_CAKE_TIN_STATS_*`, the fields `cake_print_json_tin` prints.
fn cake_tin(t: &Attrs) -> CakeTin {
    use cake::attr::tin::*;
    let n = |k| u64::from(t.u32(k).unwrap_or(0));
    let us = |k| Time::from_micros(n(k));
    CakeTin {
        threshold_rate: Rate::from_bytes_per_sec(t.u64(THRESHOLD_RATE64).unwrap_or(0)),
        sent_bytes: t.u64(SENT_BYTES64).unwrap_or(0),
        backlog_bytes: n(BACKLOG_BYTES),
        target: us(TARGET_US),
        interval: us(INTERVAL_US),
        peak_delay: us(PEAK_DELAY_US),
        avg_delay: us(AVG_DELAY_US),
        base_delay: us(BASE_DELAY_US),
        sent_packets: n(SENT_PACKETS),
        way_indirect_hits: n(WAY_INDIRECT_HITS),
        way_misses: n(WAY_MISSES),
        way_collisions: n(WAY_COLLISIONS),
        drops: n(DROPPED_PACKETS),
        ecn_mark: n(ECN_MARKED_PACKETS),
        ack_drops: n(ACKS_DROPPED_PACKETS),
        sparse_flows: n(SPARSE_FLOWS),
        bulk_flows: n(BULK_FLOWS),
        unresponsive_flows: n(UNRESPONSIVE_FLOWS),
        max_pkt_len: n(MAX_SKBLEN),
        flow_quantum: n(FLOW_QUANTUM),
    }
}

/// `struct tc_fq_codel_xstats` of type `TCA_FQ_CODEL_XSTATS_QDISC` (0): maxpacket,
/// drop_overlimit, ecn_mark, new_flow_count, new_flows_len, old_flows_len, ...
fn fq_codel_stats(x: &[u8]) -> Option<FqCodelStats> {
    if u32_at(x, 0)? != fq_codel::attr::XSTATS_QDISC {
        return None;
    }
    let n = |i: usize| u32_at(x, 4 + 4 * i).map(u64::from);
    Some(FqCodelStats {
        maxpacket: n(0)?,
        drop_overlimit: n(1)?,
        ecn_mark: n(2)?,
        new_flow_count: n(3)?,
        new_flows_len: n(4)?,
        old_flows_len: n(5)?,
    })
}

/// `TCA_HTB_INIT` (`struct tc_htb_glob`: version, rate2quantum, defcls, debug, direct_pkts)
/// and `TCA_HTB_DIRECT_QLEN`.
fn htb_options(a: &Attrs) -> Result<HtbOptions, String> {
    use htb::attr::{DIRECT_QLEN as TCA_HTB_DIRECT_QLEN, INIT as TCA_HTB_INIT};
    let g = a.get(TCA_HTB_INIT).ok_or("no TCA_HTB_INIT")?;
    let field = |at| u32_at(g, at).ok_or("a short TCA_HTB_INIT");
    Ok(HtbOptions {
        r2q: field(4)?,
        default_class: u64::from(field(8)?),
        direct_packets_stat: u64::from(field(16)?),
        direct_qlen: a.u32(TCA_HTB_DIRECT_QLEN).map(u64::from),
    })
}
