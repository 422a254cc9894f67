//! ICMP timestamps (RFC 792, types 13 and 14): the gateway's own clock says when our request
//! reached it and when its reply left, so a round trip to the first hop splits into its two
//! ways (`unbloat test`'s locating of the queue). Routers, Linux among them (net/ipv4/icmp.c,
//! `icmp_timestamp`), answer them.
//!
//! What callers can rely on:
//! - IPv4 only (ICMPv6 has no timestamps), and only on a raw socket: unprivileged ICMP sockets
//!   carry echo alone. [`TimestampSocket::open`] says so in its error.
//! - The stamps are milliseconds since midnight UT; [`to_unix_ms`] puts one back on the
//!   Unix clock near a time of ours, across midnight too. A stamp with the high bit set (RFC 792:
//!   not in that format) is none.
//! - A reply is matched by our identifier and the 16-bit sequence, and must echo the originate
//!   stamp we sent (a stray or stale reply does not).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::echo::checksum;
use crate::rxtime;

const TIMESTAMP_REQUEST: u8 = 13;
const TIMESTAMP_REPLY: u8 = 14;
/// Type, code, checksum, identifier, sequence, then three 32-bit stamps.
pub const TIMESTAMP_LEN: usize = 20;
/// A day in milliseconds: the stamps wrap there.
pub const DAY_MS: u64 = 86_400_000;

/// A raw ICMP socket for timestamp requests to one IPv4 host.
pub struct TimestampSocket {
    sock: Socket,
    target: SockAddr,
    ident: u16,
}

/// What one timestamp reply said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamps {
    /// The request's 16-bit sequence.
    pub seq: u16,
    /// Our originate stamp, echoed.
    pub originate: u32,
    /// When the request reached the host, and when its reply left, ms since midnight UT;
    /// `None` when the host said they are not in that format.
    pub receive: Option<u32>,
    pub transmit: Option<u32>,
}

impl TimestampSocket {
    /// A raw socket towards `target`; an error in words without root (CAP_NET_RAW).
    pub fn open(target: Ipv4Addr) -> Result<TimestampSocket, String> {
        let sock = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)).map_err(|e| {
            format!("ICMP timestamps need a raw socket, which needs root (CAP_NET_RAW): {e}")
        })?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| format!("ICMP socket: {e}"))?;
        let _ = rxtime::enable(&sock);
        Ok(TimestampSocket {
            sock,
            target: SocketAddr::new(target.into(), 0).into(),
            ident: (std::process::id() as u16) ^ 0xa5a5,
        })
    }

    /// Sends a request with sequence `seq` and our originate stamp `originate` (ms since
    /// midnight UT).
    pub fn send(&self, seq: u16, originate: u32) -> std::io::Result<usize> {
        self.sock
            .send_to(&request(self.ident, seq, originate), &self.target)
    }

    /// Reads one datagram ([`rxtime::recv`], with the socket's 100 ms timeout).
    pub fn recv(&self, buf: &mut [u8]) -> std::io::Result<rxtime::Received> {
        rxtime::recv(&self.sock, buf)
    }

    /// One of our replies in a datagram as a raw IPv4 socket delivers it (IP header first).
    pub fn parse(&self, data: &[u8]) -> Option<Stamps> {
        parse_reply(data, self.ident)
    }
}

/// A timestamp request, checksummed.
pub fn request(ident: u16, seq: u16, originate: u32) -> [u8; TIMESTAMP_LEN] {
    let mut pkt = [0u8; TIMESTAMP_LEN];
    pkt[0] = TIMESTAMP_REQUEST;
    pkt[4..6].copy_from_slice(&ident.to_be_bytes());
    pkt[6..8].copy_from_slice(&seq.to_be_bytes());
    pkt[8..12].copy_from_slice(&originate.to_be_bytes());
    let sum = checksum(&pkt);
    pkt[2..4].copy_from_slice(&sum.to_be_bytes());
    pkt
}

/// A timestamp reply with identifier `ident` in an IPv4 datagram (header first).
pub fn parse_reply(data: &[u8], ident: u16) -> Option<Stamps> {
    let ihl = usize::from(*data.first()? & 0x0f) * 4;
    let icmp = data.get(ihl..)?;
    if icmp.len() < TIMESTAMP_LEN || icmp[0] != TIMESTAMP_REPLY || checksum(icmp) != 0 {
        return None;
    }
    if u16::from_be_bytes([icmp[4], icmp[5]]) != ident {
        return None;
    }
    let word = |i: usize| u32::from_be_bytes([icmp[i], icmp[i + 1], icmp[i + 2], icmp[i + 3]]);
    // RFC 792: the high bit set means "not milliseconds since midnight UT".
    let stamp = |v: u32| (v & 0x8000_0000 == 0 && u64::from(v) < DAY_MS).then_some(v);
    Some(Stamps {
        seq: u16::from_be_bytes([icmp[6], icmp[7]]),
        originate: word(8),
        receive: stamp(word(12)),
        transmit: stamp(word(16)),
    })
}

/// Milliseconds since midnight UT of a Unix time in ms.
pub fn ms_of_day(unix_ms: u64) -> u32 {
    (unix_ms % DAY_MS) as u32
}

/// The Unix time (ms) of a stamp taken within half a day of `near_unix_ms`: the stamp's day is
/// the one that puts it nearest, so a stamp just past midnight next to a time just before it
/// lands on the next day.
pub fn to_unix_ms(stamp: u32, near_unix_ms: u64) -> u64 {
    let day = near_unix_ms - near_unix_ms % DAY_MS;
    [day.checked_sub(DAY_MS), Some(day), Some(day + DAY_MS)]
        .into_iter()
        .flatten()
        .map(|d| d + u64::from(stamp))
        .min_by_key(|t| t.abs_diff(near_unix_ms))
        .unwrap_or(day + u64::from(stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply as a Linux router sends it: our request's identifier, sequence and originate,
    /// its receive and transmit stamps, behind a 20-byte IPv4 header.
    fn reply(ident: u16, seq: u16, originate: u32, receive: u32, transmit: u32) -> Vec<u8> {
        let mut icmp = [0u8; TIMESTAMP_LEN];
        icmp[0] = TIMESTAMP_REPLY;
        icmp[4..6].copy_from_slice(&ident.to_be_bytes());
        icmp[6..8].copy_from_slice(&seq.to_be_bytes());
        icmp[8..12].copy_from_slice(&originate.to_be_bytes());
        icmp[12..16].copy_from_slice(&receive.to_be_bytes());
        icmp[16..20].copy_from_slice(&transmit.to_be_bytes());
        let sum = checksum(&icmp);
        icmp[2..4].copy_from_slice(&sum.to_be_bytes());
        let mut ip = vec![0x45u8];
        ip.extend([0u8; 19]);
        ip.extend(icmp);
        ip
    }

    #[test]
    fn a_request_is_type_13_with_its_originate_and_a_valid_checksum() {
        let pkt = request(7, 300, 45_000_123);
        assert_eq!((pkt[0], pkt[1]), (13, 0));
        assert_eq!(
            u32::from_be_bytes(pkt[8..12].try_into().unwrap()),
            45_000_123
        );
        assert_eq!(&pkt[12..20], &[0u8; 8]);
        assert_eq!(checksum(&pkt), 0);
    }

    #[test]
    fn our_replies_are_read_and_others_are_not() {
        let r = parse_reply(&reply(7, 300, 1_000, 1_012, 1_013), 7).expect("ours");
        assert_eq!(
            r,
            Stamps {
                seq: 300,
                originate: 1_000,
                receive: Some(1_012),
                transmit: Some(1_013)
            }
        );
        assert_eq!(parse_reply(&reply(8, 300, 1_000, 1_012, 1_013), 7), None);
        let mut bad = reply(7, 300, 1_000, 1_012, 1_013);
        bad[30] ^= 1;
        assert_eq!(parse_reply(&bad, 7), None, "a bad checksum");
        assert_eq!(parse_reply(&bad[..30], 7), None, "cut short");
        // Not milliseconds since midnight (the high bit), or past a day: no stamp.
        let odd = parse_reply(&reply(7, 1, 5, 0x8000_0001, DAY_MS as u32), 7).expect("ours");
        assert_eq!((odd.receive, odd.transmit), (None, None));
    }

    #[test]
    fn a_stamp_lands_on_the_day_that_puts_it_nearest() {
        let noon = 20_000 * DAY_MS + DAY_MS / 2;
        assert_eq!(to_unix_ms(ms_of_day(noon) + 5, noon), noon + 5);
        // Our clock just before midnight, the host's just after: the next day.
        let late = 20_001 * DAY_MS - 3;
        assert_eq!(to_unix_ms(2, late), 20_001 * DAY_MS + 2);
        // And the other way round.
        let early = 20_001 * DAY_MS + 1;
        assert_eq!(to_unix_ms((DAY_MS - 4) as u32, early), 20_001 * DAY_MS - 4);
    }
}
