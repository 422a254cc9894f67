//! The value types of the options, and the one way each is read and written: from what a user
//! types (flags, forms, option strings; a unit is required; what tc would read is first written
//! so by [`super::words`]), as a TOML value, and as the qdisc's own keyword where the value is one
//! (`diffserv4`, `dual-srchost`, `ptm`).
//!
//! Each option of [`super::table`] names its type, and everything that lists options (the
//! command line, the config file's writer, the forms, the option strings) goes through this trait,
//! so a value is spelled the same everywhere: `parse(show(v)) == v` for every type (tested).

use super::{Isolation, Qdisc, ISOLATION_NAMES};
use crate::linklayer::{Framing, LinkPreset};
use crate::model::{AckFilter, Diffserv};
use crate::qdisc::cake::words::{DIFFSERV, DIFFSERV_WORDS, FLOW_MODES};
use unbloat_units::{Rate, Size, Time};

/// How a form edits a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A rate with its unit (`78mbit`): written as a TOML string.
    Rate,
    /// Any other string (a time, a size, an option string).
    Text,
    /// A whole number, written as a TOML integer.
    Int,
    /// true or false.
    Bool,
    /// One of the type's choices.
    Choice,
    /// A list of strings (`classify`).
    List,
}

/// A type an option can hold. See the module's documentation.
pub trait OptValue: Sized + Clone + PartialEq + 'static {
    const KIND: Kind;
    /// What a message calls a value of the type ("`rtt` needs a time after it").
    const NOUN: &'static str = "value";
    /// What a form offers (empty: free text).
    fn choices() -> Vec<&'static str> {
        Vec::new()
    }
    /// What a user types; a number needs its unit.
    fn parse(text: &str) -> Result<Self, String>;
    /// The value as a user types it; [`OptValue::parse`] reads it back.
    fn show(&self) -> String;
    /// The value as a user types it once per time the option is said: a list says each item
    /// (`--classify A --classify B`, where [`OptValue::show`] joins them for a message).
    fn each(&self) -> Vec<String> {
        vec![self.show()]
    }
    /// The value as a TOML value (a string quoted, a number or boolean bare).
    fn toml(&self) -> String {
        toml_string(&self.show())
    }
    /// The qdisc's own word for the value, where it has one (cake's keyword).
    fn word(&self) -> Option<&'static str> {
        None
    }
    /// The value a word of the qdisc stands for.
    fn from_word(_: &str) -> Option<Self> {
        None
    }
    /// A value said again: the later one counts, but a list grows by it (`--classify`, twice).
    fn and(_earlier: Self, later: Self) -> Self {
        later
    }
    /// Adds one (cake's repeated `ether-vlan`); false where the type cannot count.
    fn add_one(_: &mut Option<Self>) -> bool {
        false
    }
}

/// A TOML basic string.
pub fn toml_string(t: &str) -> String {
    let mut out = String::from("\"");
    for c in t.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn text_err(e: impl std::fmt::Display) -> String {
    crate::clip::clip_quoted(&e.to_string())
}

impl OptValue for Rate {
    const KIND: Kind = Kind::Rate;
    const NOUN: &'static str = "rate";
    fn parse(text: &str) -> Result<Rate, String> {
        text.parse().map_err(text_err)
    }
    fn show(&self) -> String {
        self.to_string()
    }
    /// Whole kbit/s where it is (SQM's unit, and a speed test's), 0 as the number.
    fn toml(&self) -> String {
        match self.bits_per_sec() {
            0 => "0".to_string(),
            bps if bps % 1000 == 0 => toml_string(&format!("{}kbit", bps / 1000)),
            _ => toml_string(&self.to_string()),
        }
    }
}

impl OptValue for Time {
    const KIND: Kind = Kind::Text;
    const NOUN: &'static str = "time";
    fn parse(text: &str) -> Result<Time, String> {
        text.parse().map_err(text_err)
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl OptValue for Size {
    const KIND: Kind = Kind::Text;
    const NOUN: &'static str = "size";
    fn parse(text: &str) -> Result<Size, String> {
        text.parse().map_err(text_err)
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

macro_rules! whole_number {
    ($($t:ty),*) => {$(
        impl OptValue for $t {
            const KIND: Kind = Kind::Int;
            const NOUN: &'static str = "number";
            fn parse(text: &str) -> Result<$t, String> {
                text.parse().map_err(|e| format!("{:?}: {e}", crate::clip::clip(text)))
            }
            fn show(&self) -> String {
                self.to_string()
            }
            fn toml(&self) -> String {
                self.to_string()
            }
            fn add_one(v: &mut Option<$t>) -> bool {
                *v = Some(v.unwrap_or(0).saturating_add(1));
                true
            }
        }
    )*};
}
whole_number!(u8, u32, i64);

impl OptValue for bool {
    const KIND: Kind = Kind::Bool;
    fn choices() -> Vec<&'static str> {
        vec!["true", "false"]
    }
    fn parse(text: &str) -> Result<bool, String> {
        match text {
            "on" | "yes" | "true" | "1" => Ok(true),
            "off" | "no" | "false" | "0" => Ok(false),
            _ => Err(format!("{:?}: use on or off", crate::clip::clip(text))),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
    fn toml(&self) -> String {
        self.to_string()
    }
}

impl OptValue for String {
    const KIND: Kind = Kind::Text;
    fn parse(text: &str) -> Result<String, String> {
        Ok(text.to_string())
    }
    fn show(&self) -> String {
        self.clone()
    }
}

/// `classify`: one rule a string, in order.
impl OptValue for Vec<String> {
    const KIND: Kind = Kind::List;
    fn parse(text: &str) -> Result<Vec<String>, String> {
        Ok(vec![text.to_string()])
    }
    fn show(&self) -> String {
        self.join(", ")
    }
    fn each(&self) -> Vec<String> {
        self.clone()
    }
    fn and(mut earlier: Self, later: Self) -> Self {
        earlier.extend(later);
        earlier
    }
    fn toml(&self) -> String {
        let items: Vec<String> = self.iter().map(|s| toml_string(s)).collect();
        format!("[{}]", items.join(", "))
    }
}

impl OptValue for Qdisc {
    const KIND: Kind = Kind::Choice;
    fn choices() -> Vec<&'static str> {
        vec!["cake", "fq_codel"]
    }
    fn parse(text: &str) -> Result<Qdisc, String> {
        text.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl OptValue for LinkPreset {
    const KIND: Kind = Kind::Choice;
    fn choices() -> Vec<&'static str> {
        LinkPreset::all()
            .into_iter()
            .map(LinkPreset::name)
            .collect()
    }
    fn parse(text: &str) -> Result<LinkPreset, String> {
        text.parse()
    }
    fn show(&self) -> String {
        self.name().to_string()
    }
    /// Only cake's own words: `vdsl2` and `none` are unbloat's names, and cake's `ether-vlan`
    /// adds a tag (the option `vlan`) rather than naming a link.
    fn word(&self) -> Option<&'static str> {
        match self {
            LinkPreset::Vdsl2 | LinkPreset::None | LinkPreset::EtherVlan => None,
            p => Some(p.name()),
        }
    }
    fn from_word(w: &str) -> Option<LinkPreset> {
        w.parse::<LinkPreset>().ok().filter(|p| p.word().is_some())
    }
}

impl OptValue for Framing {
    const KIND: Kind = Kind::Choice;
    fn choices() -> Vec<&'static str> {
        vec!["none", "atm", "ptm"]
    }
    fn parse(text: &str) -> Result<Framing, String> {
        text.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
    fn word(&self) -> Option<&'static str> {
        Some(self.cake_keyword())
    }
    fn from_word(w: &str) -> Option<Framing> {
        [Framing::None, Framing::Atm, Framing::Ptm]
            .into_iter()
            .find(|f| f.cake_keyword() == w)
    }
}

impl OptValue for Isolation {
    const KIND: Kind = Kind::Choice;
    fn choices() -> Vec<&'static str> {
        ISOLATION_NAMES.to_vec()
    }
    fn parse(text: &str) -> Result<Isolation, String> {
        text.parse()
    }
    fn show(&self) -> String {
        self.name().to_string()
    }
    /// cake's flow modes are the isolations of the same name; `dual-host` is unbloat's.
    fn word(&self) -> Option<&'static str> {
        FLOW_MODES
            .into_iter()
            .map(Isolation::from)
            .find(|i| i == self)
            .map(|i| i.name())
    }
    fn from_word(w: &str) -> Option<Isolation> {
        FLOW_MODES
            .into_iter()
            .find(|m| m.keyword() == w)
            .map(Isolation::from)
    }
}

impl OptValue for Diffserv {
    const KIND: Kind = Kind::Choice;
    fn choices() -> Vec<&'static str> {
        DIFFSERV_WORDS.to_vec()
    }
    fn parse(text: &str) -> Result<Diffserv, String> {
        text.parse()
    }
    fn show(&self) -> String {
        Diffserv::keyword(*self).to_string()
    }
    fn word(&self) -> Option<&'static str> {
        Some(Diffserv::keyword(*self))
    }
    fn from_word(w: &str) -> Option<Diffserv> {
        DIFFSERV.into_iter().find(|d| Diffserv::keyword(*d) == w)
    }
}

/// On the command line `--ack-filter` alone, `--ack-filter=aggressive` or `=off`; in a file
/// true, false or "aggressive".
impl OptValue for AckFilter {
    const KIND: Kind = Kind::Choice;
    fn choices() -> Vec<&'static str> {
        vec!["true", "false", "aggressive"]
    }
    fn parse(text: &str) -> Result<AckFilter, String> {
        match text {
            "enabled" | "on" | "true" | "yes" => Ok(AckFilter::Enabled),
            "aggressive" => Ok(AckFilter::Aggressive),
            "disabled" | "off" | "false" | "no" => Ok(AckFilter::Disabled),
            _ => Err(format!(
                "{:?}: use true (on), false (off) or aggressive",
                crate::clip::clip(text)
            )),
        }
    }
    fn show(&self) -> String {
        match self {
            AckFilter::Enabled => "true",
            AckFilter::Disabled => "false",
            AckFilter::Aggressive => "aggressive",
        }
        .to_string()
    }
    fn toml(&self) -> String {
        match self {
            AckFilter::Aggressive => toml_string("aggressive"),
            _ => self.show(),
        }
    }
    fn word(&self) -> Option<&'static str> {
        Some(AckFilter::keyword(*self))
    }
    fn from_word(w: &str) -> Option<AckFilter> {
        [
            AckFilter::Disabled,
            AckFilter::Enabled,
            AckFilter::Aggressive,
        ]
        .into_iter()
        .find(|a| AckFilter::keyword(*a) == w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: OptValue + std::fmt::Debug>(values: &[T]) {
        for v in values {
            assert_eq!(T::parse(&v.show()).as_ref(), Ok(v), "{v:?}");
            if let Some(k) = v.word() {
                assert_eq!(T::from_word(k).as_ref(), Some(v), "{v:?}");
            }
        }
    }

    #[test]
    fn every_value_reads_back_from_what_it_shows() {
        round_trip(&[
            Rate::from_kbit(19_950),
            Rate::ZERO,
            Rate::from_bits_per_sec(1),
        ]);
        round_trip(&[Time::from_micros(14_570), Time::from_secs(3600)]);
        round_trip(&[Size::from_bytes(4 << 20)]);
        round_trip(&[0u8, 3]);
        round_trip(&[0u32, 65536]);
        round_trip(&[-64i64, 256]);
        round_trip(&[true, false]);
        round_trip(&[Qdisc::Cake, Qdisc::FqCodel]);
        round_trip(&LinkPreset::all());
        round_trip(&[Framing::None, Framing::Atm, Framing::Ptm]);
        round_trip(&DIFFSERV);
        round_trip(&[
            AckFilter::Disabled,
            AckFilter::Enabled,
            AckFilter::Aggressive,
        ]);
        let isolations: Vec<Isolation> =
            ISOLATION_NAMES.iter().map(|n| n.parse().unwrap()).collect();
        round_trip(&isolations);
    }

    /// What `--classify A --classify B` reads is the list the options held.
    #[test]
    fn a_list_said_item_by_item_reads_back_whole() {
        let list = vec!["gaming".to_string(), "bulk lan-host 10.0.0.5".to_string()];
        let read = list
            .each()
            .iter()
            .map(|t| <Vec<String>>::parse(t).unwrap())
            .reduce(OptValue::and);
        assert_eq!(read, Some(list));
        assert_eq!(Rate::from_mbit(78).each(), ["78mbit"]);
    }

    #[test]
    fn every_choice_is_a_value() {
        fn check<T: OptValue>() {
            for c in T::choices() {
                assert!(T::parse(c).is_ok(), "{c}");
            }
        }
        check::<bool>();
        check::<Qdisc>();
        check::<LinkPreset>();
        check::<Framing>();
        check::<Isolation>();
        check::<Diffserv>();
        check::<AckFilter>();
    }

    #[test]
    fn toml_values_are_what_the_config_reads() {
        assert_eq!(Rate::from_kbit(19_950).toml(), "\"19950kbit\"");
        assert_eq!(Rate::ZERO.toml(), "0");
        assert_eq!(AckFilter::Aggressive.toml(), "\"aggressive\"");
        assert_eq!(AckFilter::Enabled.toml(), "true");
        assert_eq!(vec!["gaming".to_string()].toml(), "[\"gaming\"]");
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
