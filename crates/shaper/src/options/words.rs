//! cake's and fq_codel's option grammars, one word at a time: the one reader of both, for the
//! option strings a user writes (`--egress-options`, `extra-ingress`) and for sqm-scripts'
//! (`eqdisc_opts`, its recipes' words), so that a word means the same in both.
//!
//! Heads up! The grammars are iproute2's `tc/q_cake.c` (`cake_parse_opt`) and
//! `tc/q_fq_codel.c` (`fq_codel_parse_opt`). The words themselves are declared with their
//! options ([`super::table`]: `Word::Value("rtt")`, `Word::Means("nonat", "false")`, the type's
//! keywords); this module only walks them. Values are read as a user types them ([`Units::User`]:
//! a number needs its unit) or as tc reads them ([`Units::Tc`]: `rtt 100` *is* 100 us, because
//! sqm-scripts hands its strings to tc unchanged).
//!
//! What a word does to the options is set here; what the caller makes of it (an error for a
//! user's string, a note for sqm's, cake's adding link-layer keywords) is the caller's.

use super::decl::{Opt, Word};
use super::tc_units::{bare, tc_rate, tc_time, tc_unsigned};
use super::{Qdisc, ShapeOptions, OPTIONS};
use crate::model::Direction;

/// How the values after the words are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// As a user types them: a number needs its unit.
    User,
    /// As tc reads them: a bare number is in tc's unit.
    Tc,
}

/// What the words at one place said, and how many of them it took.
pub struct Step {
    pub used: usize,
    pub said: Said,
}

pub enum Said {
    /// `opt` took the word(s) (the options hold its value now); `reading` is tc's reading of a
    /// bare number ([`Units::Tc`]).
    Set {
        opt: &'static Opt,
        reading: Option<String>,
    },
    /// A word that changes nothing: `egress` on the upload, cake's mode there anyway.
    Nothing,
    /// A word tc takes that unbloat refuses on purpose, and why ([`REFUSED_WORDS`]).
    Refused(&'static str),
    /// A word tc takes and does nothing with, and why.
    Ignored(&'static str),
    /// Not a word of this grammar.
    Unknown,
    /// The word needs a value after it: what kind of value.
    MissingValue(&'static str),
    /// The value after the word cannot be read, and why.
    BadValue(String),
}

/// Words tc would take but unbloat refuses, with the reason shown to the user. Every hint names
/// only flags, config keys and commands that exist (a test checks them against the binary's).
pub const REFUSED_WORDS: &[(Qdisc, &str, &str)] = &[
    (
        Qdisc::Cake,
        "autorate-ingress",
        "unbloat shapes at a fixed rate; set --down, and change it in place with `unbloat set-rate`",
    ),
    (
        Qdisc::Cake,
        "unlimited",
        "a shaper without a rate does not remove bufferbloat; set --down/--up",
    ),
    (
        Qdisc::Cake,
        "ingress",
        "cake's ingress mode belongs on the ingress (IFB) side",
    ),
    (
        Qdisc::Cake,
        "vdsl2",
        "it is an unbloat --link name, not a cake word; use --link",
    ),
    (
        Qdisc::Cake,
        "none",
        "it is an unbloat --link name, not a cake word; use --link",
    ),
    (Qdisc::FqCodel, "ce_threshold", "not supported by unbloat"),
    (Qdisc::FqCodel, "ce_threshold_selector", "not supported by unbloat"),
    (Qdisc::FqCodel, "drop_batch", "not supported by unbloat"),
];

/// The refused words that take a value after them (tc reads both as one option).
const REFUSED_WITH_VALUE: &[&str] = &["ce_threshold", "ce_threshold_selector", "drop_batch"];

/// Refused words that are not tc's at all (unbloat's `--link` names): tc refuses them, so they
/// read as [`Said::Unknown`], and the refusal's reason is only a hint.
const NOT_TC_WORDS: &[&str] = &["vdsl2", "none"];

/// cake's words that tc reads and drops.
const IGNORED: &[(Qdisc, &str, &str)] = &[(
    Qdisc::Cake,
    "via-ethernet",
    "tc ignores it (cake finds the Ethernet header itself)",
)];

/// Reads the option at the start of `words` with `qdisc`'s grammar on `side`, into `o`.
pub fn read(
    qdisc: Qdisc,
    side: Direction,
    units: Units,
    words: &[&str],
    o: &mut ShapeOptions,
) -> Step {
    let Some(&w) = words.first() else {
        return Step {
            used: 0,
            said: Said::Nothing,
        };
    };
    let value = words.get(1).copied();
    let step = |used, said| Step { used, said };
    for opt in OPTIONS.iter().filter(|o| o.dir.admits(side)) {
        for form in opt.words.of(qdisc) {
            match *form {
                Word::Value(word) if word == w => {
                    let Some(v) = value else {
                        return step(1, Said::MissingValue(opt.field.noun()));
                    };
                    let set = match units {
                        Units::User => opt.field.set(o, v).map(|()| None),
                        Units::Tc => as_tc_reads(opt.field.noun(), v)
                            .and_then(|(text, reading)| opt.field.set(o, &text).map(|()| reading)),
                    };
                    return match set {
                        Ok(reading) => step(2, Said::Set { opt, reading }),
                        Err(e) => step(2, Said::BadValue(e)),
                    };
                }
                Word::Means(word, v) if word == w => {
                    return match opt.field.set(o, v) {
                        Ok(()) => step(1, Said::Set { opt, reading: None }),
                        Err(e) => step(1, Said::BadValue(e)),
                    };
                }
                Word::Keywords if opt.field.set_word(o, w) => {
                    return step(1, Said::Set { opt, reading: None });
                }
                Word::Counts(word) if word == w && opt.field.add_one(o) => {
                    return step(1, Said::Set { opt, reading: None });
                }
                _ => {}
            }
        }
    }
    // cake's default mode on an egress device: nothing to say.
    if qdisc == Qdisc::Cake && side == Direction::Egress && w == "egress" {
        return step(1, Said::Nothing);
    }
    if let Some((_, _, why)) = IGNORED
        .iter()
        .find(|(q, word, _)| *q == qdisc && *word == w)
    {
        return step(1, Said::Ignored(why));
    }
    match refused(qdisc, w).filter(|_| !NOT_TC_WORDS.contains(&w)) {
        Some(why) => step(
            if REFUSED_WITH_VALUE.contains(&w) {
                2
            } else {
                1
            },
            Said::Refused(why),
        ),
        None => step(1, Said::Unknown),
    }
}

/// What tc reads `v` as (iproute2 `get_rate64`, `get_time`, `get_unsigned`: a bare number is
/// bit/s, microseconds, decimal or 0x hex), written as a user writes it (`20000` is `20kbit`),
/// with that reading when the number was bare (for a note: a person typing `rtt 100` may well
/// have meant milliseconds). `noun` is what the option holds; other values are read as written.
fn as_tc_reads(noun: &str, v: &str) -> Result<(String, Option<String>), String> {
    let text = match noun {
        "rate" => tc_rate(v)?.to_string(),
        "time" => tc_time(v)?.to_string(),
        "number" => {
            let (minus, digits) = v.strip_prefix('-').map_or(("", v), |d| ("-", d));
            let n = tc_unsigned(digits).ok_or_else(|| format!("`{v}`: not a whole number"))?;
            format!("{minus}{n}")
        }
        _ => return Ok((v.to_string(), None)),
    };
    let reading = (noun != "number" && bare(v)).then(|| text.clone());
    Ok((text, reading))
}

/// Why unbloat refuses `w`, one of `qdisc`'s words, if it does.
pub fn refused(qdisc: Qdisc, w: &str) -> Option<&'static str> {
    REFUSED_WORDS
        .iter()
        .find(|(q, word, _)| *q == qdisc && *word == w)
        .map(|(_, _, why)| *why)
}

/// Whether `w` is one of `qdisc`'s words for an option (on either side).
pub fn is_word(qdisc: Qdisc, w: &str) -> bool {
    [Direction::Egress, Direction::Ingress]
        .into_iter()
        .any(|side| {
            let mut scratch = ShapeOptions::default();
            let said = read(qdisc, side, Units::Tc, &[w, "1"], &mut scratch).said;
            matches!(
                said,
                Said::Set { .. } | Said::BadValue(_) | Said::Ignored(_) | Said::Nothing
            )
        })
}

/// The words `qdisc` takes, for a hint: `limit, flows, ..., ecn, noecn`.
pub fn listed(qdisc: Qdisc) -> String {
    let mut out: Vec<&str> = Vec::new();
    for opt in OPTIONS {
        for form in opt.words.of(qdisc) {
            let w = match *form {
                Word::Value(w) | Word::Means(w, _) | Word::Counts(w) => w,
                Word::Keywords => continue,
            };
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_reads_bare_numbers_in_its_units_and_says_so() {
        assert_eq!(
            as_tc_reads("rate", "20000"),
            Ok(("20kbit".into(), Some("20kbit".into())))
        );
        assert_eq!(as_tc_reads("rate", "20mbit"), Ok(("20mbit".into(), None)));
        assert_eq!(
            as_tc_reads("time", "50"),
            Ok(("50us".into(), Some("50us".into())))
        );
        assert_eq!(as_tc_reads("number", "0x10"), Ok(("16".into(), None)));
        assert_eq!(as_tc_reads("number", "-10"), Ok(("-10".into(), None)));
        assert!(as_tc_reads("number", "ten").is_err());
    }
}
