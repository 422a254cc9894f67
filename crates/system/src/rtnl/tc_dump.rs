//! A device's qdiscs, classes or filters with everything the kernel reports about them,
//! statistics included: the requests `tc -s -d qdisc|class|filter show dev DEV` sends, without
//! the process. The answers are handed back as the kernel's bytes (each a `struct tcmsg` and
//! its attributes); [`crate::tcnl`] decodes them.
//!
//! The kernel side: net/sched/sch_api.c `tc_dump_qdisc` (every device: the filter by index is
//! ours) and `tc_dump_tclass` (the device named by `tcm_ifindex`), net/sched/cls_api.c
//! `tc_dump_tfilter` (the device and the parent of the request).

use std::fmt;

use netlink_packet_route::tc::{TcHandle, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;

use super::{Op, Rtnl, RtnlError};

// The message types of the answers.
use unbloat_shaper::qdisc::netlink::{RTM_NEWQDISC, RTM_NEWTCLASS, RTM_NEWTFILTER};

/// What to dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcObjects {
    Qdiscs,
    Classes,
    /// The filters attached at `parent`, as tc asks: 0 for the root qdisc's (`filter show dev
    /// X`), [`INGRESS_FILTERS`] for the ingress qdisc's (`filter show dev X ingress`).
    Filters {
        parent: u32,
    },
}

/// `TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)` (pkt_sched.h): the parent tc sends for
/// `filter show dev X ingress`; it finds the filters of an `ingress` qdisc as well as clsact's.
pub const INGRESS_FILTERS: u32 = 0xFFFF_FFF2;

impl fmt::Display for TcObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TcObjects::Qdiscs => f.write_str("qdiscs"),
            TcObjects::Classes => f.write_str("classes"),
            TcObjects::Filters { parent: 0 } => f.write_str("filters"),
            TcObjects::Filters { parent } if *parent == INGRESS_FILTERS => {
                f.write_str("ingress filters")
            }
            TcObjects::Filters { parent } => write!(f, "filters under {parent:x}"),
        }
    }
}

impl Rtnl {
    /// The payloads of the kernel's answers for the device with this index, in the kernel's
    /// order. A device without such objects gives an empty list; so does, for classes, a device
    /// that is gone (the kernel answers an empty dump). A filter dump at a parent that does not
    /// exist is refused by the kernel (`EINVAL`): the caller decides what that means.
    pub fn tc_dump(&self, what: TcObjects, index: u32) -> Result<Vec<Vec<u8>>, RtnlError> {
        let request = || {
            let mut msg = TcMessage::with_index(index as i32);
            match what {
                TcObjects::Qdiscs => RouteNetlinkMessage::GetQueueDiscipline(msg),
                TcObjects::Classes => RouteNetlinkMessage::GetTrafficClass(msg),
                TcObjects::Filters { parent } => {
                    msg.header.parent = TcHandle::from(parent);
                    RouteNetlinkMessage::GetTrafficFilter(msg)
                }
            }
        };
        let answer = match what {
            TcObjects::Qdiscs => RTM_NEWQDISC,
            TcObjects::Classes => RTM_NEWTCLASS,
            TcObjects::Filters { .. } => RTM_NEWTFILTER,
        };
        self.dump(Op::DumpTc(what, index), request, |kind, payload, out| {
            if kind == answer && tcm_ifindex(payload) == Some(index) {
                out.push(payload.to_vec());
            }
            Ok(())
        })
    }
}

/// `tcm_ifindex` of a `struct tcmsg` (family, two pad bytes, then the index at offset 4).
fn tcm_ifindex(payload: &[u8]) -> Option<u32> {
    let b = payload.get(4..8)?;
    Some(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u32)
}
