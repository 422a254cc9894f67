//! What the kernel says: tc's JSON (`tc -j -s -d`) and rtnetlink's answers.

use unbloat_shaper::model::Handle;
use unbloat_shaper::tcjson::{self, class, filter};

/// `tc -j -s -d qdisc|class|filter show` as `unbloat status`, `start`'s verify and the daemon
/// read it (a tc of another version, or a kernel with other qdiscs, prints other JSON).
pub fn tc_json(data: &[u8]) {
    let Some(text) = crate::text(data) else {
        return;
    };
    let _ = tcjson::parse_qdiscs(text);
    let _ = class::parse_classes(text);
    let _ = filter::parse_filters(text, None);
    let _ = filter::parse_filters(text, Some(Handle::INGRESS));
}

/// One rtnetlink datagram through every reader of the kernel's answers: link events, devices,
/// their counters, qdiscs, and the metrics' qdisc, class and filter decoders.
pub fn netlink(data: &[u8]) {
    let _ = unbloat_system::rtnl::fuzz::decode_datagram(data);
}
