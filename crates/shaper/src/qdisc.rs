//! One module per qdisc kind unbloat builds, each the one home of that kind: its option words
//! in and out (the words `tc` takes and prints), its constants and defaults, and its netlink
//! attribute numbers (the `TCA_<KIND>_*` of include/uapi/linux/pkt_sched.h), which the system
//! crate's netlink code reads and writes with.
//!
//! - [`cake`]: net/sched/sch_cake.c, tc-cake(8).
//! - [`fq_codel`]: net/sched/sch_fq_codel.c, tc-fq_codel(8), RFC 8290.
//! - [`htb`]: net/sched/sch_htb.c, tc-htb(8).
//! - [`ingress`]: the ingress qdisc and the u32 filter with its mirred action that moves a
//!   device's incoming packets to its IFB (net/sched/sch_ingress.c, cls_u32.c, act_mirred.c).
//! - [`netlink`]: the kernel's numbers every kind shares (`TC_H_*`, `TCA_*`, `RTM_*`), defined
//!   here once for the whole workspace.
//!
//! The modules import [`crate::model`]; nothing they import imports them back.

pub mod cake;
pub mod fq_codel;
pub mod htb;
pub mod ingress;
pub mod netlink;
pub mod setting;
pub mod tc_values;
