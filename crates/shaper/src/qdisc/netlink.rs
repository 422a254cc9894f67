//! The kernel's numbers for traffic control over rtnetlink that every qdisc kind shares, each
//! defined once here: the system crate's `rtnl` (requests, dumps, link events) and `tcnl` (the
//! qdiscs, classes and filters read back) both use these, and nothing else defines them.
//!
//! Sources: include/uapi/linux/rtnetlink.h (`RTM_*`, `enum { TCA_UNSPEC, TCA_KIND, ... }`),
//! include/uapi/linux/pkt_sched.h (`TC_H_*`, `TCA_STAB_*`), include/uapi/linux/gen_stats.h
//! (`TCA_STATS_*`). The kinds' own attributes live with their kind ([`super::cake::attr`], ...).

/// `TC_H_ROOT` (pkt_sched.h): the parent of a device's root qdisc, and of a class at the top of
/// its qdisc.
pub const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// `TC_H_INGRESS` (pkt_sched.h): the parent of an ingress or clsact qdisc.
pub const TC_H_INGRESS: u32 = 0xFFFF_FFF1;

/// `RTM_NEWLINK` (rtnetlink.h): the answer to `RTM_GETLINK`, and a link event.
pub const RTM_NEWLINK: u16 = 16;
/// `RTM_DELLINK`: a device went away.
pub const RTM_DELLINK: u16 = 17;
/// `RTM_NEWQDISC`, `RTM_NEWTCLASS`, `RTM_NEWTFILTER`: the answers to the `RTM_GET*` of qdiscs,
/// classes and filters.
pub const RTM_NEWQDISC: u16 = 36;
pub const RTM_NEWTCLASS: u16 = 40;
pub const RTM_NEWTFILTER: u16 = 44;

/// `TCA_KIND`, `TCA_OPTIONS`, `TCA_XSTATS`, `TCA_STATS2`, `TCA_STAB` (rtnetlink.h
/// `enum { TCA_UNSPEC, TCA_KIND, TCA_OPTIONS, TCA_STATS, TCA_XSTATS, TCA_RATE, TCA_FCNT,
/// TCA_STATS2, TCA_STAB, ... }`).
pub const TCA_KIND: u16 = 1;
pub const TCA_OPTIONS: u16 = 2;
pub const TCA_XSTATS: u16 = 4;
pub const TCA_STATS2: u16 = 7;
pub const TCA_STAB: u16 = 8;

/// `TCA_STAB_BASE` (pkt_sched.h): the stab's `struct tc_sizespec`.
pub const TCA_STAB_BASE: u16 = 1;

/// `TCA_STATS_BASIC`, `TCA_STATS_QUEUE`, `TCA_STATS_APP` (the kind's own statistics),
/// `TCA_STATS_PKT64` (gen_stats.h), nested in `TCA_STATS2`.
pub const TCA_STATS_BASIC: u16 = 1;
pub const TCA_STATS_QUEUE: u16 = 3;
pub const TCA_STATS_APP: u16 = 4;
pub const TCA_STATS_PKT64: u16 = 8;

/// A qdisc's options as the kernel sent them (`TCA_OPTIONS`' nested attributes), by number: the
/// system crate's reader implements it, and each kind's module decodes its own numbers with it
/// (`CakeOptions::from_attrs`, ...), so the meaning of an attribute is written where the
/// option is declared and the wire format where it is read.
pub trait OptionAttrs {
    fn u32(&self, kind: u16) -> Option<u32>;
    fn u64(&self, kind: u16) -> Option<u64>;
    fn i32(&self, kind: u16) -> Option<i32>;
    /// Whether the attribute is there at all (cake's `TCA_CAKE_RAW` says so by being there).
    fn has(&self, kind: u16) -> bool;
}
