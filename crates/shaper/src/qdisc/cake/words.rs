//! cake's keyword lists: its tin modes and flow modes in the order the docs and the forms list
//! them, and the link-layer keywords whose overheads q_cake.c adds up. The words themselves are
//! read by the options' one grammar ([`crate::options::words`]) through each value's
//! `keyword()` ([`Diffserv::keyword`], [`FlowMode::keyword`], [`Framing::cake_keyword`], ...),
//! so a word printed is a word read back.
//!
//! Source: iproute2's tc/q_cake.c `cake_parse_opt`.

use crate::linklayer::Framing;
use crate::model::{Diffserv, FlowMode};

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
}
