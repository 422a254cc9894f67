//! cake's words without a value, in: the one table that both readers of cake's grammar use
//! (`--extra-egress`/`extra-*` options in [`crate::options`], and sqm-scripts' option strings in
//! [`crate::sqm_import`]), so that a word means the same in both. The words out are the
//! `keyword()` of each value ([`Diffserv::keyword`], [`FlowMode::keyword`],
//! [`AckFilter::keyword`], [`Framing::cake_keyword`]); this table is built from them, so a word
//! printed is a word read back.
//!
//! Source: iproute2's tc/q_cake.c `cake_parse_opt`. Words with a value (`bandwidth`, `rtt N`,
//! `overhead`, `mpu`, `memlimit`), the link-layer keywords (whose overheads add up) and
//! `ingress`/`egress` (which depend on the direction) stay with their readers.

use crate::linklayer::Framing;
use crate::model::{AckFilter, Diffserv, FlowMode};
use unbloat_units::Time;

/// What one word sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    Diffserv(Diffserv),
    /// A flow mode, which unbloat's isolation of the same name says
    /// (`Isolation::from(FlowMode)` in [`crate::options`], which imports this module).
    FlowMode(FlowMode),
    Nat(bool),
    Wash(bool),
    SplitGso(bool),
    AckFilter(AckFilter),
    Framing(Framing),
    Rtt(Time),
}

/// cake's tin modes, in the order the docs and the web page list them.
pub const DIFFSERV: [Diffserv; 5] = [
    Diffserv::Besteffort,
    Diffserv::Diffserv3,
    Diffserv::Diffserv4,
    Diffserv::Diffserv8,
    Diffserv::Precedence,
];
/// Their words, for lists that must be constant (the web page's choices); a test checks that
/// they are [`DIFFSERV`]'s keywords.
pub const DIFFSERV_WORDS: &[&str] = &[
    "besteffort",
    "diffserv3",
    "diffserv4",
    "diffserv8",
    "precedence",
];

/// cake's flow isolation modes.
pub const FLOW_MODES: [FlowMode; 8] = [
    FlowMode::Flowblind,
    FlowMode::Srchost,
    FlowMode::Dsthost,
    FlowMode::Hosts,
    FlowMode::Flows,
    FlowMode::DualSrchost,
    FlowMode::DualDsthost,
    FlowMode::TripleIsolate,
];

const ACK_FILTERS: [AckFilter; 3] = [
    AckFilter::Disabled,
    AckFilter::Enabled,
    AckFilter::Aggressive,
];
const FRAMINGS: [Framing; 3] = [Framing::None, Framing::Atm, Framing::Ptm];

/// cake's named round-trip times (tc/q_cake.c `presets`, the interval column).
pub const RTT_NAMES: &[(&str, Time)] = &[
    ("datacentre", Time::from_micros(100)),
    ("lan", Time::from_millis(1)),
    ("metro", Time::from_millis(10)),
    ("regional", Time::from_millis(30)),
    ("internet", Time::from_millis(100)),
    ("oceanic", Time::from_millis(300)),
    ("satellite", Time::from_millis(1000)),
    ("interplanetary", Time::from_secs(3600)),
];

/// One of cake's words without a value, or None for any other word.
pub fn word(w: &str) -> Option<Word> {
    // q_cake.c takes `diffserv` as diffserv4 (never printed: tc -j says "diffserv4").
    if w == "diffserv" {
        return Some(Word::Diffserv(Diffserv::Diffserv4));
    }
    let on_off = |on: &str, off: &str| (w == on || w == off).then_some(w == on);
    DIFFSERV
        .into_iter()
        .find(|d| d.keyword() == w)
        .map(Word::Diffserv)
        .or_else(|| {
            FLOW_MODES
                .into_iter()
                .find(|m| m.keyword() == w)
                .map(Word::FlowMode)
        })
        .or_else(|| on_off("nat", "nonat").map(Word::Nat))
        .or_else(|| on_off("wash", "nowash").map(Word::Wash))
        .or_else(|| on_off("split-gso", "no-split-gso").map(Word::SplitGso))
        .or_else(|| {
            ACK_FILTERS
                .into_iter()
                .find(|a| a.keyword() == w)
                .map(Word::AckFilter)
        })
        .or_else(|| {
            FRAMINGS
                .into_iter()
                .find(|f| f.cake_keyword() == w)
                .map(Word::Framing)
        })
        .or_else(|| {
            RTT_NAMES
                .iter()
                .find(|(n, _)| *n == w)
                .map(|(_, t)| Word::Rtt(*t))
        })
}

/// q_cake.c's ATM and PTM keywords: the bytes they add and their framing.
pub fn adds_overhead(w: &str) -> Option<(i64, Framing)> {
    let atm = Framing::Atm;
    Some(match w {
        "ipoa-vcmux" => (8, atm),
        "ipoa-llcsnap" => (16, atm),
        "bridged-vcmux" => (24, atm),
        "bridged-llcsnap" => (32, atm),
        "pppoa-vcmux" => (10, atm),
        "pppoa-llc" => (14, atm),
        "pppoe-vcmux" => (32, atm),
        "pppoe-llcsnap" => (40, atm),
        "pppoe-ptm" => (30, Framing::Ptm),
        "bridged-ptm" => (22, Framing::Ptm),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_constant_diffserv_words_are_the_keywords() {
        let words: Vec<&str> = DIFFSERV.iter().map(|d| d.keyword()).collect();
        assert_eq!(words, DIFFSERV_WORDS);
    }

    #[test]
    fn every_word_printed_is_read_back_as_itself() {
        for d in DIFFSERV {
            assert_eq!(word(d.keyword()), Some(Word::Diffserv(d)));
        }
        for m in FLOW_MODES {
            assert_eq!(word(m.keyword()), Some(Word::FlowMode(m)));
        }
        for a in ACK_FILTERS {
            assert_eq!(word(a.keyword()), Some(Word::AckFilter(a)));
        }
        for f in FRAMINGS {
            assert_eq!(word(f.cake_keyword()), Some(Word::Framing(f)));
        }
        for (w, on) in [
            ("nat", true),
            ("nonat", false),
            ("wash", true),
            ("nowash", false),
        ] {
            assert!(matches!(word(w), Some(Word::Nat(b)) | Some(Word::Wash(b)) if b == on));
        }
        assert_eq!(word("split-gso"), Some(Word::SplitGso(true)));
        assert_eq!(word("diffserv"), Some(Word::Diffserv(Diffserv::Diffserv4)));
        assert_eq!(word("internet"), Some(Word::Rtt(Time::from_millis(100))));
        assert_eq!(word("dual-host"), None, "unbloat's word, not cake's");
        assert_eq!(word("bandwidth"), None);
    }
}
