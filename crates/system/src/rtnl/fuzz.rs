//! Every reader of what the kernel sends over rtnetlink, on one datagram that came from no
//! socket: for the fuzz targets (fuzz/), which hand it arbitrary bytes. Not an API.

use super::wire::{self, Reply};

/// Reads `datagram` as the link events' reader does, then each answer in it as a device, its
/// byte counters, a qdisc, and as tcnl's qdisc, class and filter: how many of those reads took
/// it. Every reader must end with a value or an error, never a panic.
pub fn decode_datagram(datagram: &[u8]) -> usize {
    let mut took = super::events::parse(datagram).len();
    for message in wire::messages(datagram) {
        if let Ok((_, Reply::Answer { payload, .. })) = message {
            took += usize::from(wire::link(payload).is_ok())
                + usize::from(matches!(wire::link_bytes(payload), Ok(Some(_))))
                + usize::from(wire::qdisc(payload).is_ok());
            took += crate::tcnl::decode_answer(payload)
                .iter()
                .filter(|r| r.is_ok())
                .count();
        }
    }
    took
}
