//! What the kernel says: tc's JSON (`tc -j -s -d`) and rtnetlink's answers.

use unbloat_shaper::model::Handle;
use unbloat_shaper::tcjson::{self, class, filter};

/// `tc -j -s -d qdisc|class|filter show` as `unbloat status`, `start`'s verify and the daemon
/// read it (a tc of another version, or a kernel with other qdiscs, prints other JSON).
pub fn tc_json(data: &[u8]) -> bool {
    let Some(text) = crate::text(data) else {
        return false;
    };
    // tc prints `[]` for no objects, which each reader takes: not what a seed is for.
    let some = |n: usize| n > 0;
    let qdiscs = tcjson::parse_qdiscs(text).is_ok_and(|q| some(q.len()));
    let classes = class::parse_classes(text).is_ok_and(|c| some(c.len()));
    let filters = filter::parse_filters(text, None).is_ok_and(|f| some(f.len()));
    let ingress = filter::parse_filters(text, Some(Handle::INGRESS)).is_ok_and(|f| some(f.len()));
    qdiscs | classes | filters | ingress
}

/// One rtnetlink datagram through every reader of the kernel's answers: link events, devices,
/// their counters, qdiscs, and the metrics' qdisc, class and filter decoders.
pub fn netlink(data: &[u8]) -> bool {
    unbloat_system::rtnl::fuzz::decode_datagram(data) > 0
}
