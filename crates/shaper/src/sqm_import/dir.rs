//! One direction's options as sqm's words leave them ([`DirWords`]), cake's link-layer state
//! while it reads them ([`LinkState`]), and why a word is left out ([`Problem`]). Shared by the
//! reader of the option strings ([`super::words`]) and by the mapping; it imports neither.

use super::model::NoteKind;
use crate::linklayer::Framing;
use crate::model::Direction;
use crate::options::ShapeOptions;
use std::collections::BTreeMap;

/// cake's link-layer state as q_cake.c keeps it while it reads words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkState {
    pub overhead: i64,
    /// `overhead_set`: an overhead attribute is sent (else cake counts Linux's length: raw).
    pub overhead_set: bool,
    /// `overhead_override`: the word `raw`, or sqm's size table (the same base: Linux's length).
    pub raw: bool,
    pub mpu: i64,
    /// `atm`: None is "not sent" (noatm on a new qdisc).
    pub framing: Option<Framing>,
    /// Any word or sqm option said something about the link.
    pub touched: bool,
}

/// The compensation a [`LinkState`] ends with: raw base?, overhead, mpu, framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub raw: bool,
    pub overhead: i64,
    pub mpu: i64,
    pub framing: Framing,
}

impl LinkState {
    /// What the kernel ends up holding, or `None` when nothing was said (unbloat's default).
    pub fn resolved(&self) -> Option<Link> {
        self.touched.then_some(Link {
            raw: self.raw || !self.overhead_set,
            overhead: self.overhead,
            mpu: self.mpu.max(0),
            framing: self.framing.unwrap_or(Framing::None),
        })
    }
}

/// One direction's options as the words leave them, and where each TOML key's value came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirWords {
    pub opts: ShapeOptions,
    pub link: LinkState,
    /// TOML key -> the words that set it (`eqdisc_opts: diffserv4`), for the line's comment.
    pub sources: BTreeMap<&'static str, Vec<String>>,
    /// Values written without a unit and read in tc's (`rtt 50` is 50 us): (word, reading), for
    /// a note each, since a person typing them may well have meant another unit.
    pub bare: Vec<(String, String)>,
}

impl DirWords {
    /// Record where `key`'s value came from. cake keeps the last of competing words, so a new
    /// source replaces the old one, except for the link layer, whose keywords add up.
    pub fn source(&mut self, key: &'static str, text: String) {
        let v = self.sources.entry(key).or_default();
        if !matches!(key, "overhead" | "mpu" | "framing" | "link") {
            v.clear();
        }
        if !v.contains(&text) {
            v.push(text);
        }
    }
}

/// A word that is left out, and why.
pub struct Problem {
    pub used: usize,
    pub kind: NoteKind,
    pub text: String,
}

pub fn tc_refuses(used: usize, dir: Direction, why: String) -> Problem {
    Problem {
        used,
        kind: NoteKind::Warning,
        text: format!(
            "{why}; tc refuses it, so sqm-scripts' tc command for the {dir} qdisc failed and \
             sqm-scripts shaped nothing that way; left out"
        ),
    }
}
