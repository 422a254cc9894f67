//! cake's netlink attributes: the `TCA_CAKE_*` numbers of include/uapi/linux/pkt_sched.h and
//! the values of its enum-valued ones, read as sch_cake.c's `cake_dump()` writes them and
//! iproute2's `cake_print_opt` reads them. The system crate's `tcnl` decodes cake's options and
//! statistics with these, and `rtnl` changes cake's rate with [`BASE_RATE64`].

use crate::model::{Diffserv, FlowMode};

/// `enum { TCA_CAKE_UNSPEC, TCA_CAKE_PAD, TCA_CAKE_BASE_RATE64, ... }`: the qdisc's options.
/// `BASE_RATE64` is cake's rate, a u64 in bytes per second.
pub const BASE_RATE64: u16 = 2;
pub const DIFFSERV_MODE: u16 = 3;
pub const ATM: u16 = 4;
pub const FLOW_MODE: u16 = 5;
pub const OVERHEAD: u16 = 6;
pub const RTT: u16 = 7;
pub const MEMORY: u16 = 10;
pub const NAT: u16 = 11;
/// There (value 0) exactly when cake counts no overhead at all.
pub const RAW: u16 = 12;
pub const WASH: u16 = 13;
pub const MPU: u16 = 14;
pub const INGRESS: u16 = 15;
pub const ACK_FILTER: u16 = 16;
pub const SPLIT_GSO: u16 = 17;
pub const FWMARK: u16 = 18;

/// `TCA_CAKE_ATM`'s values (`enum { CAKE_ATM_NONE, CAKE_ATM_ATM, CAKE_ATM_PTM }`).
pub const ATM_ATM: u32 = 1;
pub const ATM_PTM: u32 = 2;

/// `TCA_CAKE_STATS_*` in `TCA_STATS_APP`: the qdisc's statistics.
pub mod stats {
    pub const CAPACITY_ESTIMATE64: u16 = 2;
    pub const MEMORY_LIMIT: u16 = 3;
    pub const MEMORY_USED: u16 = 4;
    pub const AVG_NETOFF: u16 = 5;
    pub const MIN_NETLEN: u16 = 6;
    pub const MAX_NETLEN: u16 = 7;
    pub const MIN_ADJLEN: u16 = 8;
    pub const MAX_ADJLEN: u16 = 9;
    /// The tins, nested in order.
    pub const TIN_STATS: u16 = 10;
}

/// `TCA_CAKE_TIN_STATS_*`: one tin's statistics, the fields `cake_print_json_tin` prints.
pub mod tin {
    pub const SENT_PACKETS: u16 = 2;
    pub const SENT_BYTES64: u16 = 3;
    pub const DROPPED_PACKETS: u16 = 4;
    pub const ACKS_DROPPED_PACKETS: u16 = 6;
    pub const ECN_MARKED_PACKETS: u16 = 8;
    pub const BACKLOG_BYTES: u16 = 11;
    pub const THRESHOLD_RATE64: u16 = 12;
    pub const TARGET_US: u16 = 13;
    pub const INTERVAL_US: u16 = 14;
    pub const WAY_INDIRECT_HITS: u16 = 15;
    pub const WAY_MISSES: u16 = 16;
    pub const WAY_COLLISIONS: u16 = 17;
    pub const PEAK_DELAY_US: u16 = 18;
    pub const AVG_DELAY_US: u16 = 19;
    pub const BASE_DELAY_US: u16 = 20;
    pub const SPARSE_FLOWS: u16 = 21;
    pub const BULK_FLOWS: u16 = 22;
    pub const UNRESPONSIVE_FLOWS: u16 = 23;
    pub const MAX_SKBLEN: u16 = 24;
    pub const FLOW_QUANTUM: u16 = 25;
}

/// `TCA_CAKE_DIFFSERV_MODE` (`enum { CAKE_DIFFSERV_DIFFSERV3, CAKE_DIFFSERV_DIFFSERV4,
/// CAKE_DIFFSERV_DIFFSERV8, CAKE_DIFFSERV_BESTEFFORT, CAKE_DIFFSERV_PRECEDENCE }`).
pub fn diffserv(n: u32) -> Result<Diffserv, String> {
    Ok(match n {
        0 => Diffserv::Diffserv3,
        1 => Diffserv::Diffserv4,
        2 => Diffserv::Diffserv8,
        3 => Diffserv::Besteffort,
        4 => Diffserv::Precedence,
        n => return Err(format!("diffserv mode {n} unknown to this unbloat")),
    })
}

/// `TCA_CAKE_FLOW_MODE` (`enum { CAKE_FLOW_NONE, CAKE_FLOW_SRC_IP, CAKE_FLOW_DST_IP,
/// CAKE_FLOW_HOSTS, CAKE_FLOW_FLOWS, CAKE_FLOW_DUAL_SRC, CAKE_FLOW_DUAL_DST, CAKE_FLOW_TRIPLE }`).
pub fn flow_mode(n: u32) -> Result<FlowMode, String> {
    Ok(match n {
        0 => FlowMode::Flowblind,
        1 => FlowMode::Srchost,
        2 => FlowMode::Dsthost,
        3 => FlowMode::Hosts,
        4 => FlowMode::Flows,
        5 => FlowMode::DualSrchost,
        6 => FlowMode::DualDsthost,
        7 => FlowMode::TripleIsolate,
        n => return Err(format!("flow mode {n} unknown to this unbloat")),
    })
}
