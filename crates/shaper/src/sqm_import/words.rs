//! sqm's option strings (`eqdisc_opts`, `iqdisc_opts`, and the words its recipes add), read word
//! by word as tc would read them, into unbloat's typed options.
//!
//! Heads up! The grammar is the options' own ([`crate::options::words`]: iproute2's
//! `tc/q_cake.c` and `tc/q_fq_codel.c`), the one `--egress-options` is read with, but the values
//! are read with tc's own units (`tc/tc_util.c`: `get_rate64`, `get_time`, `get_size`), because
//! sqm-scripts hands these strings to tc unchanged: here `rtt 100` *is* 100 us and `bandwidth
//! 20000` *is* 20 kbit/s. The typed result is written with explicit units, so nothing reaches
//! unbloat's TOML that it would read another way, and nothing is passed through as text.
//!
//! cake keeps the last of competing words, and its link-layer keywords *add* to the overhead said
//! before them (`overhead 44 pppoe-llcsnap` is 84; `ethernet` also sets mpu 84, `docsis` mpu 64):
//! [`LinkState`] follows q_cake.c line by line ([`link_word`]). A word tc would refuse ("What is
//! ...?") made sqm-scripts' whole tc command fail, so that direction was not shaped at all; such
//! words, and the ones unbloat refuses on purpose (`autorate-ingress`, `unlimited`, ...; see
//! [`REFUSED_WORDS`](crate::options::REFUSED_WORDS)), are left out with a note naming the word.

use super::dir::{tc_refuses, DirWords, LinkState, Problem};
use super::model::{Note, NoteKind};
use crate::linklayer::{Framing, LinkPreset};
use crate::model::Direction;
use crate::options::value::Kind;
use crate::options::words::{self as grammar, Said, Units};
use crate::options::{Opt, Qdisc};
use crate::qdisc::cake::words::adds_overhead;

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
        let step = grammar::read(qdisc, direction, Units::Tc, &list[i..], &mut dir.opts);
        let shown = |used: usize| match (used, value) {
            (2, Some(v)) => format!("{w} {v}"),
            _ => w.to_string(),
        };
        let problem = match step.said {
            Said::Set { opt, reading } => {
                if let Some(reading) = &reading {
                    notes.push(Note {
                        queue: queue.to_string(),
                        option: Some(words.origin.to_string()),
                        value: Some(shown(step.used)),
                        kind: NoteKind::Warning,
                        text: format!(
                            "no unit: tc reads it as {reading}, and so did sqm-scripts; carried \
                             as {reading} (unbloat would have refused the bare number): check it \
                             is meant"
                        ),
                    });
                }
                took(dir, opt, &shown(step.used), direction, words.origin).err()
            }
            Said::Nothing => None,
            Said::Refused(why) => Some(Problem {
                used: step.used,
                kind: NoteKind::NotMapped,
                text: format!("not taken by unbloat: {why}"),
            }),
            Said::Ignored(why) => Some(Problem {
                used: step.used,
                kind: NoteKind::Ignored,
                text: why.to_string(),
            }),
            Said::MissingValue(noun) => Some(tc_refuses(
                1,
                direction,
                format!("`{w}` needs a {noun} after it"),
            )),
            Said::BadValue(why) => Some(tc_refuses(2, direction, why)),
            Said::Unknown => {
                let what = match qdisc {
                    Qdisc::Cake => "not a cake word",
                    Qdisc::FqCodel if grammar::is_word(Qdisc::Cake, w) => {
                        "a cake word, which fq_codel does not take"
                    }
                    Qdisc::FqCodel => "not an fq_codel word",
                };
                Some(tc_refuses(
                    1,
                    direction,
                    format!("{what} (tc: \"What is \\\"{}\\\"?\")", crate::clip::clip(w)),
                ))
            }
        };
        let used = problem.as_ref().map_or(step.used, |p| p.used);
        if let Some(p) = problem {
            notes.push(Note {
                queue: queue.to_string(),
                option: Some(words.origin.to_string()),
                value: Some(shown(p.used)),
                kind: p.kind,
                text: p.text,
            });
        }
        i += used.max(1);
    }
}

/// What follows from `opt` taking `shown`: cake's link-layer words go into the direction's
/// [`LinkState`] as q_cake.c adds them up (not into the options), everything else is recorded as
/// the source of its key.
fn took(
    d: &mut DirWords,
    opt: &Opt,
    shown: &str,
    dir: Direction,
    origin: &str,
) -> Result<(), Problem> {
    let o = &mut d.opts;
    let key = match opt.key {
        "link" => {
            let preset = o.link.take();
            preset.map_or("overhead", |p| link_word(&mut d.link, p))
        }
        "vlan" => {
            o.vlan = None;
            d.link.overhead += 4;
            d.link.overhead_set = true;
            "overhead"
        }
        "overhead" | "mpu" => {
            let (n, (lo, hi)) = match opt.key {
                "overhead" => (o.overhead.take(), (-64, 256)),
                _ => (o.mpu.take(), (0, 256)),
            };
            let n = n.filter(|n| (lo..=hi).contains(n)).ok_or_else(|| {
                tc_refuses(
                    2,
                    dir,
                    format!("`{shown}`: tc takes whole numbers {lo}..{hi}"),
                )
            })?;
            if opt.key == "overhead" {
                d.link.overhead = n;
                d.link.overhead_set = true;
            } else {
                d.link.mpu = n;
            }
            opt.key
        }
        "framing" => {
            d.link.framing = o.framing.take();
            "framing"
        }
        key => {
            // A value written otherwise than unbloat writes it is shown with what tc read
            // (`rtt 50 = 50us`); whole numbers read as written.
            let value = opt.field.show(o).unwrap_or_default();
            let text = match shown.split_once(' ') {
                Some((_, v)) if v != value && opt.field.kind() != Kind::Int => {
                    format!("{shown} = {value}")
                }
                _ => shown.to_string(),
            };
            d.source(key, format!("{origin}: {text}"));
            return Ok(());
        }
    };
    d.link.touched = true;
    d.source(key, format!("{origin}: {shown}"));
    Ok(())
}

/// One of cake's link-layer keywords as q_cake.c applies it; the key its source is noted under.
fn link_word(l: &mut LinkState, p: LinkPreset) -> &'static str {
    match p {
        LinkPreset::Raw => {
            l.framing = Some(Framing::None);
            l.overhead = 0;
            l.overhead_set = true;
            l.raw = true;
            return "link";
        }
        LinkPreset::Conservative => {
            l.framing = Some(Framing::Atm);
            l.overhead = 48;
        }
        LinkPreset::Ethernet => {
            l.overhead += 38;
            l.mpu = 84;
        }
        LinkPreset::Docsis => {
            l.framing = Some(Framing::None);
            l.overhead += 18;
            l.mpu = 64;
        }
        p => {
            if let Some((bytes, framing)) = adds_overhead(p.name()) {
                l.framing = Some(framing);
                l.overhead += bytes;
            }
        }
    }
    l.overhead_set = true;
    "overhead"
}

#[cfg(test)]
mod tests {
    use super::super::dir::LinkState;
    use super::super::model::NoteKind;
    use super::*;
    use crate::linklayer::Framing;
    use crate::model::{AckFilter, Diffserv};
    use crate::options::Isolation;
    use unbloat_units::{Rate, Size, Time};
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
        // cake's tins by firewall mark are an option of unbloat's too: carried, not noted.
        assert_eq!(d.opts.fwmark, Some(0xff));
        let said: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
        assert_eq!(said.len(), 5, "{said:#?}");
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
        assert!(said[2].contains("'ingress': not mapped"), "{}", said[2]);
        assert!(said[3].contains("'overhead 300': warning"), "{}", said[3]);
        assert!(
            said[4].contains("'rtt': warning: `rtt` needs a time"),
            "{}",
            said[4]
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
}
