//! What a user says about one interface: [`ShapeOptions`], every field optional, each declared
//! once in [`table`] ([`OPTIONS`]): its key, flag, help, type, words and strategy.
//!
//! The same struct is filled from command-line flags (by the binary, from [`OPTIONS`]), from a
//! `[interface.NAME]` table of the config file (serde, keys spelled like the flags: `isolation`,
//! `ecn-egress`, ...), and from an extra option string (`extra-egress = "nat dual-srchost wash mpu 64"`), which
//! [`parse_extra`] reads word by word with cake's or fq_codel's own grammar (iproute2
//! tc/q_cake.c, tc/q_fq_codel.c). A word the chosen qdisc does not take is an error naming the
//! word: nothing is passed through to tc unvalidated, unlike sqm-scripts' "advanced option
//! strings", which "silently fail" (seed 001).
//!
//! Units follow the units crate's rule (no guessed units) in all three: `--down 20000`,
//! `down = 20000` and the word pair `bandwidth 20000` are refused alike with the readings
//! (20000kbit or 20mbit), `rtt 100` like `--rtt 100` (write 100ms). tc itself would take
//! `bandwidth 20000` as 20 kbit/s; an option string is typed by the same user with the same
//! habits, so it gets the same protection rather than tc's grammar to the letter.
//!
//! Nothing is checked for sense here (ranges, conflicts): that is [`Spec`](crate::spec::Spec)'s job,
//! so flags, files and extra strings get the same checks and the same messages.

mod decl;
pub mod luci;
mod table;
pub mod tc_units;
pub mod value;
pub mod words;

pub use decl::{Cli, Dir, Field, Heading, Opt, Web, Word, Words};
pub use table::{ShapeOptions, OPTIONS};
pub use words::REFUSED_WORDS;

use crate::clip::clip;
use crate::model::{Direction, FlowMode};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use unbloat_units::Time;
use words::{Said, Units};

/// The queueing strategy: cake, or HTB + fq_codel (sqm-scripts' simple.qos shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Qdisc {
    #[default]
    #[serde(rename = "cake")]
    Cake,
    #[serde(rename = "fq_codel")]
    FqCodel,
}

impl fmt::Display for Qdisc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Qdisc::Cake => "cake",
            Qdisc::FqCodel => "fq_codel",
        })
    }
}

impl FromStr for Qdisc {
    type Err = String;
    fn from_str(s: &str) -> Result<Qdisc, String> {
        match s {
            "cake" => Ok(Qdisc::Cake),
            "fq_codel" | "fq-codel" | "htb" => Ok(Qdisc::FqCodel),
            _ => Err(format!("unknown qdisc {:?}; use cake or fq_codel", clip(s))),
        }
    }
}

/// Flow isolation as the user says it. `dual-host` is unbloat's: dual-srchost on egress (fair
/// between LAN hosts sending), dual-dsthost on ingress (fair between LAN hosts receiving).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    Flows,
    Hosts,
    Srchost,
    Dsthost,
    DualHost,
    DualSrchost,
    DualDsthost,
    TripleIsolate,
    Flowblind,
}

/// Every isolation's option value, in the order the docs and the web page list them (a test
/// checks them against [`Isolation::name`]).
pub const ISOLATION_NAMES: &[&str] = &[
    "flows",
    "hosts",
    "srchost",
    "dsthost",
    "dual-host",
    "dual-srchost",
    "dual-dsthost",
    "triple-isolate",
    "flowblind",
];

impl Isolation {
    /// The spelling of the option value (`dual-host`, `triple-isolate`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Flows => "flows",
            Isolation::Hosts => "hosts",
            Isolation::Srchost => "srchost",
            Isolation::Dsthost => "dsthost",
            Isolation::DualHost => "dual-host",
            Isolation::DualSrchost => "dual-srchost",
            Isolation::DualDsthost => "dual-dsthost",
            Isolation::TripleIsolate => "triple-isolate",
            Isolation::Flowblind => "flowblind",
        }
    }
}

/// cake's flow mode as the isolation of the same name (every mode is one; `dual-host` is
/// unbloat's pair of two of them).
impl From<FlowMode> for Isolation {
    fn from(m: FlowMode) -> Isolation {
        match m {
            FlowMode::Flowblind => Isolation::Flowblind,
            FlowMode::Srchost => Isolation::Srchost,
            FlowMode::Dsthost => Isolation::Dsthost,
            FlowMode::Hosts => Isolation::Hosts,
            FlowMode::Flows => Isolation::Flows,
            FlowMode::DualSrchost => Isolation::DualSrchost,
            FlowMode::DualDsthost => Isolation::DualDsthost,
            FlowMode::TripleIsolate => Isolation::TripleIsolate,
        }
    }
}

impl FromStr for Isolation {
    type Err = String;
    fn from_str(s: &str) -> Result<Isolation, String> {
        let v = serde_json::Value::String(s.to_string());
        serde_json::from_value(v).map_err(|_| {
            format!("unknown isolation {:?}; use flows, hosts, srchost, dsthost, dual-host, dual-srchost, dual-dsthost, triple-isolate or flowblind", clip(s))
        })
    }
}

impl ShapeOptions {
    /// `over`'s fields where it has them, `base`'s otherwise (flags over file, table over
    /// `[defaults]`, extra string over the rest).
    pub fn merge(base: &ShapeOptions, over: &ShapeOptions) -> ShapeOptions {
        let mut out = over.clone();
        for opt in OPTIONS {
            if !opt.field.is_set(over) {
                opt.field.copy(&mut out, base);
            }
        }
        out
    }

    /// Whether these options say what `said` looks for on `dir`'s side: in their keys, or in
    /// that direction's option string read with their qdisc's grammar (a string that does not
    /// read says nothing; the spec refuses it).
    pub fn says(&self, dir: Direction, said: impl Fn(&ShapeOptions) -> bool) -> bool {
        let extra = match dir {
            Direction::Egress => &self.extra_egress,
            Direction::Ingress => &self.extra_ingress,
        };
        said(self)
            || extra.as_deref().is_some_and(|text| {
                parse_extra(text, self.qdisc.unwrap_or_default(), dir, "").is_ok_and(|o| said(&o))
            })
    }

    /// `words` before the upload's own option words: a default in cake's grammar that a word
    /// the user wrote there still overrides (the later word wins).
    pub fn egress_words_first(&mut self, words: &str) {
        self.extra_egress = Some(match &self.extra_egress {
            Some(theirs) => format!("{words} {theirs}"),
            None => words.to_string(),
        });
    }
}

/// The declaration of config key `key`.
pub fn option(key: &str) -> Option<&'static Opt> {
    OPTIONS.iter().find(|o| o.key == key)
}

/// A time, or one of cake's rtt names (the `rtt` option's words: `internet` is 100ms).
pub fn parse_rtt(s: &str) -> Result<Time, String> {
    let named = option("rtt").and_then(|rtt| {
        rtt.words.of(Qdisc::Cake).iter().find_map(|w| match *w {
            Word::Means(name, time) if name == s => time.parse::<Time>().ok(),
            _ => None,
        })
    });
    if let Some(t) = named {
        return Ok(t);
    }
    s.parse::<Time>().map_err(|e| {
        let e = crate::clip::clip_quoted(&e.to_string());
        format!("{e}; or one of cake's names: datacentre, lan, metro, regional, internet, oceanic, satellite, interplanetary")
    })
}

/// Why an extra option string cannot be used. The message names the key and the word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtraError {
    #[error("{key}: {word:?} is not a {qdisc} option unbloat knows; {hint}")]
    Unknown {
        key: String,
        word: String,
        qdisc: Qdisc,
        hint: String,
    },
    #[error("{key}: {word:?} needs a value after it")]
    MissingValue { key: String, word: String },
    #[error("{key}: {word} {value:?}: {reason}")]
    BadValue {
        key: String,
        word: String,
        value: String,
        reason: String,
    },
}

/// Parse an extra option string for `direction` with `qdisc`'s grammar ([`words`]) into the
/// options it stands for. `key` names the source in messages (the spec passes
/// [`option_name`]`("extra-egress")`: `--egress-options/extra-egress`).
pub fn parse_extra(
    text: &str,
    qdisc: Qdisc,
    direction: Direction,
    key: &str,
) -> Result<ShapeOptions, ExtraError> {
    let mut o = ShapeOptions::default();
    let list: Vec<&str> = text.split_whitespace().collect();
    let mut i = 0;
    while i < list.len() {
        let w = list[i];
        let step = words::read(qdisc, direction, Units::User, &list[i..], &mut o);
        let hint = match step.said {
            Said::Set { .. } | Said::Nothing => {
                i += step.used.max(1);
                continue;
            }
            Said::MissingValue(_) => {
                return Err(ExtraError::MissingValue {
                    key: key.to_string(),
                    word: clip(w).into_owned(),
                })
            }
            Said::BadValue(reason) => {
                return Err(ExtraError::BadValue {
                    key: key.to_string(),
                    word: clip(w).into_owned(),
                    value: clip(list.get(i + 1).copied().unwrap_or_default()).into_owned(),
                    reason,
                })
            }
            Said::Refused(why) | Said::Ignored(why) => why.to_string(),
            Said::Unknown => match (qdisc, words::refused(qdisc, w)) {
                (_, Some(why)) => why.to_string(),
                (Qdisc::FqCodel, None) if words::is_word(Qdisc::Cake, w) => {
                    "it is a cake option; use --qdisc cake".to_string()
                }
                (Qdisc::Cake, None) => "see man tc-cake for the words cake takes".to_string(),
                (Qdisc::FqCodel, None) => {
                    format!("fq_codel takes {}", words::listed(Qdisc::FqCodel))
                }
            },
        };
        return Err(ExtraError::Unknown {
            key: key.to_string(),
            word: clip(w).into_owned(),
            qdisc,
            hint,
        });
    }
    Ok(o)
}

/// How messages name an option, whichever of the three ways it was given (a flag, a config key,
/// a word of an option string): see [`Opt::name`].
pub fn option_name(key: &str) -> String {
    option(key).map_or_else(|| key.to_string(), Opt::name)
}

/// Config keys (and option-string words) with no command-line flag of the same name
/// (`ingress-keyword` has the flag `--no-ingress-keyword`, which only turns it off).
pub fn config_only() -> Vec<&'static str> {
    OPTIONS
        .iter()
        .filter(|o| matches!(o.cli, Cli::None | Cli::Off(_)))
        .map(|o| o.key)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linklayer::LinkPreset;
    use crate::model::AckFilter;
    use crate::model::Direction::*;
    use unbloat_units::Rate;

    #[test]
    fn cake_words_become_typed_options() {
        let o = parse_extra(
            "nat dual-srchost ack-filter mpu 64",
            Qdisc::Cake,
            Egress,
            "extra-egress",
        )
        .unwrap();
        assert_eq!(o.nat, Some(true));
        assert_eq!(o.isolation, Some(Isolation::DualSrchost));
        assert_eq!(o.ack_filter, Some(AckFilter::Enabled));
        assert_eq!(o.mpu, Some(64));
        let o = parse_extra(
            "bridged-ptm ether-vlan ingress metro bandwidth 78mbit",
            Qdisc::Cake,
            Ingress,
            "x",
        )
        .unwrap();
        assert_eq!(o.link, Some(LinkPreset::BridgedPtm));
        assert_eq!(o.vlan, Some(1));
        assert_eq!(o.ingress_keyword, Some(true));
        assert_eq!(o.rtt, Some(Time::from_millis(10)));
        assert_eq!(o.down, Some(Rate::from_mbit(78)));
    }

    #[test]
    fn fq_codel_words_become_typed_options() {
        let o = parse_extra(
            "limit 2000 target 3ms noecn quantum 300",
            Qdisc::FqCodel,
            Egress,
            "k",
        )
        .unwrap();
        assert_eq!(o.limit, Some(2000));
        assert_eq!(o.target, Some(Time::from_millis(3)));
        assert_eq!(o.ecn_egress, Some(false));
        assert_eq!(o.quantum, Some(300));
    }

    #[test]
    fn unknown_words_are_errors_naming_the_word() {
        let e = parse_extra("nat frobnicate", Qdisc::Cake, Egress, "extra-egress").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("extra-egress: \"frobnicate\" is not a cake option"),
            "{e}"
        );
        let e = parse_extra("ack-filter", Qdisc::FqCodel, Egress, "extra-egress").unwrap_err();
        assert!(
            e.to_string()
                .contains("\"ack-filter\" is not a fq_codel option"),
            "{e}"
        );
        assert!(e.to_string().contains("use --qdisc cake"), "{e}");
        let e = parse_extra("mpu", Qdisc::Cake, Egress, "extra-ingress").unwrap_err();
        assert_eq!(
            e.to_string(),
            "extra-ingress: \"mpu\" needs a value after it"
        );
        let e = parse_extra("overhead lots", Qdisc::Cake, Egress, "extra-egress").unwrap_err();
        assert!(
            e.to_string().starts_with("extra-egress: overhead \"lots\""),
            "{e}"
        );
        let e = parse_extra("ingress", Qdisc::Cake, Egress, "extra-egress").unwrap_err();
        assert!(e.to_string().contains("ingress (IFB) side"), "{e}");
    }

    #[test]
    fn merge_prefers_the_override() {
        let base = ShapeOptions {
            down: Some(Rate::from_mbit(10)),
            nat: Some(true),
            ..Default::default()
        };
        let over = ShapeOptions {
            down: Some(Rate::from_mbit(20)),
            ..Default::default()
        };
        let m = ShapeOptions::merge(&base, &over);
        assert_eq!(m.down, Some(Rate::from_mbit(20)));
        assert_eq!(m.nat, Some(true));
    }

    #[test]
    fn rtt_accepts_names_and_times() {
        assert_eq!(parse_rtt("oceanic"), Ok(Time::from_millis(300)));
        assert_eq!(parse_rtt("42ms"), Ok(Time::from_millis(42)));
        assert!(parse_rtt("soon").is_err());
    }

    /// Issue 19: tc's own words in an option string get the units rule too.
    #[test]
    fn option_string_numbers_need_units() {
        for (text, qdisc, words) in [
            (
                "bandwidth 20000",
                Qdisc::Cake,
                &["bandwidth \"20000\"", "20000kbit (SQM's unit)", "20mbit"][..],
            ),
            (
                "bandwidth 20mbps",
                Qdisc::Cake,
                &["20mbit if you mean megabits", "160mbit"][..],
            ),
            ("rtt 100", Qdisc::Cake, &["rtt \"100\"", "write 100ms"][..]),
            (
                "target 5",
                Qdisc::FqCodel,
                &["target \"5\"", "write 5ms"][..],
            ),
            ("interval 100", Qdisc::FqCodel, &["write 100ms"][..]),
        ] {
            let m = parse_extra(text, qdisc, Egress, "extra-egress")
                .unwrap_err()
                .to_string();
            for w in words {
                assert!(m.contains(w), "{text}: {w:?} missing: {m}");
            }
        }
        let o = parse_extra("bandwidth 20M rtt 0", Qdisc::Cake, Egress, "k").unwrap();
        assert_eq!(o.up, Some(Rate::from_mbit(20)));
        assert_eq!(o.rtt, Some(Time::from_micros(0)));
    }

    #[test]
    fn config_numbers_need_units() {
        for (line, words) in [
            ("down = 20000", &["20000kbit (SQM's unit)", "20mbit"][..]),
            ("up = 19.95", &["19.95mbit"][..]),
            (
                "down = \"20 Mbps\"",
                &["20mbit if you mean megabits", "160mbit"][..],
            ),
            ("rtt = 100", &["write 100ms"][..]),
            ("target = 5", &["write 5ms"][..]),
            ("interval = 100", &["write 100ms"][..]),
            ("rtt = -5", &["negative"][..]),
        ] {
            let m = crate::tomlread::from_str::<ShapeOptions>(line)
                .unwrap_err()
                .to_string();
            for w in words {
                assert!(m.contains(w), "{line}: {w:?} missing: {m}");
            }
        }
        let o: ShapeOptions =
            crate::tomlread::from_str("down = 0\nup = \"20 Mbit/s\"\nrtt = 0").unwrap();
        assert_eq!(o.down, Some(Rate::ZERO));
        assert_eq!(o.up, Some(Rate::from_mbit(20)));
        assert_eq!(o.rtt, Some(Time::from_micros(0)));
    }
}

#[cfg(test)]
mod round_trip {
    use super::*;
    use crate::model::AckFilter;
    use unbloat_units::Rate;

    /// unbloat's state records store the options as JSON and rebuild the plan from them
    /// (`status`, `stop`): every field must read back as it was written.
    #[test]
    fn options_survive_a_json_round_trip() {
        let opts = ShapeOptions {
            down: Some(Rate::from_mbit(78)),
            up: Some(Rate::from_kbit(19_950)),
            qdisc: Some(Qdisc::Cake),
            link: Some("vdsl2".parse().unwrap()),
            overhead: Some(-4),
            isolation: Some(Isolation::DualHost),
            nat: Some(true),
            ack_filter: Some(AckFilter::Enabled),
            rtt: Some(Time::from_millis(50)),
            target: Some(Time::from_micros(14_570)),
            extra_egress: Some("mpu 64".into()),
            i_mean_it: Some(true),
            ..ShapeOptions::default()
        };
        let unset = ShapeOptions {
            down: Some(Rate::from_mbit(1)),
            ..ShapeOptions::default()
        };
        for ack in [
            Some(AckFilter::Enabled),
            Some(AckFilter::Disabled),
            Some(AckFilter::Aggressive),
            None,
        ] {
            let o = ShapeOptions {
                ack_filter: ack,
                ..opts.clone()
            };
            let json = serde_json::to_value(&o).unwrap();
            let back: ShapeOptions =
                serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(back, o);
        }
        let back: ShapeOptions =
            serde_json::from_value(serde_json::to_value(&unset).unwrap()).unwrap();
        assert_eq!(back, unset);
    }

    #[test]
    fn the_isolation_names_are_every_isolation_once() {
        for n in ISOLATION_NAMES {
            assert_eq!(n.parse::<Isolation>().map(Isolation::name), Ok(*n));
        }
        let all = [
            Isolation::Flows,
            Isolation::Hosts,
            Isolation::Srchost,
            Isolation::Dsthost,
            Isolation::DualHost,
            Isolation::DualSrchost,
            Isolation::DualDsthost,
            Isolation::TripleIsolate,
            Isolation::Flowblind,
        ];
        assert_eq!(all.map(Isolation::name), ISOLATION_NAMES);
        // cake's flow modes are the isolations of the same name.
        for m in crate::qdisc::cake::words::FLOW_MODES {
            assert_eq!(Isolation::from(m).name(), m.keyword());
        }
    }
}
