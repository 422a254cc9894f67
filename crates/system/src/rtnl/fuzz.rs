//! Every reader of what the kernel sends over rtnetlink, on one datagram that came from no
//! socket: for the fuzz targets (fuzz/), which hand it arbitrary bytes. Not an API.

use super::wire::{self, Reply};

/// What each reader made of `datagram`, as text (the link events; then per message, its
/// sequence number and each reader's result: a device, its byte counters, a qdisc, and tcnl's
/// qdisc, class and filter). Every reader must end with a value or an error, never a panic.
pub fn decode_datagram(datagram: &[u8]) -> Vec<String> {
    let mut out = vec![format!("{:?}", super::events::parse(datagram))];
    for message in wire::messages(datagram) {
        match message {
            Ok((seq, Reply::Answer { payload, .. })) => {
                out.push(format!("{seq}: {:?}", wire::link(payload)));
                out.push(format!("{:?}", wire::link_bytes(payload)));
                out.push(format!("{:?}", wire::qdisc(payload)));
                out.push(format!("{:?}", crate::tcnl::decode_answer(payload)));
            }
            other => out.push(format!("{other:?}")),
        }
    }
    out
}
