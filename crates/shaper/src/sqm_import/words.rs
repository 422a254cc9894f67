//! sqm's option strings (`eqdisc_opts`, `iqdisc_opts`, and the words its recipes add), read word
//! by word as tc would read them, into unbloat's typed options.
//!
//! Heads up! The grammars are iproute2's `tc/q_cake.c` (`cake_parse_opt`) and
//! `tc/q_fq_codel.c` (`fq_codel_parse_opt`), and the values are read with tc's own units
//! (`tc/tc_util.c`: `get_rate64`, `get_time`, `get_size`), because sqm-scripts hands these strings
//! to tc unchanged: here `rtt 100` *is* 100 us and `bandwidth 20000` *is* 20 kbit/s. The typed
//! result is written with explicit units, so nothing reaches unbloat's TOML that it would read
//! another way, and nothing is passed through as text.
//!
//! cake keeps the last of competing words, and its link-layer keywords *add* to the overhead said
//! before them (`overhead 44 pppoe-llcsnap` is 84; `ethernet` also sets mpu 84, `docsis` mpu 64):
//! [`LinkState`] follows q_cake.c line by line. A word tc would refuse ("What is ...?") made
//! sqm-scripts' whole tc command fail, so that direction was not shaped at all; such words, and
//! the ones unbloat refuses on purpose (`autorate-ingress`, `fwmark`, ...; see
//! [`REFUSED_WORDS`](crate::options::REFUSED_WORDS)), are left out with a note naming the word.

use super::model::{Note, NoteKind};
use crate::linklayer::Framing;
use crate::model::{AckFilter, Diffserv, Direction};
use crate::options::{Isolation, Qdisc, ShapeOptions, REFUSED_WORDS, RTT_NAMES};
use std::collections::BTreeMap;
use unbloat_units::{Rate, Size, Time};

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

/// The words of one option string or recipe, with the name notes give their origin.
pub struct Words<'a> {
    /// `eqdisc_opts`, `layer_cake.qos`, ...
    pub origin: &'a str,
    pub text: &'a str,
}

/// Read `words` in order into `dir` with `qdisc`'s grammar for `direction`; notes about words
/// that are left out go to `notes` under `queue`.
pub fn apply(
    dir: &mut DirWords,
    words: &Words,
    qdisc: Qdisc,
    direction: Direction,
    queue: &str,
    notes: &mut Vec<Note>,
) {
    let list: Vec<&str> = words.text.split_whitespace().collect();
    let mut i = 0;
    while i < list.len() {
        let w = list[i];
        let value = list.get(i + 1).copied();
        let step = match qdisc {
            Qdisc::Cake => cake_word(dir, w, value, direction, words.origin),
            Qdisc::FqCodel => fq_codel_word(dir, w, value, direction, words.origin),
        };
        let (used, problem) = match step {
            Ok(used) => (used, None),
            Err(p) => (p.used, Some(p)),
        };
        for (shown, reading) in std::mem::take(&mut dir.bare) {
            notes.push(Note {
                queue: queue.to_string(),
                option: Some(words.origin.to_string()),
                value: Some(shown),
                kind: NoteKind::Warning,
                text: format!(
                    "no unit: tc reads it as {reading}, and so did sqm-scripts; carried as \
                     {reading} (unbloat would have refused the bare number): check it is meant"
                ),
            });
        }
        if let Some(p) = problem {
            let shown = match (p.used, value) {
                (2, Some(v)) => format!("{w} {v}"),
                _ => w.to_string(),
            };
            notes.push(Note {
                queue: queue.to_string(),
                option: Some(words.origin.to_string()),
                value: Some(shown),
                kind: p.kind,
                text: p.text,
            });
        }
        i += used.max(1);
    }
}

/// A word that is left out, and why.
struct Problem {
    used: usize,
    kind: NoteKind,
    text: String,
}

fn tc_refuses(used: usize, dir: Direction, why: String) -> Problem {
    Problem {
        used,
        kind: NoteKind::Warning,
        text: format!(
            "{why}; tc refuses it, so sqm-scripts' tc command for the {dir} qdisc failed and \
             sqm-scripts shaped nothing that way; left out"
        ),
    }
}

fn refused(qdisc: Qdisc, w: &str, used: usize) -> Option<Problem> {
    REFUSED_WORDS
        .iter()
        .find(|(q, word, _)| *q == qdisc && *word == w)
        .map(|(_, _, why)| Problem {
            used,
            kind: NoteKind::NotMapped,
            text: format!("not taken by unbloat: {why}"),
        })
}

/// One cake word (q_cake.c `cake_parse_opt`): how many words it used, or why it is left out.
fn cake_word(
    d: &mut DirWords,
    w: &str,
    value: Option<&str>,
    dir: Direction,
    origin: &str,
) -> Result<usize, Problem> {
    let src = |v: &str| format!("{origin}: {v}");
    let need = |what: &str| {
        value.ok_or_else(|| tc_refuses(1, dir, format!("`{w}` needs a {what} after it")))
    };
    let o = &mut d.opts;
    let key: &'static str;
    let link = |d: &mut DirWords, f: &dyn Fn(&mut LinkState)| {
        f(&mut d.link);
        d.link.touched = true;
    };
    match w {
        "bandwidth" => {
            let v = need("rate")?;
            let r = tc_rate(v).map_err(|e| tc_refuses(2, dir, e))?;
            if bare(v) {
                d.bare.push((format!("{w} {v}"), r.to_string()));
            }
            let key = match dir {
                Direction::Egress => {
                    d.opts.up = Some(r);
                    "up"
                }
                Direction::Ingress => {
                    d.opts.down = Some(r);
                    "down"
                }
            };
            d.source(key, src(&format!("bandwidth {v} = {r}")));
            return Ok(2);
        }
        "rtt" => {
            let v = need("time")?;
            let t = tc_time(v).map_err(|e| tc_refuses(2, dir, e))?;
            if bare(v) {
                d.bare.push((format!("{w} {v}"), t.to_string()));
            }
            let o = &mut d.opts;
            o.rtt = Some(t);
            d.source("rtt", src(&format!("rtt {v} = {t}")));
            return Ok(2);
        }
        "memlimit" => {
            let v = need("size")?;
            let s: Size = v
                .parse()
                .map_err(|e: unbloat_units::UnitError| tc_refuses(2, dir, e.to_string()))?;
            o.memlimit = Some(s);
            d.source("memlimit", src(&format!("memlimit {v}")));
            return Ok(2);
        }
        "overhead" | "mpu" => {
            let v = need("number")?;
            let (lo, hi) = if w == "overhead" {
                (-64, 256)
            } else {
                (0, 256)
            };
            let n: i64 = v
                .parse()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| {
                    tc_refuses(
                        2,
                        dir,
                        format!("`{w} {v}`: tc takes whole numbers {lo}..{hi}"),
                    )
                })?;
            if w == "overhead" {
                link(d, &|l| {
                    l.overhead = n;
                    l.overhead_set = true;
                });
            } else {
                link(d, &|l| l.mpu = n);
            }
            d.source(w_key(w), src(&format!("{w} {v}")));
            return Ok(2);
        }
        "fwmark" => {
            return Err(
                refused(Qdisc::Cake, w, 2).unwrap_or_else(|| tc_refuses(2, dir, String::new()))
            )
        }
        "besteffort" | "diffserv3" | "diffserv4" | "diffserv" | "diffserv8" | "precedence" => {
            o.diffserv = Some(match w {
                "besteffort" => Diffserv::Besteffort,
                "diffserv3" => Diffserv::Diffserv3,
                "diffserv8" => Diffserv::Diffserv8,
                "precedence" => Diffserv::Precedence,
                _ => Diffserv::Diffserv4,
            });
            key = "diffserv";
        }
        "flowblind" | "srchost" | "dsthost" | "hosts" | "flows" | "dual-srchost"
        | "dual-dsthost" | "triple-isolate" => {
            o.isolation = w.parse::<Isolation>().ok();
            key = "isolation";
        }
        "nat" | "nonat" => {
            o.nat = Some(w == "nat");
            key = "nat";
        }
        "wash" | "nowash" => {
            o.wash = Some(w == "wash");
            key = "wash";
        }
        "split-gso" | "no-split-gso" => {
            o.split_gso = Some(w == "split-gso");
            key = "split-gso";
        }
        "ack-filter" | "ack-filter-aggressive" | "no-ack-filter" => {
            o.ack_filter = Some(match w {
                "ack-filter" => AckFilter::Enabled,
                "no-ack-filter" => AckFilter::Disabled,
                _ => AckFilter::Aggressive,
            });
            key = "ack-filter";
        }
        "ingress" | "egress" if dir == Direction::Ingress => {
            o.ingress_keyword = Some(w == "ingress");
            key = "ingress-keyword";
        }
        // cake's default mode on an egress device: nothing to say.
        "egress" => key = "",
        "via-ethernet" => {
            return Err(Problem {
                used: 1,
                kind: NoteKind::Ignored,
                text: "tc ignores it (cake finds the Ethernet header itself)".to_string(),
            })
        }
        "atm" | "ptm" | "noatm" => {
            let f = w.parse::<Framing>().ok();
            link(d, &|l| l.framing = f);
            key = "framing";
        }
        "raw" => {
            link(d, &|l| {
                l.framing = Some(Framing::None);
                l.overhead = 0;
                l.overhead_set = true;
                l.raw = true;
            });
            key = "link";
        }
        "conservative" => {
            link(d, &|l| {
                l.framing = Some(Framing::Atm);
                l.overhead = 48;
                l.overhead_set = true;
            });
            key = "overhead";
        }
        "ethernet" => {
            link(d, &|l| {
                l.overhead += 38;
                l.overhead_set = true;
                l.mpu = 84;
            });
            key = "overhead";
        }
        "docsis" => {
            link(d, &|l| {
                l.framing = Some(Framing::None);
                l.overhead += 18;
                l.overhead_set = true;
                l.mpu = 64;
            });
            key = "overhead";
        }
        "ether-vlan" => {
            link(d, &|l| {
                l.overhead += 4;
                l.overhead_set = true;
            });
            key = "overhead";
        }
        _ => {
            if let Some(add) = adds_overhead(w) {
                link(d, &|l| {
                    l.framing = Some(add.1);
                    l.overhead += add.0;
                    l.overhead_set = true;
                });
                key = "overhead";
            } else if let Some((_, t)) = RTT_NAMES.iter().find(|(n, _)| *n == w) {
                o.rtt = Some(*t);
                key = "rtt";
            } else if let Some(p) =
                refused(Qdisc::Cake, w, 1).filter(|_| !matches!(w, "vdsl2" | "none"))
            {
                return Err(p);
            } else {
                return Err(tc_refuses(
                    1,
                    dir,
                    format!(
                        "not a cake word (tc: \"What is \\\"{}\\\"?\")",
                        crate::clip::clip(w)
                    ),
                ));
            }
        }
    }
    if !key.is_empty() {
        d.source(key, src(w));
    }
    Ok(1)
}

fn w_key(w: &str) -> &'static str {
    if w == "mpu" {
        "mpu"
    } else {
        "overhead"
    }
}

/// q_cake.c's ATM and PTM keywords: the bytes they add and their framing.
fn adds_overhead(w: &str) -> Option<(i64, Framing)> {
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

/// One fq_codel word (q_fq_codel.c `fq_codel_parse_opt`).
fn fq_codel_word(
    d: &mut DirWords,
    w: &str,
    value: Option<&str>,
    dir: Direction,
    origin: &str,
) -> Result<usize, Problem> {
    let need = || value.ok_or_else(|| tc_refuses(1, dir, format!("`{w}` needs a value after it")));
    let number = |v: &str| -> Result<u32, Problem> {
        tc_unsigned(v).ok_or_else(|| tc_refuses(2, dir, format!("`{w} {v}`: not a whole number")))
    };
    let o = &mut d.opts;
    let (key, used): (&'static str, usize) = match w {
        "limit" => {
            o.limit = Some(number(need()?)?);
            ("limit", 2)
        }
        "flows" => {
            o.flows = Some(number(need()?)?);
            ("flows", 2)
        }
        "quantum" => {
            o.quantum = Some(number(need()?)?);
            ("quantum", 2)
        }
        "target" | "interval" => {
            let v = need()?;
            let t = tc_time(v).map_err(|e| tc_refuses(2, dir, e))?;
            if bare(v) {
                d.bare.push((format!("{w} {v}"), t.to_string()));
            }
            let o = &mut d.opts;
            if w == "target" {
                o.target = Some(t);
                ("target", 2)
            } else {
                o.interval = Some(t);
                ("interval", 2)
            }
        }
        "memory_limit" => {
            let v = need()?;
            let s: Size = v
                .parse()
                .map_err(|e: unbloat_units::UnitError| tc_refuses(2, dir, e.to_string()))?;
            o.memory_limit = Some(s);
            ("memory-limit", 2)
        }
        "ecn" | "noecn" => {
            let on = w == "ecn";
            match dir {
                Direction::Egress => o.ecn_egress = Some(on),
                Direction::Ingress => o.ecn_ingress = Some(on),
            }
            (
                match dir {
                    Direction::Egress => "ecn-egress",
                    Direction::Ingress => "ecn-ingress",
                },
                1,
            )
        }
        "ce_threshold" | "ce_threshold_selector" | "drop_batch" => {
            return Err(
                refused(Qdisc::FqCodel, w, 2).unwrap_or_else(|| tc_refuses(2, dir, String::new()))
            )
        }
        _ => {
            let hint = if adds_overhead(w).is_some() || cake_only(w) {
                "a cake word, which fq_codel does not take"
            } else {
                "not an fq_codel word"
            };
            return Err(tc_refuses(
                1,
                dir,
                format!("{hint} (tc: \"What is \\\"{}\\\"?\")", crate::clip::clip(w)),
            ));
        }
    };
    let shown = match (used, value) {
        (2, Some(v)) => format!("{w} {v}"),
        _ => w.to_string(),
    };
    d.source(key, format!("{origin}: {shown}"));
    Ok(used)
}

fn cake_only(w: &str) -> bool {
    let mut d = DirWords::default();
    cake_word(&mut d, w, Some("1"), Direction::Egress, "").is_ok()
}

/// A number with no unit after it (and not 0, which means the same in every unit).
fn bare(v: &str) -> bool {
    v.chars().all(|c| c.is_ascii_digit() || c == '.')
        && v.chars().any(|c| c.is_ascii_digit() && c != '0')
}

/// tc's `get_unsigned` (strtoul with base 0: decimal, `0x` hex).
fn tc_unsigned(v: &str) -> Option<u32> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

fn split_number(v: &str) -> (&str, String) {
    let at = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    (&v[..at], v[at..].to_ascii_lowercase())
}

/// tc's `get_rate64`: a bare number is bit/s, `bit` units are bits, `bps` units are BYTES.
pub fn tc_rate(v: &str) -> Result<Rate, String> {
    let (num, unit) = split_number(v);
    let bad = || format!("`{v}` is not a rate tc reads");
    if num.is_empty() {
        return Err(bad());
    }
    let (text, bytes) = if unit.is_empty() {
        (format!("{num}bit"), false)
    } else if let Some(prefix) = unit.strip_suffix("bps") {
        (format!("{num}{prefix}bit"), true)
    } else if unit.ends_with("bit") {
        (format!("{num}{unit}"), false)
    } else {
        return Err(bad());
    };
    let r: Rate = text.parse().map_err(|_| bad())?;
    Ok(match bytes {
        true => Rate::from_bits_per_sec(r.bits_per_sec().saturating_mul(8)),
        false => r,
    })
}

/// tc's `get_time`: a bare number is microseconds; s, ms, us and their long forms.
pub fn tc_time(v: &str) -> Result<Time, String> {
    let (num, unit) = split_number(v);
    let ok = matches!(
        unit.as_str(),
        "" | "s" | "sec" | "secs" | "ms" | "msec" | "msecs" | "us" | "usec" | "usecs"
    );
    if num.is_empty() || !ok {
        return Err(format!("`{v}` is not a time tc reads"));
    }
    let unit = if unit.is_empty() {
        "us".to_string()
    } else {
        unit
    };
    format!("{num}{unit}")
        .parse()
        .map_err(|_| format!("`{v}` is not a time tc reads"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::*;

    fn run(qdisc: Qdisc, dir: Direction, text: &str) -> (DirWords, Vec<Note>) {
        let mut d = DirWords::default();
        let mut notes = Vec::new();
        apply(
            &mut d,
            &Words {
                origin: "eqdisc_opts",
                text,
            },
            qdisc,
            dir,
            "q",
            &mut notes,
        );
        (d, notes)
    }

    #[test]
    fn sqm_cake_words_become_typed_options_with_tc_units() {
        let (d, notes) = run(
            Qdisc::Cake,
            Egress,
            "nat dual-srchost diffserv4 ack-filter rtt 100 bandwidth 20000 memlimit 4mb",
        );
        let said: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].starts_with("q: eqdisc_opts 'rtt 100': warning: no unit: tc reads it as 100us"),
            "{}",
            said[0]
        );
        assert!(
            said[1].contains("'bandwidth 20000': warning: no unit: tc reads it as 20kbit"),
            "{}",
            said[1]
        );
        assert_eq!(d.opts.nat, Some(true));
        assert_eq!(d.opts.isolation, Some(Isolation::DualSrchost));
        assert_eq!(d.opts.diffserv, Some(Diffserv::Diffserv4));
        assert_eq!(d.opts.ack_filter, Some(AckFilter::Enabled));
        // tc's units: a bare time is microseconds, a bare rate bit/s.
        assert_eq!(d.opts.rtt, Some(Time::from_micros(100)));
        assert_eq!(d.opts.up, Some(Rate::from_kbit(20)));
        assert_eq!(d.opts.memlimit, Some(Size::from_bytes(4 << 20)));
        assert_eq!(d.sources["diffserv"], vec!["eqdisc_opts: diffserv4"]);
        let (d, _) = run(Qdisc::Cake, Ingress, "ingress metro bandwidth 10mbps");
        assert_eq!(d.opts.ingress_keyword, Some(true));
        assert_eq!(d.opts.rtt, Some(Time::from_millis(10)));
        assert_eq!(d.opts.down, Some(Rate::from_mbit(80)), "tc's mbps is bytes");
    }

    #[test]
    fn sqm_cake_link_keywords_add_as_q_cake_c_does() {
        let mut d = DirWords {
            link: LinkState {
                overhead: 44,
                overhead_set: true,
                touched: true,
                ..LinkState::default()
            },
            ..DirWords::default()
        };
        let mut notes = vec![];
        let w = Words {
            origin: "eqdisc_opts",
            text: "pppoe-llcsnap ether-vlan",
        };
        apply(&mut d, &w, Qdisc::Cake, Egress, "q", &mut notes);
        let l = d.link.resolved().unwrap();
        assert_eq!(
            (l.raw, l.overhead, l.mpu, l.framing),
            (false, 88, 0, Framing::Atm)
        );
        let (d, _) = run(Qdisc::Cake, Egress, "docsis");
        let l = d.link.resolved().unwrap();
        assert_eq!((l.overhead, l.mpu, l.framing), (18, 64, Framing::None));
        let (d, _) = run(Qdisc::Cake, Egress, "raw overhead 10 atm");
        let l = d.link.resolved().unwrap();
        assert_eq!((l.raw, l.overhead, l.framing), (true, 10, Framing::Atm));
        // atm alone: no overhead attribute, so cake counts Linux's length (raw).
        let (d, _) = run(Qdisc::Cake, Egress, "atm");
        assert!(d.link.resolved().unwrap().raw);
        assert_eq!(run(Qdisc::Cake, Egress, "nat").0.link.resolved(), None);
    }

    #[test]
    fn sqm_words_left_out_are_named_with_the_reason() {
        let (d, notes) = run(
            Qdisc::Cake,
            Egress,
            "nat frobnicate autorate-ingress fwmark 0xff ingress overhead 300 rtt",
        );
        assert_eq!(d.opts.nat, Some(true));
        let said: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
        assert_eq!(said.len(), 6, "{said:#?}");
        assert!(
            said[0].starts_with("q: eqdisc_opts 'frobnicate': warning: not a cake word"),
            "{}",
            said[0]
        );
        assert!(
            said[0].contains("sqm-scripts shaped nothing that way"),
            "{}",
            said[0]
        );
        assert!(
            said[1].contains("'autorate-ingress': not mapped: not taken by unbloat"),
            "{}",
            said[1]
        );
        assert!(said[2].contains("'fwmark 0xff': not mapped"), "{}", said[2]);
        assert!(said[3].contains("'ingress': not mapped"), "{}", said[3]);
        assert!(said[4].contains("'overhead 300': warning"), "{}", said[4]);
        assert!(
            said[5].contains("'rtt': warning: `rtt` needs a time"),
            "{}",
            said[5]
        );
    }

    #[test]
    fn sqm_fq_codel_words() {
        let (d, notes) = run(
            Qdisc::FqCodel,
            Ingress,
            "limit 2000 target 5000 interval 100ms quantum 0x12c noecn memory_limit 4mb ce_threshold 1ms nat",
        );
        assert_eq!(d.opts.limit, Some(2000));
        assert_eq!(d.opts.target, Some(Time::from_millis(5)));
        assert_eq!(d.opts.interval, Some(Time::from_millis(100)));
        assert_eq!(d.opts.quantum, Some(300));
        assert_eq!(d.opts.ecn_ingress, Some(false));
        assert_eq!(d.opts.memory_limit, Some(Size::from_bytes(4 << 20)));
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].text.starts_with("no unit: tc reads it as 5ms"),
            "{:?}",
            notes[0]
        );
        assert_eq!(notes[1].kind, NoteKind::NotMapped, "ce_threshold");
        assert!(notes[2].text.starts_with("a cake word"), "{:?}", notes[2]);
    }

    #[test]
    fn sqm_tc_units() {
        assert_eq!(tc_rate("20000"), Ok(Rate::from_kbit(20)));
        assert_eq!(tc_rate("20Mbit"), Ok(Rate::from_mbit(20)));
        assert_eq!(tc_rate("1kbps"), Ok(Rate::from_kbit(8)));
        assert!(tc_rate("fast").is_err() && tc_rate("20mb").is_err());
        assert_eq!(tc_time("5"), Ok(Time::from_micros(5)));
        assert_eq!(tc_time("5msec"), Ok(Time::from_millis(5)));
        assert!(tc_time("5min").is_err());
    }
}
