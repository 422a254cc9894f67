//! ICMP echo: one socket type for `unbloat test`'s latency probes (`unbloat_measure::probe`) and
//! `unbloat tune`'s framing sweep (`unbloat_measure::sweep`).
//!
//! What callers can rely on:
//! - [`IcmpSocket::open`] tries an unprivileged ICMP socket (`SOCK_DGRAM`, allowed by
//!   `net.ipv4.ping_group_range`) first and a raw socket (root) second; an IPv4-mapped IPv6
//!   address is sent to as IPv4.
//! - Every echo carries a 64-bit test id and a 32-bit sequence at the start of its payload, so
//!   replies are matched without the 16-bit ICMP sequence wrapping and without trusting the
//!   identifier (which ping sockets rewrite). The payload may be longer (the sweep's sizes); an
//!   echo reply carries the same payload back, so it is the same size as the request.
//! - Receive times come from [`crate::rxtime`] (kernel arrival stamps) when the kernel gives them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::rxtime;

/// An ICMP echo socket: unprivileged (`SOCK_DGRAM`) or raw.
pub struct IcmpSocket {
    sock: Socket,
    target: SockAddr,
    v6: bool,
    /// A raw socket (receives the IPv4 header, and everyone's ICMP).
    pub raw: bool,
    ident: u16,
}

const ICMP_ECHO_REQUEST: u8 = 8;
const ICMP_ECHO_REPLY: u8 = 0;
const ICMPV6_ECHO_REQUEST: u8 = 128;
const ICMPV6_ECHO_REPLY: u8 = 129;
/// The probes' echo payload, and the least any echo carries: test id (8) + 32-bit sequence (4).
pub const ICMP_PAYLOAD: usize = 12;
/// The ICMP header (type, code, checksum, identifier, sequence): RFC 792, RFC 4443 (4.1).
pub const ICMP_HEADER: usize = 8;
/// The largest payload sent: a 1500-byte IPv4 packet (20-byte header), so no echo is fragmented
/// on an Ethernet-sized path. IPv6 (40-byte header) allows 20 bytes less; see [`IcmpSocket::payload_for`].
pub const MAX_ICMP_PAYLOAD: usize = 1500 - 20 - ICMP_HEADER;

/// RFC 1071 Internet checksum.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = u16::from_be_bytes([chunk[0], *chunk.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl IcmpSocket {
    /// Opens an ICMP socket towards `target`, unprivileged first, raw second.
    pub fn open(target: IpAddr, dscp: u8) -> Result<IcmpSocket, String> {
        let target = match target {
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map(IpAddr::V4)
                .unwrap_or(IpAddr::V6(v6)),
            v4 => v4,
        };
        let v6 = target.is_ipv6();
        let (domain, proto) = if v6 {
            (Domain::IPV6, Protocol::ICMPV6)
        } else {
            (Domain::IPV4, Protocol::ICMPV4)
        };
        let (sock, raw) = match Socket::new(domain, Type::DGRAM, Some(proto)) {
            Ok(s) => (s, false),
            Err(dgram) => match Socket::new(domain, Type::RAW, Some(proto)) {
                Ok(s) => (s, true),
                Err(raw) => {
                    return Err(format!(
                        "unprivileged ICMP sockets are not allowed ({dgram}; see sysctl \
                         net.ipv4.ping_group_range) and raw sockets need root ({raw})"
                    ))
                }
            },
        };
        let tos = u32::from(dscp & 0x3f) << 2;
        let marked = if v6 {
            sock.set_tclass_v6(tos)
        } else {
            sock.set_tos(tos)
        };
        marked.map_err(|e| format!("cannot mark ICMP probes with DSCP {dscp}: {e}"))?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| format!("ICMP socket: {e}"))?;
        // Without kernel stamps the receive times are user space's, as rxtime documents.
        let _ = rxtime::enable(&sock);
        let ident = (std::process::id() as u16) ^ 0x5a5a;
        Ok(IcmpSocket {
            sock,
            target: SocketAddr::new(target, 0).into(),
            v6,
            raw,
            ident,
        })
    }

    /// Whether echoes go out over IPv6 (after unmapping an IPv4-mapped address).
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// The IP header's bytes in front of every echo: 20 for IPv4 (no options), 40 for IPv6
    /// (the fixed header; no extension headers are sent).
    pub fn ip_header_bytes(&self) -> usize {
        if self.v6 {
            40
        } else {
            20
        }
    }

    /// The payload that makes an echo an IP packet of `ip_bytes`, header included; `None` when
    /// that packet is too small to carry the test id and sequence or larger than 1500 bytes.
    pub fn payload_for(&self, ip_bytes: usize) -> Option<usize> {
        let payload = ip_bytes.checked_sub(self.ip_header_bytes() + ICMP_HEADER)?;
        (ICMP_PAYLOAD..=1500 - self.ip_header_bytes() - ICMP_HEADER)
            .contains(&payload)
            .then_some(payload)
    }

    /// Reads one datagram from the socket, with its wake-up lag ([`rxtime::recv`]); honours
    /// the socket's 100 ms read timeout.
    pub fn recv(&self, buf: &mut [u8]) -> std::io::Result<rxtime::Received> {
        rxtime::recv(&self.sock, buf)
    }

    /// Sends one probe echo (the 12-byte payload).
    pub fn send_echo(&self, test_id: u64, seq: u32) -> std::io::Result<usize> {
        self.send_echo_sized(test_id, seq, ICMP_PAYLOAD)
    }

    /// Sends one echo whose payload is `payload` bytes ([`ICMP_PAYLOAD`] at least, clamped to
    /// [`MAX_ICMP_PAYLOAD`]); the bytes after the id and sequence count up, so that a link that
    /// compresses (PPP's, rare) cannot shrink them.
    pub fn send_echo_sized(
        &self,
        test_id: u64,
        seq: u32,
        payload: usize,
    ) -> std::io::Result<usize> {
        let len = ICMP_HEADER + payload.clamp(ICMP_PAYLOAD, MAX_ICMP_PAYLOAD);
        let mut buf = [0u8; ICMP_HEADER + MAX_ICMP_PAYLOAD];
        let pkt = &mut buf[..len];
        pkt[0] = if self.v6 {
            ICMPV6_ECHO_REQUEST
        } else {
            ICMP_ECHO_REQUEST
        };
        pkt[4..6].copy_from_slice(&self.ident.to_be_bytes());
        pkt[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
        pkt[8..16].copy_from_slice(&test_id.to_be_bytes());
        pkt[16..20].copy_from_slice(&seq.to_be_bytes());
        for (i, b) in pkt[20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        if !self.v6 {
            // The kernel fills the ICMPv6 checksum itself (it needs the pseudo-header).
            let sum = checksum(pkt);
            pkt[2..4].copy_from_slice(&sum.to_be_bytes());
        }
        self.sock.send_to(pkt, &self.target)
    }

    /// Parses a received datagram: the 32-bit sequence of one of our echo replies, and the
    /// reply's ICMP length (header and payload, without the IP header a raw socket delivers).
    pub fn parse_reply(&self, data: &[u8], test_id: u64) -> Option<(u32, usize)> {
        parse_reply(data, self.raw, self.v6, test_id)
    }
}

/// [`IcmpSocket::parse_reply`] for a socket that is `raw` (or a datagram one) and `v6` (or
/// IPv4); public for the fuzz targets (fuzz/), which have no socket.
#[doc(hidden)]
pub fn parse_reply(data: &[u8], raw: bool, v6: bool, test_id: u64) -> Option<(u32, usize)> {
    let icmp = if raw && !v6 {
        // Raw IPv4 sockets deliver the IP header first; its length is in the low nibble.
        let ihl = usize::from(*data.first()? & 0x0f) * 4;
        data.get(ihl..)?
    } else {
        data
    };
    let want = if v6 {
        ICMPV6_ECHO_REPLY
    } else {
        ICMP_ECHO_REPLY
    };
    if icmp.len() < ICMP_HEADER + ICMP_PAYLOAD || icmp[0] != want {
        return None;
    }
    if u64::from_be_bytes(icmp[8..16].try_into().ok()?) != test_id {
        return None;
    }
    Some((
        u32::from_be_bytes(icmp[16..20].try_into().ok()?),
        icmp.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 §3 example bytes: 00 01 f2 03 f4 f5 f6 f7 sum to ddf2 (one's complement 220d).
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        // A packet with its checksum filled in sums to zero.
        let mut pkt = [8u8, 0, 0, 0, 0x12, 0x34, 0, 1, 9, 9, 9];
        let sum = checksum(&pkt);
        pkt[2..4].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(checksum(&pkt), 0);
    }
}
