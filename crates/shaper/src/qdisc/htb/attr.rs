//! HTB's netlink attributes (include/uapi/linux/pkt_sched.h `enum { TCA_HTB_UNSPEC,
//! TCA_HTB_PARMS, TCA_HTB_INIT, TCA_HTB_CTAB, TCA_HTB_RTAB, TCA_HTB_DIRECT_QLEN, ... }`).

/// `TCA_HTB_INIT`: `struct tc_htb_glob` (version, rate2quantum, defcls, debug, direct_pkts).
pub const INIT: u16 = 2;
/// `TCA_HTB_DIRECT_QLEN`.
pub const DIRECT_QLEN: u16 = 5;
/// `direct_pkts`, the last u32 of `struct tc_htb_glob`: a counter, not configuration.
pub const INIT_DIRECT_PKTS: std::ops::Range<usize> = 16..20;
