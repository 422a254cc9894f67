//! Filters, from `tc -j -s -d filter show dev DEV [parent P | ingress]`.
//!
//! A u32 filter prints as three entries per `pref`: the filter head (no options), its hash table
//! (`"fh": "800:"`, `ht_divisor`), and each key (`"fh": "800::800"`) with its `flowid`, its
//! `match`es and `actions`. A key matching the DS field of IPv4 (`match ip dsfield 0xb8 0xfc`)
//! prints as `{"value": "b80000", "mask": "fc0000", "off": 0}`: the TOS byte is the second byte of
//! the first 32-bit word. IPv6's traffic class (`match ip6 priority 0xb8 0xfc`) straddles bits
//! 20..28: `{"value": "b800000", "mask": "fc00000", "off": 0}`. A key with several matches
//! repeats the `match` key in one JSON object; all are kept ([`U32Key::matches`]).

use super::{handle_field, TcJsonError};
use crate::model::Handle;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::fmt;
use unbloat_units::Dscp;

/// One entry of tc's filter list.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// The qdisc or class the filter is attached to; tc omits it when the command named the
    /// parent, and [`parse_filters`] then fills in the parent asked for.
    pub parent: Option<Handle>,
    /// `ip`, `ipv6`, `all`, ... as tc prints it.
    pub protocol: String,
    pub pref: u32,
    pub kind: String,
    pub details: FilterKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FilterKind {
    /// The head entry of a filter, or a u32 hash table: nothing to match.
    Head,
    U32(U32Key),
    /// Any other classifier: its options as tc printed them.
    Other(Value),
}

/// One u32 key (a `fh` of the form `800::800`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct U32Key {
    pub fh: String,
    pub flowid: Option<Handle>,
    pub matches: Vec<U32Match>,
    pub actions: Vec<Action>,
}

/// `match VALUE/MASK at OFF` on a 32-bit word of the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct U32Match {
    pub value: u32,
    pub mask: u32,
    pub off: i64,
}

/// An action attached to a filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Mirred(Mirred),
    Other(Value),
}

/// act_mirred: `action mirred egress redirect dev IFB`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirred {
    /// `redirect` or `mirror`.
    pub action: String,
    /// `egress` or `ingress`.
    pub direction: String,
    pub to_dev: String,
    /// Packets and bytes the action handled (with `-s`).
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
}

impl U32Match {
    /// The match that takes every packet (`match u32 0 0`).
    pub fn is_catch_all(&self) -> bool {
        self.mask == 0 && self.value == 0
    }
    /// The DSCP this match selects in an IPv4 header's DS field with the DSCP mask 0xfc.
    pub fn ipv4_dscp(&self) -> Option<Dscp> {
        self.dscp_at(16)
    }
    /// The DSCP this match selects in an IPv6 header's traffic class with the mask 0xfc.
    pub fn ipv6_dscp(&self) -> Option<Dscp> {
        self.dscp_at(20)
    }
    fn dscp_at(&self, shift: u32) -> Option<Dscp> {
        if self.off != 0 || self.mask != 0xfc << shift {
            return None;
        }
        Dscp::new(((self.value >> shift) & 0xff) as u8 >> 2).ok()
    }
}

impl Filter {
    pub fn u32_key(&self) -> Option<&U32Key> {
        match &self.details {
            FilterKind::U32(k) => Some(k),
            _ => None,
        }
    }
}

impl U32Key {
    pub fn mirred(&self) -> impl Iterator<Item = &Mirred> {
        self.actions.iter().filter_map(|a| match a {
            Action::Mirred(m) => Some(m),
            Action::Other(_) => None,
        })
    }
}

/// Parses `tc -j -s -d filter show dev DEV [parent P]`. `asked_parent` is the parent given on the
/// command line (tc then leaves it out of each entry); entries that name their parent keep it.
pub fn parse_filters(text: &str, asked_parent: Option<Handle>) -> Result<Vec<Filter>, TcJsonError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    // Not through `Value`: it keeps only the last of repeated keys, and u32 repeats `match`.
    let entries: Vec<RawEntry> = serde_json::from_str(text).map_err(|e| TcJsonError::NotJson {
        what: "filter",
        message: e.to_string(),
    })?;
    entries
        .into_iter()
        .enumerate()
        .map(|(index, e)| {
            filter_from_raw(e, asked_parent).map_err(|message| TcJsonError::Entry {
                what: "filter",
                index,
                message,
            })
        })
        .collect()
}

fn filter_from_raw(e: RawEntry, asked_parent: Option<Handle>) -> Result<Filter, String> {
    let obj = &e.fields;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("no \"kind\"")?
        .to_string();
    let protocol = obj
        .get("protocol")
        .and_then(Value::as_str)
        .unwrap_or("all")
        .to_string();
    let pref = obj
        .get("pref")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .ok_or("no \"pref\"")?;
    let parent = handle_field(obj, "parent")?.or(asked_parent);
    let details = match e.options {
        None => FilterKind::Head,
        Some(opts) if kind == "u32" => {
            if opts.fields.contains_key("ht_divisor") && opts.matches.is_empty() {
                FilterKind::Head
            } else {
                FilterKind::U32(u32_key(opts)?)
            }
        }
        Some(opts) => FilterKind::Other(Value::Object(opts.fields)),
    };
    Ok(Filter {
        parent,
        protocol,
        pref,
        kind,
        details,
    })
}

/// One filter entry as it appears in the text, with its options read by [`RawOptions`].
struct RawEntry {
    fields: Map<String, Value>,
    options: Option<RawOptions>,
}

/// An options object with every `match` kept, in order (other repeated keys: the last wins).
struct RawOptions {
    fields: Map<String, Value>,
    matches: Vec<Value>,
}

impl<'de> Deserialize<'de> for RawEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawEntry;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a filter entry object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEntry, A::Error> {
                let mut e = RawEntry {
                    fields: Map::new(),
                    options: None,
                };
                while let Some(key) = map.next_key::<String>()? {
                    if key == "options" {
                        e.options = Some(map.next_value()?);
                    } else {
                        let v: Value = map.next_value()?;
                        e.fields.insert(key, v);
                    }
                }
                Ok(e)
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for RawOptions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawOptions;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a filter's options object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawOptions, A::Error> {
                let mut o = RawOptions {
                    fields: Map::new(),
                    matches: Vec::new(),
                };
                while let Some(key) = map.next_key::<String>()? {
                    let v: Value = map.next_value()?;
                    if key == "match" {
                        o.matches.push(v.clone());
                    }
                    o.fields.insert(key, v);
                }
                Ok(o)
            }
        }
        d.deserialize_map(V)
    }
}

fn u32_key(o: RawOptions) -> Result<U32Key, String> {
    let flowid = match o.fields.get("flowid").and_then(Value::as_str) {
        // tc prints `???` for a key without a class.
        Some(f) if f != "???" => Some(f.parse::<Handle>()?),
        _ => None,
    };
    let matches = o.matches.iter().map(u32_match).collect::<Result<_, _>>()?;
    let actions = match o.fields.get("actions") {
        Some(Value::Array(a)) => a.iter().cloned().map(action).collect(),
        _ => Vec::new(),
    };
    Ok(U32Key {
        fh: o
            .fields
            .get("fh")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        flowid,
        matches,
        actions,
    })
}

fn u32_match(v: &Value) -> Result<U32Match, String> {
    let hex = |key: &str| -> Result<u32, String> {
        let s = v
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("match without {key}"))?;
        u32::from_str_radix(s, 16).map_err(|_| format!("match {key} {s:?} is not hex"))
    };
    Ok(U32Match {
        value: hex("value")?,
        mask: hex("mask")?,
        off: v.get("off").and_then(Value::as_i64).unwrap_or(0),
    })
}

fn action(v: Value) -> Action {
    if v.get("kind").and_then(Value::as_str) != Some("mirred") {
        return Action::Other(v);
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    match (s("mirred_action"), s("direction"), s("to_dev")) {
        (Some(action), Some(direction), Some(to_dev)) => {
            let stat = |k: &str| {
                v.get("stats")
                    .and_then(|st| st.get(k))
                    .and_then(Value::as_u64)
            };
            Action::Mirred(Mirred {
                action,
                direction,
                to_dev,
                packets: stat("packets"),
                bytes: stat("bytes"),
            })
        }
        _ => Action::Other(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dscp_matches_decode_for_both_families() {
        let v4 = U32Match {
            value: 0xb8_0000,
            mask: 0xfc_0000,
            off: 0,
        };
        assert_eq!(v4.ipv4_dscp(), Some(Dscp::new(46).unwrap()));
        assert_eq!(v4.ipv6_dscp(), None);
        let v6 = U32Match {
            value: 0x0b80_0000,
            mask: 0x0fc0_0000,
            off: 0,
        };
        assert_eq!(v6.ipv6_dscp(), Some(Dscp::new(46).unwrap()));
        let cs1 = U32Match {
            value: 0x20_0000,
            mask: 0xfc_0000,
            off: 0,
        };
        assert_eq!(cs1.ipv4_dscp(), Some(Dscp::new(8).unwrap()));
        let proto = U32Match {
            value: 0x11_0000,
            mask: 0xff_0000,
            off: 8,
        };
        assert_eq!(proto.ipv4_dscp(), None);
    }
}
