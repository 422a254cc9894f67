//! What a user says about one interface: [`ShapeOptions`], every field optional.
//!
//! The same struct is filled from command-line flags (by the binary), from a `[interface.NAME]`
//! table of the config file (serde, keys spelled like the flags: `ack-filter`, `ecn-egress`, ...),
//! and from an extra option string (`extra-egress = "nat dual-srchost ack-filter mpu 64"`), which
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

use crate::clip::clip;
use crate::linklayer::{Framing, LinkPreset};
use crate::model::{AckFilter, Diffserv, Direction, FlowMode};
use crate::qdisc::cake::words::{self as cake_words, Word};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::str::FromStr;
use unbloat_units::{Rate, Size, Time};

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

/// Everything a user can say about one interface. `None` means "not said": the spec applies the
/// field's default, and [`ShapeOptions::merge`] lets a later source (flags) override an earlier
/// one (the config file, its `[defaults]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ShapeOptions {
    /// Download shaper rate; 0 or absent: no ingress shaping.
    pub down: Option<Rate>,
    /// Upload shaper rate; 0 or absent: no egress shaping.
    pub up: Option<Rate>,
    pub qdisc: Option<Qdisc>,
    /// fq_codel only: 1 (one class) or 3 (priority / best effort / bulk by DSCP).
    pub tiers: Option<u8>,
    pub link: Option<LinkPreset>,
    /// Bytes, -64..=256, overrides the preset's.
    pub overhead: Option<i64>,
    /// Bytes, 0..=256, overrides the preset's.
    pub mpu: Option<i64>,
    /// atm | ptm | none, overrides an unframed preset; conflicts with a framed one.
    pub framing: Option<Framing>,
    /// Extra 802.1Q tags on top of the preset, 4 bytes each (cake's repeated `ether-vlan`).
    pub vlan: Option<u32>,
    pub isolation: Option<Isolation>,
    pub nat: Option<bool>,
    pub diffserv: Option<Diffserv>,
    pub wash: Option<bool>,
    /// true | false | "aggressive".
    #[serde(default, deserialize_with = "de_ack_filter")]
    pub ack_filter: Option<AckFilter>,
    /// A time (`100ms`) or one of cake's names (`internet`, `metro`, ...).
    #[serde(default, deserialize_with = "de_rtt")]
    pub rtt: Option<Time>,
    /// cake's `ingress` mode on the IFB side (default true).
    pub ingress_keyword: Option<bool>,
    pub split_gso: Option<bool>,
    pub memlimit: Option<Size>,
    // fq_codel
    pub target: Option<Time>,
    pub interval: Option<Time>,
    pub quantum: Option<u32>,
    pub limit: Option<u32>,
    pub flows: Option<u32>,
    pub memory_limit: Option<Size>,
    pub ecn_egress: Option<bool>,
    pub ecn_ingress: Option<bool>,
    /// More options for the egress qdisc, in cake's / fq_codel's words.
    pub extra_egress: Option<String>,
    /// More options for the ingress (IFB) qdisc, in cake's / fq_codel's words.
    pub extra_ingress: Option<String>,
    /// The user confirms rates that could cut them off (`--i-mean-it`): below
    /// [`CUTOFF_RATE`](crate::spec::CUTOFF_RATE), or more than
    /// [`MAX_RATIO`](crate::spec::MAX_RATIO) times apart. Kept in unbloat's records with the rest,
    /// so the setup can be planned again from them.
    pub i_mean_it: Option<bool>,
    /// Classification rules and presets ([`crate::classify`]): `["gaming", "bulk lan-host
    /// 192.168.1.50"]`; the first rule that matches a connection chooses its tin. Left out of
    /// unbloat's records when not said, so records written before it read back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classify: Option<Vec<String>>,
}

macro_rules! merge_fields {
    ($base:expr, $over:expr, $($f:ident),*) => {
        ShapeOptions { $($f: $over.$f.clone().or_else(|| $base.$f.clone())),* }
    };
}

impl ShapeOptions {
    /// `over`'s fields where it has them, `base`'s otherwise (flags over file, table over
    /// `[defaults]`, extra string over the rest).
    pub fn merge(base: &ShapeOptions, over: &ShapeOptions) -> ShapeOptions {
        merge_fields!(
            base,
            over,
            down,
            up,
            qdisc,
            tiers,
            link,
            overhead,
            mpu,
            framing,
            vlan,
            isolation,
            nat,
            diffserv,
            wash,
            ack_filter,
            rtt,
            ingress_keyword,
            split_gso,
            memlimit,
            target,
            interval,
            quantum,
            limit,
            flows,
            memory_limit,
            ecn_egress,
            ecn_ingress,
            extra_egress,
            extra_ingress,
            i_mean_it,
            classify
        )
    }
}

/// cake's named round-trip times, defined with cake's other words.
pub use crate::qdisc::cake::words::RTT_NAMES;

/// A time, or one of cake's rtt names.
pub fn parse_rtt(s: &str) -> Result<Time, String> {
    if let Some((_, t)) = RTT_NAMES.iter().find(|(n, _)| *n == s) {
        return Ok(*t);
    }
    s.parse::<Time>().map_err(|e| {
        let e = crate::clip::clip_quoted(&e.to_string());
        format!("{e}; or one of cake's names: datacentre, lan, metro, regional, internet, oceanic, satellite, interplanetary")
    })
}

fn de_rtt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum T {
        N(i64),
        F(f64),
        S(String),
    }
    // `null` is what `Serialize` writes for an unset field. A number is read as if typed without
    // a unit, so `rtt = 100` is refused as `--rtt 100` is (write 100ms).
    let text = match Option::<T>::deserialize(d)? {
        None => return Ok(None),
        Some(T::N(n)) => n.to_string(),
        Some(T::F(f)) => f.to_string(),
        Some(T::S(s)) => s,
    };
    parse_rtt(&text).map(Some).map_err(serde::de::Error::custom)
}

fn de_ack_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AckFilter>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum A {
        B(bool),
        S(String),
    }
    // `null`, "enabled" and "disabled" are what `Serialize` writes, so a stored ShapeOptions
    // reads back (unbloat's state records).
    match Option::<A>::deserialize(d)? {
        None => Ok(None),
        Some(A::B(true)) => Ok(Some(AckFilter::Enabled)),
        Some(A::B(false)) => Ok(Some(AckFilter::Disabled)),
        Some(A::S(s)) if s == "aggressive" => Ok(Some(AckFilter::Aggressive)),
        Some(A::S(s)) if s == "enabled" => Ok(Some(AckFilter::Enabled)),
        Some(A::S(s)) if s == "disabled" => Ok(Some(AckFilter::Disabled)),
        Some(A::S(s)) => Err(serde::de::Error::custom(format!(
            "invalid ack-filter {:?}: use true, false or \"aggressive\"",
            clip(&s)
        ))),
    }
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

/// Parse an extra option string for `direction` with `qdisc`'s grammar into the options it
/// stands for. `key` names the source in messages (the spec passes
/// [`option_name`]`("extra-egress")`: `--egress-options/extra-egress`).
pub fn parse_extra(
    text: &str,
    qdisc: Qdisc,
    direction: Direction,
    key: &str,
) -> Result<ShapeOptions, ExtraError> {
    let mut o = ShapeOptions::default();
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        let mut value = |word: &str| {
            words.next().ok_or_else(|| ExtraError::MissingValue {
                key: key.to_string(),
                word: clip(word).into_owned(),
            })
        };
        let bad = |word: &str, v: &str, reason: String| ExtraError::BadValue {
            key: key.to_string(),
            word: clip(word).into_owned(),
            value: clip(v).into_owned(),
            reason,
        };
        let done = match qdisc {
            Qdisc::Cake => cake_word(&mut o, w, direction, &mut value, &bad)?,
            Qdisc::FqCodel => fq_codel_word(&mut o, w, direction, &mut value, &bad)?,
        };
        if !done {
            let hint = match (qdisc, refused_hint(qdisc, w)) {
                (_, Some(h)) => h.to_string(),
                (Qdisc::FqCodel, None) if is_cake_word(w) => {
                    "it is a cake option; use --qdisc cake".to_string()
                }
                (Qdisc::Cake, None) => "see man tc-cake for the words cake takes".to_string(),
                (Qdisc::FqCodel, None) => {
                    "fq_codel takes limit, flows, target, interval, quantum, memory_limit, ecn, noecn".to_string()
                }
            };
            return Err(ExtraError::Unknown {
                key: key.to_string(),
                word: clip(w).into_owned(),
                qdisc,
                hint,
            });
        }
    }
    Ok(o)
}

type ValueFn<'a> = dyn FnMut(&str) -> Result<&'a str, ExtraError> + 'a;
type BadFn<'b> = dyn Fn(&str, &str, String) -> ExtraError + 'b;

fn parsed<T: FromStr>(word: &str, v: &str, bad: &BadFn) -> Result<T, ExtraError>
where
    T::Err: fmt::Display,
{
    v.parse::<T>()
        .map_err(|e| bad(word, v, crate::clip::clip_quoted(&e.to_string())))
}

/// One cake word (tc/q_cake.c `cake_parse_opt`). Returns false for a word cake does not take.
fn cake_word<'a>(
    o: &mut ShapeOptions,
    w: &str,
    dir: Direction,
    value: &mut ValueFn<'a>,
    bad: &BadFn,
) -> Result<bool, ExtraError> {
    // The words without a value: cake's one table, shared with the sqm import.
    if let Some(word) = cake_words::word(w) {
        match word {
            Word::Diffserv(d) => o.diffserv = Some(d),
            Word::FlowMode(m) => o.isolation = Some(m.into()),
            Word::Nat(on) => o.nat = Some(on),
            Word::Wash(on) => o.wash = Some(on),
            Word::SplitGso(on) => o.split_gso = Some(on),
            Word::AckFilter(a) => o.ack_filter = Some(a),
            Word::Framing(f) => o.framing = Some(f),
            Word::Rtt(t) => o.rtt = Some(t),
        }
        return Ok(true);
    }
    match w {
        "bandwidth" => {
            let v = value(w)?;
            let r = parsed::<Rate>(w, v, bad)?;
            match dir {
                Direction::Egress => o.up = Some(r),
                Direction::Ingress => o.down = Some(r),
            }
        }
        "rtt" => {
            let v = value(w)?;
            o.rtt = Some(parsed::<Time>(w, v, bad)?);
        }
        "ether-vlan" => o.vlan = Some(o.vlan.unwrap_or(0) + 1),
        "overhead" => {
            let v = value(w)?;
            o.overhead = Some(parsed::<i64>(w, v, bad)?);
        }
        "mpu" => {
            let v = value(w)?;
            o.mpu = Some(parsed::<i64>(w, v, bad)?);
        }
        "memlimit" => {
            let v = value(w)?;
            o.memlimit = Some(parsed::<Size>(w, v, bad)?);
        }
        "ingress" if dir == Direction::Ingress => o.ingress_keyword = Some(true),
        "egress" if dir == Direction::Ingress => o.ingress_keyword = Some(false),
        "egress" => {}
        _ => {
            if let Ok(p) = w.parse::<LinkPreset>() {
                // unbloat's own names (vdsl2, none) are not cake words: only cake's are taken here.
                if matches!(
                    p,
                    LinkPreset::Vdsl2 | LinkPreset::None | LinkPreset::EtherVlan
                ) {
                    return Ok(false);
                }
                o.link = Some(p);
            } else {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// One fq_codel word (tc/q_fq_codel.c `fq_codel_parse_opt`). Returns false for a word it does not
/// take.
fn fq_codel_word<'a>(
    o: &mut ShapeOptions,
    w: &str,
    dir: Direction,
    value: &mut ValueFn<'a>,
    bad: &BadFn,
) -> Result<bool, ExtraError> {
    let ecn = |o: &mut ShapeOptions, on| match dir {
        Direction::Egress => o.ecn_egress = Some(on),
        Direction::Ingress => o.ecn_ingress = Some(on),
    };
    match w {
        "limit" => o.limit = Some(parsed(w, value(w)?, bad)?),
        "flows" => o.flows = Some(parsed(w, value(w)?, bad)?),
        "target" => o.target = Some(parsed(w, value(w)?, bad)?),
        "interval" => o.interval = Some(parsed(w, value(w)?, bad)?),
        "quantum" => {
            let v = value(w)?;
            let s: Size = parsed(w, v, bad)?;
            let q = u32::try_from(s.bytes()).map_err(|_| bad(w, v, "too large".to_string()))?;
            o.quantum = Some(q);
        }
        "memory_limit" => o.memory_limit = Some(parsed(w, value(w)?, bad)?),
        "ecn" => ecn(o, true),
        "noecn" => ecn(o, false),
        _ => return Ok(false),
    }
    Ok(true)
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
        "fwmark",
        "firewall-mark tin selection is not supported; use DSCP marks",
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

fn refused_hint(qdisc: Qdisc, w: &str) -> Option<&'static str> {
    REFUSED_WORDS
        .iter()
        .find(|(q, word, _)| *q == qdisc && *word == w)
        .map(|(_, _, hint)| *hint)
}

/// How messages name an option, whichever of the three ways it was given (a flag, a config key,
/// a word of an option string): `--KEY` when the command line has a flag spelled like the config
/// key, the config key alone when only a config file or an option string can set it, and both
/// names when the flag is spelled differently.
pub fn option_name(key: &str) -> String {
    match key {
        "extra-egress" => "--egress-options/extra-egress".to_string(),
        "extra-ingress" => "--ingress-options/extra-ingress".to_string(),
        k if CONFIG_ONLY.contains(&k) => k.to_string(),
        k => format!("--{k}"),
    }
}

/// Config keys (and option-string words) with no command-line flag of the same name.
/// `ingress-keyword` has the flag `--no-ingress-keyword`, which only turns it off.
pub const CONFIG_ONLY: &[&str] = &["memlimit", "flows", "split-gso", "ingress-keyword"];

fn is_cake_word(w: &str) -> bool {
    let mut o = ShapeOptions::default();
    let mut none = |_: &str| -> Result<&str, ExtraError> {
        Err(ExtraError::MissingValue {
            key: String::new(),
            word: String::new(),
        })
    };
    let bad = |_: &str, _: &str, _: String| ExtraError::MissingValue {
        key: String::new(),
        word: String::new(),
    };
    !matches!(
        cake_word(&mut o, w, Direction::Egress, &mut none, &bad),
        Ok(false)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Direction::*;

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
