//! Link-layer compensation: how many bytes the link really sends for one IP packet.
//!
//! Heads up! The numbers are those of iproute2's `tc/q_cake.c` (`cake_parse_opt`, the overhead
//! keywords) and of `man tc-cake`, section OVERHEAD COMPENSATION, checked one by one against the
//! source. cake applies `overhead` on top of the IP packet (it strips the MAC header Linux counts,
//! net/sched/sch_cake.c `cake_calc_overhead`), then raises the result to `mpu`, then rounds it to
//! ATM cells or adds PTM's 64b/65b cost. `raw` keeps Linux's own length (with the 14-byte MAC header
//! on Ethernet devices) as the base instead.
//!
//! A [`LinkLayer`] holds exactly the numbers cake reports back in `tc -j qdisc` (`overhead`, `mpu`,
//! `atm` = "noatm" | "atm" | "ptm", `raw`), so verification can compare them one to one.
//!
//! unbloat's preset names are cake's keywords plus three for people rather than for tc:
//! - `ether-vlan`: as a *link* it means an Ethernet bottleneck with one 802.1Q tag, i.e. cake's
//!   `ethernet ether-vlan` (38 + 4 = 42 bytes, mpu 84). In cake, `ether-vlan` alone only adds 4.
//! - `vdsl2`: bridged PTM plus one VLAN tag, cake's `bridged-ptm ether-vlan` (22 + 4 = 26 bytes,
//!   ptm). Most VDSL2 ISPs (BT/Sky, Deutsche Telekom, ...) carry the customer's traffic in a VLAN on
//!   the PTM link; overestimating by 4 bytes when there is none costs at most 0.3 % of goodput,
//!   underestimating lets the modem's buffer fill with small packets. Use `bridged-ptm` to omit it.
//!   mpu 64 (an Ethernet frame with FCS, the floor of modern links per sqm-scripts' 2017 note).
//! - `none`: no compensation at all and no framing, overhead 0 relative to the IP packet.
//!
//! Every further tag (`vlan = 1`, or `ether-vlan` in an extra option string) adds 4 bytes.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// cake's limits (tc/q_cake.c: "valid range is -64 to 256", "valid range is 0 to 256").
pub const OVERHEAD_MIN: i32 = -64;
pub const OVERHEAD_MAX: i32 = 256;
pub const MPU_MAX: u32 = 256;
/// One 802.1Q tag (cake's `ether-vlan`).
pub const VLAN_TAG_BYTES: i32 = 4;

/// Cell framing below the packet: none, ATM cells (ADSL) or PTM 64b/65b (VDSL2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Framing {
    #[default]
    None,
    Atm,
    Ptm,
}

impl Framing {
    /// cake's keyword and the value of the `atm` key in `tc -j qdisc` output.
    pub fn cake_keyword(self) -> &'static str {
        match self {
            Framing::None => "noatm",
            Framing::Atm => "atm",
            Framing::Ptm => "ptm",
        }
    }
}

impl fmt::Display for Framing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Framing::None => "none",
            Framing::Atm => "atm",
            Framing::Ptm => "ptm",
        })
    }
}

impl FromStr for Framing {
    type Err = String;
    fn from_str(s: &str) -> Result<Framing, String> {
        match s {
            "none" | "noatm" => Ok(Framing::None),
            "atm" => Ok(Framing::Atm),
            "ptm" => Ok(Framing::Ptm),
            _ => Err(format!(
                "unknown framing {:?}; use atm, ptm or none",
                crate::clip::clip(s)
            )),
        }
    }
}

/// A named link: what the user says with `--link`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkPreset {
    Ethernet,
    EtherVlan,
    Docsis,
    Vdsl2,
    BridgedPtm,
    PppoePtm,
    IpoaVcmux,
    IpoaLlcsnap,
    BridgedVcmux,
    BridgedLlcsnap,
    PppoaVcmux,
    PppoaLlc,
    PppoeVcmux,
    PppoeLlcsnap,
    Conservative,
    Raw,
    None,
}

/// (preset, name, overhead, mpu, framing, raw, cake keywords). The cake keywords reproduce the
/// same numbers when typed to tc; the tests check the table against itself.
type Row = (
    LinkPreset,
    &'static str,
    i32,
    u32,
    Framing,
    bool,
    &'static [&'static str],
);
const TABLE: &[Row] = &[
    // "ethernet pre-amble & interframe gap & FCS": 38, mpu 84 (64 + 20).
    (
        LinkPreset::Ethernet,
        "ethernet",
        38,
        84,
        Framing::None,
        false,
        &["ethernet"],
    ),
    (
        LinkPreset::EtherVlan,
        "ether-vlan",
        42,
        84,
        Framing::None,
        false,
        &["ethernet", "ether-vlan"],
    ),
    // "DOCSIS cable shapers account for Ethernet frame with FCS": 18, mpu 64, noatm.
    (
        LinkPreset::Docsis,
        "docsis",
        18,
        64,
        Framing::None,
        false,
        &["docsis"],
    ),
    (
        LinkPreset::Vdsl2,
        "vdsl2",
        26,
        64,
        Framing::Ptm,
        false,
        &["bridged-ptm", "ether-vlan", "mpu", "64"],
    ),
    // 6 + 6 + 2 MAC, 4 FCS, 1 S + 1 Ck + 2 TC-CRC = 22, ptm.
    (
        LinkPreset::BridgedPtm,
        "bridged-ptm",
        22,
        0,
        Framing::Ptm,
        false,
        &["bridged-ptm"],
    ),
    // 2 PPP + 6 PPPoE + the 22 above = 30, ptm.
    (
        LinkPreset::PppoePtm,
        "pppoe-ptm",
        30,
        0,
        Framing::Ptm,
        false,
        &["pppoe-ptm"],
    ),
    (
        LinkPreset::IpoaVcmux,
        "ipoa-vcmux",
        8,
        0,
        Framing::Atm,
        false,
        &["ipoa-vcmux"],
    ),
    (
        LinkPreset::IpoaLlcsnap,
        "ipoa-llcsnap",
        16,
        0,
        Framing::Atm,
        false,
        &["ipoa-llcsnap"],
    ),
    (
        LinkPreset::BridgedVcmux,
        "bridged-vcmux",
        24,
        0,
        Framing::Atm,
        false,
        &["bridged-vcmux"],
    ),
    (
        LinkPreset::BridgedLlcsnap,
        "bridged-llcsnap",
        32,
        0,
        Framing::Atm,
        false,
        &["bridged-llcsnap"],
    ),
    (
        LinkPreset::PppoaVcmux,
        "pppoa-vcmux",
        10,
        0,
        Framing::Atm,
        false,
        &["pppoa-vcmux"],
    ),
    (
        LinkPreset::PppoaLlc,
        "pppoa-llc",
        14,
        0,
        Framing::Atm,
        false,
        &["pppoa-llc"],
    ),
    (
        LinkPreset::PppoeVcmux,
        "pppoe-vcmux",
        32,
        0,
        Framing::Atm,
        false,
        &["pppoe-vcmux"],
    ),
    (
        LinkPreset::PppoeLlcsnap,
        "pppoe-llcsnap",
        40,
        0,
        Framing::Atm,
        false,
        &["pppoe-llcsnap"],
    ),
    // "one whole ATM cell plus ATM framing": overhead 48 atm.
    (
        LinkPreset::Conservative,
        "conservative",
        48,
        0,
        Framing::Atm,
        false,
        &["conservative"],
    ),
    // Linux's own length, no framing: cake's `raw` (its default).
    (LinkPreset::Raw, "raw", 0, 0, Framing::None, true, &["raw"]),
    (
        LinkPreset::None,
        "none",
        0,
        0,
        Framing::None,
        false,
        &["overhead", "0", "noatm"],
    ),
];

impl LinkPreset {
    pub const ALL: [LinkPreset; 17] = [
        LinkPreset::Ethernet,
        LinkPreset::EtherVlan,
        LinkPreset::Docsis,
        LinkPreset::Vdsl2,
        LinkPreset::BridgedPtm,
        LinkPreset::PppoePtm,
        LinkPreset::IpoaVcmux,
        LinkPreset::IpoaLlcsnap,
        LinkPreset::BridgedVcmux,
        LinkPreset::BridgedLlcsnap,
        LinkPreset::PppoaVcmux,
        LinkPreset::PppoaLlc,
        LinkPreset::PppoeVcmux,
        LinkPreset::PppoeLlcsnap,
        LinkPreset::Conservative,
        LinkPreset::Raw,
        LinkPreset::None,
    ];

    fn row(self) -> &'static Row {
        // Every variant has exactly one row (tested), so the fallback is never taken.
        TABLE.iter().find(|r| r.0 == self).unwrap_or(&TABLE[0])
    }

    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// The compensation this preset stands for, before any explicit override.
    pub fn link_layer(self) -> LinkLayer {
        let r = self.row();
        LinkLayer {
            preset: Some(self),
            overhead: r.2,
            mpu: r.3,
            framing: r.4,
            raw: r.5,
        }
    }

    /// The cake keywords that give the same numbers (`bridged-ptm ether-vlan mpu 64`).
    pub fn cake_keywords(self) -> &'static [&'static str] {
        self.row().6
    }

    /// Every preset, in the order the docs and the forms list them.
    pub fn all() -> Vec<LinkPreset> {
        TABLE.iter().map(|r| r.0).collect()
    }

    /// Every accepted name, for error messages.
    pub fn names() -> String {
        TABLE.iter().map(|r| r.1).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for LinkPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LinkPreset {
    type Err = String;
    fn from_str(s: &str) -> Result<LinkPreset, String> {
        TABLE.iter().find(|r| r.1 == s).map(|r| r.0).ok_or_else(|| {
            format!(
                "unknown link {:?}; use one of {}",
                crate::clip::clip(s),
                LinkPreset::names()
            )
        })
    }
}

/// The resolved compensation, in the terms cake reports back (`tc -j qdisc`: `overhead`, `mpu`,
/// `atm`, `raw`). `overhead` is relative to the IP packet unless `raw`, where it is relative to
/// the length Linux counts (which includes the MAC header on an Ethernet device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinkLayer {
    /// The preset it came from, if any (for display; the numbers below are what counts).
    pub preset: Option<LinkPreset>,
    pub overhead: i32,
    pub mpu: u32,
    pub framing: Framing,
    pub raw: bool,
}

/// Why explicit compensation values cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("--overhead {0}: out of range -64..256 (cake's limit)")]
    Overhead(i64),
    #[error("--mpu {0}: out of range 0..256 (cake's limit)")]
    Mpu(i64),
    #[error("--framing {framing} conflicts with --link {preset}, which is {preset_framing} framed; drop one of them")]
    FramingConflict {
        framing: Framing,
        preset: LinkPreset,
        preset_framing: Framing,
    },
    #[error("--vlan {0}: at most 2 extra 802.1Q tags")]
    Vlan(u32),
}

impl LinkLayer {
    /// Resolve a preset (default `ethernet`) with the explicit values that override it.
    /// `vlan` adds 4 bytes per tag on top of the preset (cake's repeated `ether-vlan`).
    pub fn resolve(
        preset: Option<LinkPreset>,
        overhead: Option<i64>,
        mpu: Option<i64>,
        framing: Option<Framing>,
        vlan: Option<u32>,
    ) -> Result<LinkLayer, LinkError> {
        let mut link = preset.unwrap_or(DEFAULT_PRESET).link_layer();
        if let Some(o) = overhead {
            if !(OVERHEAD_MIN as i64..=OVERHEAD_MAX as i64).contains(&o) {
                return Err(LinkError::Overhead(o));
            }
            link.overhead = o as i32;
        }
        if let Some(tags) = vlan {
            if tags > 2 {
                return Err(LinkError::Vlan(tags));
            }
            link.overhead += VLAN_TAG_BYTES * tags as i32;
            if link.overhead > OVERHEAD_MAX {
                return Err(LinkError::Overhead(link.overhead as i64));
            }
        }
        if let Some(m) = mpu {
            if !(0..=MPU_MAX as i64).contains(&m) {
                return Err(LinkError::Mpu(m));
            }
            link.mpu = m as u32;
        }
        if let Some(f) = framing {
            // A preset that names a cell framing (ADSL's atm, VDSL2's ptm) knows it better than a
            // contradicting flag; an unframed preset (ethernet, docsis, raw) may be given one.
            if let (Some(p), pf) = (preset, link.framing) {
                if pf != Framing::None && pf != f {
                    return Err(LinkError::FramingConflict {
                        framing: f,
                        preset: p,
                        preset_framing: pf,
                    });
                }
            }
            link.framing = f;
        }
        Ok(link)
    }

    /// cake's words for these numbers, explicit so that what is typed is what the kernel reports:
    /// `overhead 26 mpu 64 ptm`, or `raw overhead 0 noatm`... `mpu` is always written, because
    /// `tc qdisc add` with no mpu leaves the kernel's 0, and writing it makes the plan self-evident.
    pub fn cake_words(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.raw {
            w.push("raw".to_string());
        }
        w.push("overhead".to_string());
        w.push(self.overhead.to_string());
        w.push("mpu".to_string());
        w.push(self.mpu.to_string());
        w.push(self.framing.cake_keyword().to_string());
        w
    }
}

impl LinkLayer {
    /// Bytes the link spends on an IP packet of `ip_len` bytes, in the order of the kernel's
    /// `cake_calc_overhead()`: overhead (on the IP packet, or on Linux's length, which adds
    /// `mac_header`, when raw), then mpu, then ATM cells (48 payload bytes per 53-byte cell) or
    /// PTM's 64b/65b (one byte per started 64).
    pub fn wire_bytes(&self, ip_len: u32, mac_header: u32) -> u32 {
        let base = ip_len as i64 + if self.raw { mac_header as i64 } else { 0 };
        let len = (base + self.overhead as i64).max(self.mpu as i64).max(0) as u32;
        match self.framing {
            Framing::None => len,
            Framing::Atm => len.div_ceil(48) * 53,
            Framing::Ptm => len + len.div_ceil(64),
        }
    }
}

/// With no `--link`, unbloat assumes an Ethernet-framed bottleneck (fibre ONT, cable modem or VDSL
/// modem in bridge mode all hand over Ethernet frames): 38 bytes, mpu 84. sqm-scripts' default,
/// no compensation at all, is "ALMOST NEVER the correct overhead" (seed 001); overestimating by a
/// few bytes costs little goodput, underestimating lets a queue grow in the modem.
pub const DEFAULT_PRESET: LinkPreset = LinkPreset::Ethernet;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_has_one_row_and_parses_back() {
        for p in LinkPreset::ALL {
            assert_eq!(TABLE.iter().filter(|r| r.0 == p).count(), 1, "{p:?}");
            assert_eq!(p.name().parse::<LinkPreset>(), Ok(p));
        }
        assert_eq!(TABLE.len(), LinkPreset::ALL.len());
    }

    #[test]
    fn numbers_are_those_of_q_cake_c() {
        let n = |p: LinkPreset| {
            let l = p.link_layer();
            (l.overhead, l.mpu, l.framing)
        };
        use Framing::*;
        assert_eq!(n(LinkPreset::IpoaVcmux), (8, 0, Atm));
        assert_eq!(n(LinkPreset::IpoaLlcsnap), (16, 0, Atm));
        assert_eq!(n(LinkPreset::BridgedVcmux), (24, 0, Atm));
        assert_eq!(n(LinkPreset::BridgedLlcsnap), (32, 0, Atm));
        assert_eq!(n(LinkPreset::PppoaVcmux), (10, 0, Atm));
        assert_eq!(n(LinkPreset::PppoaLlc), (14, 0, Atm));
        assert_eq!(n(LinkPreset::PppoeVcmux), (32, 0, Atm));
        assert_eq!(n(LinkPreset::PppoeLlcsnap), (40, 0, Atm));
        assert_eq!(n(LinkPreset::PppoePtm), (30, 0, Ptm));
        assert_eq!(n(LinkPreset::BridgedPtm), (22, 0, Ptm));
        assert_eq!(n(LinkPreset::Ethernet), (38, 84, None));
        assert_eq!(n(LinkPreset::EtherVlan), (42, 84, None));
        assert_eq!(n(LinkPreset::Docsis), (18, 64, None));
        assert_eq!(n(LinkPreset::Conservative), (48, 0, Atm));
        assert_eq!(n(LinkPreset::Vdsl2), (26, 64, Ptm));
        assert!(LinkPreset::Raw.link_layer().raw);
    }

    #[test]
    fn explicit_values_override_the_preset() {
        let l =
            LinkLayer::resolve(Some(LinkPreset::Docsis), Some(22), Some(72), None, None).unwrap();
        assert_eq!((l.overhead, l.mpu, l.framing), (22, 72, Framing::None));
        let l =
            LinkLayer::resolve(Some(LinkPreset::BridgedPtm), None, None, None, Some(1)).unwrap();
        assert_eq!(l.overhead, 26);
        let l = LinkLayer::resolve(
            Some(LinkPreset::Ethernet),
            None,
            None,
            Some(Framing::Ptm),
            None,
        )
        .unwrap();
        assert_eq!(l.framing, Framing::Ptm);
        let l = LinkLayer::resolve(None, None, None, None, None).unwrap();
        assert_eq!(l.preset, Some(DEFAULT_PRESET));
    }

    #[test]
    fn ranges_and_conflicts_name_the_option() {
        let e = LinkLayer::resolve(None, Some(300), None, None, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--overhead 300: out of range -64..256 (cake's limit)"
        );
        let e = LinkLayer::resolve(None, Some(-65), None, None, None).unwrap_err();
        assert!(e.to_string().starts_with("--overhead -65:"), "{e}");
        let e = LinkLayer::resolve(None, None, Some(257), None, None).unwrap_err();
        assert!(
            e.to_string().starts_with("--mpu 257: out of range 0..256"),
            "{e}"
        );
        let e = LinkLayer::resolve(None, None, Some(-1), None, None).unwrap_err();
        assert!(e.to_string().starts_with("--mpu -1:"), "{e}");
        let e = LinkLayer::resolve(
            Some(LinkPreset::PppoePtm),
            None,
            None,
            Some(Framing::Atm),
            None,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("--framing atm conflicts with --link pppoe-ptm"),
            "{e}"
        );
        assert!(LinkLayer::resolve(
            Some(LinkPreset::PppoeLlcsnap),
            None,
            None,
            Some(Framing::Ptm),
            None
        )
        .is_err());
        assert!(LinkLayer::resolve(None, Some(256), None, None, Some(1)).is_err());
    }

    #[test]
    fn wire_bytes_follow_cake_calc_overhead() {
        // 1500 + 40 = 1540 bytes = 33 cells (32 carry 1536) = 1749 bytes: sqm's 1749.
        assert_eq!(
            LinkPreset::PppoeLlcsnap.link_layer().wire_bytes(1500, 14),
            1749
        );
        assert_eq!(LinkPreset::Ethernet.link_layer().wire_bytes(1500, 14), 1538);
        assert_eq!(LinkPreset::Ethernet.link_layer().wire_bytes(40, 14), 84);
        assert_eq!(
            LinkPreset::BridgedPtm.link_layer().wire_bytes(1500, 14),
            1522 + 24
        );
        assert_eq!(LinkPreset::Raw.link_layer().wire_bytes(1500, 14), 1514);
    }

    #[test]
    fn cake_words_are_explicit() {
        assert_eq!(
            LinkPreset::Vdsl2.link_layer().cake_words().join(" "),
            "overhead 26 mpu 64 ptm"
        );
        assert_eq!(
            LinkPreset::Raw.link_layer().cake_words().join(" "),
            "raw overhead 0 mpu 0 noatm"
        );
    }
}
