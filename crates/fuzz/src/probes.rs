//! What a far end or a reflector answers: ICMP replies, irtt's packets, iperf3's messages.

use unbloat_autorate::pinger;
use unbloat_icmp::{echo, timestamp};
use unbloat_measure::iperf3::wire as iperf3_wire;
use unbloat_measure::irtt::packet::{self, Layout, Reply};
use unbloat_measure::irtt::params::Params;

/// An ICMP datagram as each reader takes it: `unbloat test`'s echo replies (raw or datagram
/// socket, IPv4 or IPv6), timestamp replies, and autorate's replies from its reflectors.
pub fn icmp(data: &[u8]) -> bool {
    // The fields a reply must echo, where a datagram socket's reply has them and where a raw
    // IPv4 one's does (after a 20-byte IP header): taken from the input, so that some match.
    let at = |i: usize, n: usize| data.get(i..i + n).unwrap_or(&[0; 8][..n]);
    let mut took = false;
    for header in [0, 20] {
        let test_id = u64::from_be_bytes(at(header + 8, 8).try_into().expect("eight bytes"));
        let ident = u16::from_be_bytes(at(header + 4, 2).try_into().expect("two bytes"));
        for (raw, v6) in [(false, false), (true, false), (false, true), (true, true)] {
            if let Some((_seq, len)) = echo::parse_reply(data, raw, v6, test_id) {
                assert!(len <= data.len());
                took = true;
            }
        }
        took |= timestamp::parse_reply(data, ident).is_some();
        took |= pinger::parse_reply(data, ident).is_some();
    }
    took
}

/// irtt's packets as a session reads what its server sends: datagrams, each after a 2-byte
/// big-endian length; an open reply's parameters (the server's grant) set the layout the echo
/// replies after it are read with.
pub fn irtt(data: &[u8]) -> bool {
    let mut layout = Layout::of(&Params::default());
    let mut took = false;
    for datagram in datagrams(data) {
        match packet::parse_reply(datagram, &layout) {
            Ok(Reply::Open(open)) => layout = Layout::of(&open.params),
            Ok(Reply::Echo(_)) => took = true,
            Err(_) => {}
        }
    }
    took
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
pub fn iperf3(data: &[u8]) -> bool {
    let Some((prefix, body)) = data.split_first_chunk::<4>() else {
        return false;
    };
    let _ = iperf3_wire::json_length(*prefix, 1 << 20);
    iperf3_wire::parse_json(body).is_ok_and(|v| iperf3_wire::parse_server_results(&v).is_ok())
}
