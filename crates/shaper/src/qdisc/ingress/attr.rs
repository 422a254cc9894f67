//! The netlink attributes of the redirect to the IFB: the u32 filter (`TCA_U32_*`,
//! include/uapi/linux/pkt_cls.h), its actions (`TCA_ACT_*`, pkt_cls.h) and mirred's
//! parameters (`TCA_MIRRED_*`, include/uapi/linux/tc_act/tc_mirred.h).

/// `enum { TCA_U32_UNSPEC, TCA_U32_CLASSID, TCA_U32_HASH, TCA_U32_LINK, TCA_U32_DIVISOR,
/// TCA_U32_SEL, TCA_U32_POLICE, TCA_U32_ACT, ... }`.
pub const U32_CLASSID: u16 = 1;
pub const U32_DIVISOR: u16 = 4;
pub const U32_SEL: u16 = 5;
pub const U32_ACT: u16 = 7;
/// `enum { TCA_ACT_UNSPEC, TCA_ACT_KIND, TCA_ACT_OPTIONS, TCA_ACT_INDEX, TCA_ACT_STATS, ... }`.
pub const ACT_KIND: u16 = 1;
pub const ACT_OPTIONS: u16 = 2;
pub const ACT_STATS: u16 = 4;
/// `TCA_MIRRED_PARMS`: `struct tc_mirred`.
pub const MIRRED_PARMS: u16 = 2;
