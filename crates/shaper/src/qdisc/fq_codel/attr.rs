//! fq_codel's netlink attributes: `enum { TCA_FQ_CODEL_UNSPEC, TCA_FQ_CODEL_TARGET, ... }` of
//! include/uapi/linux/pkt_sched.h, as sch_fq_codel.c's `fq_codel_dump()` writes them (times in
//! microseconds). The system crate's `tcnl` decodes fq_codel's options with these.

pub const TARGET: u16 = 1;
pub const LIMIT: u16 = 2;
pub const INTERVAL: u16 = 3;
pub const ECN: u16 = 4;
pub const FLOWS: u16 = 5;
pub const QUANTUM: u16 = 6;
pub const CE_THRESHOLD: u16 = 7;
pub const DROP_BATCH_SIZE: u16 = 8;
pub const MEMORY_LIMIT: u16 = 9;

/// `TCA_FQ_CODEL_XSTATS_QDISC`: the type of a `struct tc_fq_codel_xstats` about the qdisc (not
/// a class).
pub const XSTATS_QDISC: u32 = 0;
