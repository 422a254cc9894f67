//! What a far end or a reflector answers: ICMP replies, irtt's packets, iperf3's messages.

use unbloat_autorate::pinger;
use unbloat_icmp::{echo, timestamp};
use unbloat_measure::iperf3::wire as iperf3_wire;
use unbloat_measure::irtt::packet::{self, Layout, Reply};
use unbloat_measure::irtt::params::Params;

/// An ICMP datagram as each reader takes it: `unbloat test`'s echo replies (raw or datagram
/// socket, IPv4 or IPv6), timestamp replies, and autorate's replies from its reflectors.
pub fn icmp(data: &[u8]) {
    let id = data.get(8..16).map_or(0, |b| {
        u64::from_be_bytes(b.try_into().expect("eight bytes"))
    });
    for (raw, v6) in [(false, false), (true, false), (false, true), (true, true)] {
        if let Some((_seq, len)) = echo::parse_reply(data, raw, v6, id) {
            assert!(len <= data.len());
        }
    }
    let ident = data
        .get(4..6)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    let _ = timestamp::parse_reply(data, ident);
    let _ = pinger::parse_reply(data, ident);
}

/// irtt's packets as a session reads what its server sends: datagrams, each after a 2-byte
/// big-endian length; an open reply's parameters (the server's grant) set the layout the echo
/// replies after it are read with.
pub fn irtt(data: &[u8]) {
    let mut layout = Layout::of(&Params::default());
    for datagram in datagrams(data) {
        if let Ok(Reply::Open(open)) = packet::parse_reply(datagram, &layout) {
            layout = Layout::of(&open.params);
        }
    }
}

/// The datagrams of one input: each after its length, until the bytes run out.
fn datagrams(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (len, rest) = data.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_be_bytes(*len)).min(rest.len());
        let (datagram, rest) = rest.split_at(len);
        data = rest;
        Some(datagram)
    })
}

/// iperf3's control channel: a length prefix, then a JSON message (the server's results,
/// read for their streams).
pub fn iperf3(data: &[u8]) {
    let Some((prefix, body)) = data.split_first_chunk::<4>() else {
        return;
    };
    let _ = iperf3_wire::json_length(*prefix, 1 << 20);
    if let Ok(value) = iperf3_wire::parse_json(body) {
        let _ = iperf3_wire::parse_server_results(&value);
    }
}
