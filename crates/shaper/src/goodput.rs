//! TCP goodput for a gross shaper rate: how much application data a saturating TCP transfer can
//! carry through a shaper set to `rate`, once headers, per-packet overhead and link framing are
//! paid for.
//!
//! Heads up: this is the sqm-scripts formula (seed 001, OpenWrt's "SQM details" page),
//!
//! ```text
//! goodput = rate * (MTU - encapsulation - IP header - TCP header) / wire_size(MTU)
//! wire_size(len) = framing(max(len + overhead, mpu))
//! ```
//!
//! where `framing` is the identity, ATM's cells (48 bytes of payload per 53-byte cell, the last
//! cell padded) or PTM's 64b/65b encoding. The order (overhead, then mpu, then framing) and the
//! rounding are those of the kernel's `cake_calc_overhead()` in net/sched/sch_cake.c, so the model
//! predicts what cake will actually let through, not an idealised figure. With no mpu and no
//! framing it is exactly the seed's formula, and reproduces its worked examples to the digit:
//! 93.39 % for Ethernet + VLAN + PPPoE + IPv4 + TCP timestamps, a 3.82 % loss for DOCSIS.
//!
//! Everything here is pure integer arithmetic on bytes; the rate result is truncated to whole
//! bits per second so that `goodput <= rate` holds exactly.

use crate::linklayer::LinkLayer;
use std::fmt;
use unbloat_units::{Rate, Size};

/// The Ethernet MTU that nearly every access link carries; the size a bulk TCP transfer fills.
pub const ETHERNET_MTU: u64 = 1500;

/// The bytes of a 53-byte ATM cell that carry payload (ITU-T I.361; AAL5 pads the last cell).
pub const ATM_CELL_PAYLOAD: u64 = 48;
/// The bytes an ATM cell occupies on the line: 48 of payload plus a 5-byte header.
pub const ATM_CELL_SIZE: u64 = 53;
/// PTM's 64b/65b encoding (IEEE 802.3 clause 61.3): one extra byte per 64 bytes or part thereof,
/// as sch_cake.c counts it ("conservative and easier to calculate than the precise value").
pub const PTM_BLOCK: u64 = 64;

/// The IP version of the transfer, which sets the IP header size (no options, no extension
/// headers: the common case for bulk TCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IpVersion {
    /// RFC 791 header without options: 20 bytes.
    V4,
    /// RFC 8200 fixed header: 40 bytes.
    V6,
}

impl IpVersion {
    pub const fn header_bytes(self) -> u64 {
        match self {
            IpVersion::V4 => 20,
            IpVersion::V6 => 40,
        }
    }
}

/// The TCP header a bulk transfer carries in every segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TcpHeader {
    /// RFC 9293 header without options: 20 bytes.
    Plain,
    /// With RFC 7323 timestamps (Linux's default, `net.ipv4.tcp_timestamps = 1`): 20 + 12 = 32 bytes.
    Timestamps,
}

impl TcpHeader {
    pub const fn header_bytes(self) -> u64 {
        match self {
            TcpHeader::Plain => 20,
            TcpHeader::Timestamps => 32,
        }
    }
}

/// How the link below the shaper frames each packet (the link-layer module's type): none, ATM
/// cells (`ceil(len / 48) * 53`) or PTM 64b/65b (`len + ceil(len / 64)`).
pub use crate::linklayer::Framing;

/// The bytes a frame of `len` bytes occupies on the line under `framing`.
pub const fn frame(framing: Framing, len: u64) -> u64 {
    match framing {
        Framing::None => len,
        Framing::Atm => len.div_ceil(ATM_CELL_PAYLOAD) * ATM_CELL_SIZE,
        Framing::Ptm => len + len.div_ceil(PTM_BLOCK),
    }
}

/// The MAC header Linux counts in a packet's length on an Ethernet device; cake's `raw` mode
/// shapes that length instead of the IP packet's.
pub const ETHERNET_HEADER: i32 = 14;

/// What the shaper adds to every packet: the same three knobs as cake's overhead keywords
/// (`man tc-cake`, OVERHEAD COMPENSATION) and a stab.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct LinkFraming {
    /// Bytes added to each packet; cake accepts -64..=256.
    pub overhead: i32,
    /// Minimum packet size after the overhead is added (cake accepts 0..=256).
    pub mpu: u32,
    pub framing: Framing,
}

impl LinkFraming {
    /// Ethernet: `overhead 38 mpu 84 noatm` (preamble, inter-frame gap, FCS).
    pub const ETHERNET: LinkFraming = LinkFraming {
        overhead: 38,
        mpu: 84,
        framing: Framing::None,
    };
    /// DOCSIS: `overhead 18 mpu 64 noatm`.
    pub const DOCSIS: LinkFraming = LinkFraming {
        overhead: 18,
        mpu: 64,
        framing: Framing::None,
    };

    /// The bytes a packet of `len` bytes (as Linux counts it) occupies on the link, in the order
    /// sch_cake.c's `cake_calc_overhead()` applies them: overhead, then mpu, then framing. A
    /// negative overhead larger than the packet leaves an empty frame rather than wrapping.
    pub fn wire_bytes(&self, len: u64) -> u64 {
        let with_overhead = if self.overhead >= 0 {
            len.saturating_add(self.overhead as u64)
        } else {
            len.saturating_sub(u64::from(self.overhead.unsigned_abs()))
        };
        frame(self.framing, with_overhead.max(u64::from(self.mpu)))
    }
}

impl From<&LinkLayer> for LinkFraming {
    /// What cake does with a link layer: in `raw` mode the base is Linux's length, which on an
    /// Ethernet device includes the 14-byte MAC header, so that header counts as overhead here.
    fn from(l: &LinkLayer) -> LinkFraming {
        LinkFraming {
            overhead: l.overhead + if l.raw { ETHERNET_HEADER } else { 0 },
            mpu: l.mpu,
            framing: l.framing,
        }
    }
}

/// Everything that decides what one full-size TCP segment carries and costs on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct GoodputModel {
    /// The packet size the shaper sees (normally the interface MTU, 1500).
    pub mtu: Size,
    /// Tunnel headers carried inside that MTU, e.g. 8 for PPPoE (6 PPPoE + 2 PPP) when the
    /// shaper sits on the Ethernet device below the PPPoE session.
    pub encapsulation: Size,
    pub ip: IpVersion,
    pub tcp: TcpHeader,
    pub link: LinkFraming,
}

/// Why a goodput model has no meaning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoodputError {
    #[error("an MTU of {mtu} bytes leaves no room for TCP data after {headers} bytes of headers")]
    NoPayload { mtu: u64, headers: u64 },
}

impl GoodputModel {
    /// The common case: a 1500-byte MTU, no tunnel, IPv4 and TCP with timestamps (Linux's
    /// default), over `link`.
    pub const fn ipv4_timestamps(link: LinkFraming) -> GoodputModel {
        GoodputModel {
            mtu: Size::from_bytes(ETHERNET_MTU),
            encapsulation: Size::from_bytes(0),
            ip: IpVersion::V4,
            tcp: TcpHeader::Timestamps,
            link,
        }
    }

    /// Bytes of all headers inside the MTU (tunnel + IP + TCP).
    pub fn header_bytes(&self) -> u64 {
        self.encapsulation.bytes() + self.ip.header_bytes() + self.tcp.header_bytes()
    }

    /// TCP payload bytes in one full-size segment (the MSS).
    pub fn payload_bytes(&self) -> Result<u64, GoodputError> {
        let headers = self.header_bytes();
        match self.mtu.bytes().checked_sub(headers) {
            Some(p) if p > 0 => Ok(p),
            _ => Err(GoodputError::NoPayload {
                mtu: self.mtu.bytes(),
                headers,
            }),
        }
    }

    /// Bytes one full-size packet occupies on the link, as the shaper accounts for it.
    pub fn wire_bytes(&self) -> u64 {
        self.link.wire_bytes(self.mtu.bytes())
    }

    /// The share of the gross rate that is TCP payload, as an exact fraction (payload, wire).
    /// The wire size is never below the payload unless a negative overhead eats into headers, so
    /// the fraction is capped at 1: a shaper cannot deliver more than its rate.
    pub fn fraction(&self) -> Result<(u64, u64), GoodputError> {
        let payload = self.payload_bytes()?;
        let wire = self.wire_bytes().max(payload);
        Ok((payload, wire))
    }

    /// The share of the gross rate that is TCP payload, in percent (93.39 for seed 001's example).
    pub fn percent(&self) -> Result<f64, GoodputError> {
        let (p, w) = self.fraction()?;
        Ok(100.0 * p as f64 / w as f64)
    }

    /// The TCP goodput through a shaper set to `rate`, truncated to whole bits per second.
    pub fn goodput(&self, rate: Rate) -> Result<Rate, GoodputError> {
        let (p, w) = self.fraction()?;
        let bits = u128::from(rate.bits_per_sec()) * u128::from(p) / u128::from(w);
        // bits <= rate because p <= w, so the conversion cannot fail; saturate rather than panic.
        Ok(Rate::from_bits_per_sec(
            u64::try_from(bits).unwrap_or(u64::MAX),
        ))
    }
}

/// The best TCP goodput a link of gross `rate` with `link` framing can deliver to a bulk
/// transfer of Linux defaults (1500-byte MTU, IPv4, TCP timestamps): the yardstick the lab
/// divides measured goodput by ("goodput as a share of the link's theoretical TCP goodput").
pub fn theoretical_tcp_goodput(rate: Rate, link: &LinkLayer) -> Rate {
    // 1500 - 20 - 32 leaves 1448 payload bytes, so the model is always valid.
    GoodputModel::ipv4_timestamps(LinkFraming::from(link))
        .goodput(rate)
        .unwrap_or(Rate::ZERO)
}

impl fmt::Display for GoodputModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MTU {} (-{} encapsulation, {:?}, TCP {:?}), overhead {} mpu {} framing {:?}",
            self.mtu.bytes(),
            self.encapsulation.bytes(),
            self.ip,
            self.tcp,
            self.link.overhead,
            self.link.mpu,
            self.link.framing
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn two_decimals(x: f64) -> String {
        format!("{x:.2}")
    }

    /// Seed 001: "for an ethernet link (effectively 38B overhead) with a VLAN tag (4B) and PPPoE
    /// (6+2=8B), IPv4 (without options: 20B), TCP (with rfc 1323 timestamps: 20+12=32B) one can
    /// expect ~93% throughput 100 * ((1500 - 8 - 20 - 20 - 12) / (1500 + 38 + 4)) = 93.39".
    #[test]
    fn seed_001_ethernet_vlan_pppoe_timestamps_is_93_39_percent() {
        let m = GoodputModel {
            mtu: Size::from_bytes(1500),
            encapsulation: Size::from_bytes(8),
            ip: IpVersion::V4,
            tcp: TcpHeader::Timestamps,
            link: LinkFraming {
                overhead: 38 + 4,
                mpu: 0,
                framing: Framing::None,
            },
        };
        assert_eq!(m.fraction(), Ok((1440, 1542)));
        assert_eq!(two_decimals(m.percent().unwrap()), "93.39");
        // The same with cake's ethernet mpu: a full-size packet is far above it.
        let with_mpu = GoodputModel {
            link: LinkFraming { mpu: 84, ..m.link },
            ..m
        };
        assert_eq!(two_decimals(with_mpu.percent().unwrap()), "93.39");
        assert_eq!(
            m.goodput(Rate::from_mbit(100)),
            Ok(Rate::from_bits_per_sec(93_385_214))
        );
    }

    /// Seed 001: "for a DOCSIS link with 18 bytes overhead you at best get a
    /// 100-100*(1500-20-20)/(1500+18) = 3.82% lower good-put than gross bandwidth".
    #[test]
    fn seed_001_docsis_loses_3_82_percent() {
        let m = GoodputModel {
            tcp: TcpHeader::Plain,
            ..GoodputModel::ipv4_timestamps(LinkFraming::DOCSIS)
        };
        assert_eq!(m.fraction(), Ok((1460, 1518)));
        assert_eq!(two_decimals(100.0 - m.percent().unwrap()), "3.82");
    }

    #[test]
    fn framing_matches_sch_cake() {
        // ATM: 1500 + 32 (pppoe-llcsnap 40 is another case) = 1532 -> 32 cells -> 1696 bytes.
        assert_eq!(frame(Framing::Atm, 1532), 32 * 53);
        assert_eq!(frame(Framing::Atm, 48), 53);
        assert_eq!(frame(Framing::Atm, 49), 106);
        // PTM: one byte per 64 or part thereof: 1522 -> 1522 + 24.
        assert_eq!(frame(Framing::Ptm, 1522), 1546);
        assert_eq!(frame(Framing::Ptm, 64), 65);
        assert_eq!(frame(Framing::None, 1500), 1500);
    }

    #[test]
    fn overhead_then_mpu_then_framing() {
        let l = LinkFraming {
            overhead: 18,
            mpu: 64,
            framing: Framing::Atm,
        };
        // 40 + 18 = 58 < 64 -> 64 -> two cells.
        assert_eq!(l.wire_bytes(40), 106);
        let neg = LinkFraming {
            overhead: -64,
            mpu: 0,
            framing: Framing::None,
        };
        assert_eq!(neg.wire_bytes(40), 0);
        assert_eq!(neg.wire_bytes(1500), 1436);
    }

    #[test]
    fn a_tiny_mtu_is_an_error_not_a_panic() {
        let m = GoodputModel {
            mtu: Size::from_bytes(52),
            ..GoodputModel::ipv4_timestamps(LinkFraming::ETHERNET)
        };
        assert_eq!(
            m.payload_bytes(),
            Err(GoodputError::NoPayload {
                mtu: 52,
                headers: 52
            })
        );
        assert!(m.goodput(Rate::from_mbit(1)).is_err());
    }

    #[test]
    fn theoretical_goodput_of_vdsl2() {
        // bridged-ptm ether-vlan: overhead 26 ptm; 1500 + 26 = 1526 -> + 24 = 1550 on the line.
        let l = LinkLayer {
            preset: None,
            overhead: 26,
            mpu: 72,
            framing: Framing::Ptm,
            raw: false,
        };
        let g = theoretical_tcp_goodput(Rate::from_kbit(19_950), &l);
        assert_eq!(g.bits_per_sec(), 19_950_000u64 * 1448 / 1550);
        // raw: Linux's 1514-byte frame is the base: 1514 + 0, no framing.
        let raw = LinkLayer {
            overhead: 0,
            mpu: 0,
            framing: Framing::None,
            raw: true,
            ..l
        };
        let g = theoretical_tcp_goodput(Rate::from_mbit(100), &raw);
        assert_eq!(g.bits_per_sec(), 100_000_000u64 * 1448 / 1514);
    }

    fn any_framing() -> impl Strategy<Value = Framing> {
        prop_oneof![Just(Framing::None), Just(Framing::Atm), Just(Framing::Ptm)]
    }

    fn any_model() -> impl Strategy<Value = GoodputModel> {
        (
            100u64..9000,
            0u64..16,
            any::<bool>(),
            any::<bool>(),
            -64i32..=256,
            0u32..=256,
            any_framing(),
        )
            .prop_map(|(mtu, enc, v6, ts, overhead, mpu, framing)| GoodputModel {
                mtu: Size::from_bytes(mtu),
                encapsulation: Size::from_bytes(enc),
                ip: if v6 { IpVersion::V6 } else { IpVersion::V4 },
                tcp: if ts {
                    TcpHeader::Timestamps
                } else {
                    TcpHeader::Plain
                },
                link: LinkFraming {
                    overhead,
                    mpu,
                    framing,
                },
            })
    }

    proptest! {
        #[test]
        fn goodput_never_exceeds_rate(m in any_model(), bps in 0u64..100_000_000_000) {
            let rate = Rate::from_bits_per_sec(bps);
            let g = m.goodput(rate).unwrap();
            prop_assert!(g <= rate);
        }

        #[test]
        fn more_overhead_never_raises_goodput(m in any_model(), extra in 0i32..64, bps in 1u64..10_000_000_000) {
            let rate = Rate::from_bits_per_sec(bps);
            let more = GoodputModel { link: LinkFraming { overhead: m.link.overhead + extra, ..m.link }, ..m };
            prop_assert!(more.goodput(rate).unwrap() <= m.goodput(rate).unwrap());
        }

        #[test]
        fn atm_and_ptm_never_beat_no_framing(m in any_model(), bps in 1u64..10_000_000_000) {
            let rate = Rate::from_bits_per_sec(bps);
            let plain = GoodputModel { link: LinkFraming { framing: Framing::None, ..m.link }, ..m };
            for framing in [Framing::Atm, Framing::Ptm] {
                let framed = GoodputModel { link: LinkFraming { framing, ..m.link }, ..m };
                prop_assert!(framed.goodput(rate).unwrap() <= plain.goodput(rate).unwrap());
            }
        }

        #[test]
        fn ipv6_and_timestamps_cost_goodput(m in any_model(), bps in 1u64..10_000_000_000) {
            let rate = Rate::from_bits_per_sec(bps);
            let v6 = GoodputModel { ip: IpVersion::V6, ..m };
            let v4 = GoodputModel { ip: IpVersion::V4, ..m };
            prop_assert!(v6.goodput(rate).unwrap() <= v4.goodput(rate).unwrap());
            let ts = GoodputModel { tcp: TcpHeader::Timestamps, ..m };
            let plain = GoodputModel { tcp: TcpHeader::Plain, ..m };
            prop_assert!(ts.goodput(rate).unwrap() <= plain.goodput(rate).unwrap());
        }
    }
}
