//! The model of what the kernel reports through `tc -j -s -d qdisc|class|filter show`.
//!
//! Heads up! This follows what iproute2 really prints, checked against outputs captured from a
//! Linux 6.1 kernel with iproute2 6.1 (the fixtures in `tests/fixtures/` and `fixtures/tc/`), not
//! what one would guess:
//!
//! - Rates are BYTES per second (cake's `bandwidth`, `capacity_estimate`, a tin's
//!   `threshold_rate`); cake's `bandwidth` is the string `"unlimited"` when there is no shaper.
//! - Times are microseconds (`rtt`, `target_us`, fq_codel's `target`). fq_codel keeps its times in
//!   units of 1024 ns, so `target 5ms` reads back as 4999 ([`codel_time_readback`]).
//! - Some numbers are strings: cake's `fwmark` (`"0"`, `"0xff"`), htb's `default` (`"0x12"`),
//!   u32's `value`/`mask` (hex without leading zeros: dsfield 0xb8 is `"b80000"`).
//! - Keys are left out when they hold their "off" value: cake's `mpu` when 0, `atm` when `raw`,
//!   fq_codel's `ecn` when off, a stab's `mpu`/`overhead` when 0.
//! - A u32 key with several `match`es repeats the key `match` in one object (so does `success`):
//!   the filter model collects every one rather than keeping the last.
//! - iproute2 up to 6.1 ignores `-j` for `tc class show` and prints text; later versions print
//!   JSON. [`class::parse_classes`] reads both and records which it saw, because text rates are
//!   rounded by tc's printer.
//!
//! Parsing never fails because of a qdisc, class, filter or action kind it does not know: those
//! are kept as raw JSON ([`QdiscKind::Other`]). A known kind whose options do not have the
//! expected shape is kept the same way with the reason, so `status` can still show it and `verify`
//! reports it rather than passing.

pub mod class;
pub mod filter;
pub mod live;

pub use class::{
    parse_classes, tc_text_rate, Class, ClassKind, ClassStats, HtbClassOptions, Source,
};
pub use filter::{parse_filters, Action, Filter, FilterKind, Mirred, U32Key, U32Match};
pub use live::{DeviceState, IfbTexts, LiveState, LiveTexts};

use crate::model::Handle;
pub(crate) use crate::qdisc::tc_values::parse_c_number;
use crate::qdisc::tc_values::{bytes_per_sec, micros, number_or_text};
use serde::Deserialize;
use serde_json::Value;
use unbloat_units::{Rate, Time};

/// Why a piece of tc output could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TcJsonError {
    #[error("`tc {what} show` output is not the JSON list tc prints: {message}")]
    NotJson { what: &'static str, message: String },
    #[error("`tc {what} show` entry {index}: {message}")]
    Entry {
        what: &'static str,
        index: usize,
        message: String,
    },
    #[error("`tc class show` text, line {line}: {message}")]
    ClassText { line: usize, message: String },
}

/// Per-qdisc counters (`-s`): `Sent B bytes P pkt (dropped D, overlimits O requeues R)`,
/// `backlog Bb Qp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct QdiscStats {
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    /// Bytes queued.
    pub backlog: u64,
    /// Packets queued.
    pub qlen: u64,
}

/// A size table (`man tc-stab`) as `tc -d` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StabInfo {
    /// `"ethernet"` or `"atm"` (`"adsl"` is tc's alias of atm and prints as atm).
    #[serde(default = "ethernet")]
    pub linklayer: String,
    #[serde(default)]
    pub overhead: i32,
    #[serde(default)]
    pub mpu: u32,
    #[serde(default)]
    pub mtu: u32,
    #[serde(default)]
    pub tsize: u32,
}

fn ethernet() -> String {
    "ethernet".to_string()
}

/// One qdisc of `tc -j -s -d qdisc show`.
#[derive(Debug, Clone, PartialEq)]
pub struct Qdisc {
    /// The kind as tc names it (`cake`, `htb`, `noqueue`, ...), also for [`QdiscKind::Other`].
    pub kind: String,
    /// `0:` for the qdiscs the kernel attaches by itself (noqueue, pfifo_fast, mq, a default
    /// fq_codel); any qdisc added with `tc` has a non-zero major.
    pub handle: Handle,
    /// None for the root qdisc (and for `ingress`/`clsact`, whose parent is `ffff:fff1`: see
    /// [`Qdisc::is_ingress`]).
    pub parent: Option<Handle>,
    pub root: bool,
    pub stab: Option<StabInfo>,
    /// None when the output was taken without `-s`.
    pub stats: Option<QdiscStats>,
    pub details: QdiscKind,
}

/// What a qdisc is, with its options and extended statistics for the kinds unbloat uses.
#[derive(Debug, Clone, PartialEq)]
pub enum QdiscKind {
    Cake {
        options: CakeOptions,
        stats: Option<CakeStats>,
    },
    FqCodel {
        options: FqCodelOptions,
        stats: Option<FqCodelStats>,
    },
    Htb(HtbOptions),
    /// `ingress` or `clsact` (kind tells which).
    Ingress,
    /// Any other kind, or a known kind whose output did not have the expected shape (`error`).
    Other {
        options: Value,
        error: Option<String>,
    },
}

pub use crate::qdisc::cake::CakeOptions;

/// cake's statistics (`tc -s`), sch_cake.c `cake_dump_stats`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CakeStats {
    pub memory_used: u64,
    pub memory_limit: u64,
    #[serde(deserialize_with = "bytes_per_sec")]
    pub capacity_estimate: Rate,
    #[serde(default)]
    pub min_network_size: u64,
    #[serde(default)]
    pub max_network_size: u64,
    #[serde(default)]
    pub min_adj_size: u64,
    #[serde(default)]
    pub max_adj_size: u64,
    #[serde(default)]
    pub avg_hdr_offset: u64,
    pub tins: Vec<CakeTin>,
}

/// One of cake's tins (1 for besteffort, 3 for diffserv3, 4 for diffserv4, 8 for diffserv8).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CakeTin {
    /// The tin's share of the bandwidth when all tins are busy ("thresh").
    #[serde(deserialize_with = "bytes_per_sec")]
    pub threshold_rate: Rate,
    pub sent_bytes: u64,
    pub backlog_bytes: u64,
    #[serde(rename = "target_us", deserialize_with = "micros")]
    pub target: Time,
    #[serde(rename = "interval_us", deserialize_with = "micros")]
    pub interval: Time,
    #[serde(rename = "peak_delay_us", deserialize_with = "micros")]
    pub peak_delay: Time,
    #[serde(rename = "avg_delay_us", deserialize_with = "micros")]
    pub avg_delay: Time,
    /// "sp_delay" in tc's text: the delay of sparse flows.
    #[serde(rename = "base_delay_us", deserialize_with = "micros")]
    pub base_delay: Time,
    pub sent_packets: u64,
    #[serde(default)]
    pub way_indirect_hits: u64,
    #[serde(default)]
    pub way_misses: u64,
    #[serde(default)]
    pub way_collisions: u64,
    pub drops: u64,
    pub ecn_mark: u64,
    pub ack_drops: u64,
    pub sparse_flows: u64,
    pub bulk_flows: u64,
    pub unresponsive_flows: u64,
    #[serde(default)]
    pub max_pkt_len: u64,
    #[serde(default)]
    pub flow_quantum: u64,
}

pub use crate::qdisc::fq_codel::FqCodelOptions;

/// fq_codel's statistics (`tc -s`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FqCodelStats {
    pub maxpacket: u64,
    pub drop_overlimit: u64,
    pub new_flow_count: u64,
    pub ecn_mark: u64,
    pub new_flows_len: u64,
    pub old_flows_len: u64,
}

/// An htb qdisc's options (the root of an HTB tree).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HtbOptions {
    pub r2q: u32,
    /// The minor number of the default class (`default 12` is printed `"0x12"`).
    #[serde(rename = "default", deserialize_with = "number_or_text")]
    pub default_class: u64,
    #[serde(default)]
    pub direct_packets_stat: u64,
    #[serde(default)]
    pub direct_qlen: Option<u64>,
}

pub use crate::qdisc::fq_codel::codel_time_readback;

impl Qdisc {
    /// The `ingress` or `clsact` qdisc of a device.
    pub fn is_ingress(&self) -> bool {
        matches!(self.details, QdiscKind::Ingress)
    }
    /// A root qdisc the kernel attached by itself (handle `0:`): noqueue, pfifo_fast, mq, or
    /// the `default_qdisc` sysctl's choice. Nothing a user or unbloat added has handle 0.
    pub fn is_kernel_default(&self) -> bool {
        self.handle.major == 0
    }
    pub fn cake(&self) -> Option<(&CakeOptions, Option<&CakeStats>)> {
        match &self.details {
            QdiscKind::Cake { options, stats } => Some((options, stats.as_ref())),
            _ => None,
        }
    }
    pub fn fq_codel(&self) -> Option<(&FqCodelOptions, Option<&FqCodelStats>)> {
        match &self.details {
            QdiscKind::FqCodel { options, stats } => Some((options, stats.as_ref())),
            _ => None,
        }
    }
    pub fn htb(&self) -> Option<&HtbOptions> {
        match &self.details {
            QdiscKind::Htb(o) => Some(o),
            _ => None,
        }
    }
    /// `kind handle` as tc writes it, e.g. `cake 8001:`.
    pub fn label(&self) -> String {
        format!("{} {}", self.kind, self.handle)
    }
}

/// Parses the output of `tc -j [-s] [-d] qdisc show [dev DEV]`. Empty output means no qdiscs.
pub fn parse_qdiscs(text: &str) -> Result<Vec<Qdisc>, TcJsonError> {
    json_list("qdisc", text)?
        .into_iter()
        .enumerate()
        .map(|(index, v)| {
            qdisc_from_value(v).map_err(|message| TcJsonError::Entry {
                what: "qdisc",
                index,
                message,
            })
        })
        .collect()
}

/// The list tc prints, or an empty list for empty output (tc prints nothing for some devices).
pub(crate) fn json_list(what: &'static str, text: &str) -> Result<Vec<Value>, TcJsonError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(other) => Err(TcJsonError::NotJson {
            what,
            message: format!("expected a list, found {}", type_name(&other)),
        }),
        Err(e) => Err(TcJsonError::NotJson {
            what,
            message: e.to_string(),
        }),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn handle_field(
    obj: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<Handle>, String> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => s.parse::<Handle>().map(Some),
        Some(other) => Err(format!(
            "{key} is {}, expected a handle like \"1:\"",
            type_name(other)
        )),
    }
}

fn qdisc_from_value(v: Value) -> Result<Qdisc, String> {
    let obj = match v {
        Value::Object(o) => o,
        other => return Err(format!("expected an object, found {}", type_name(&other))),
    };
    let kind = match obj.get("kind") {
        Some(Value::String(k)) => k.clone(),
        _ => return Err("no \"kind\"".to_string()),
    };
    let handle = handle_field(&obj, "handle")?.ok_or("no \"handle\"")?;
    let parent = handle_field(&obj, "parent")?;
    let root = obj.get("root").and_then(Value::as_bool).unwrap_or(false);
    let stab = match obj.get("stab") {
        None => None,
        Some(s) => {
            Some(StabInfo::deserialize(s).map_err(|e| format!("{kind} {handle}: stab: {e}"))?)
        }
    };
    let has_stats = obj.contains_key("bytes");
    let whole = Value::Object(obj);
    let stats = if has_stats {
        Some(QdiscStats::deserialize(&whole).map_err(|e| format!("{kind} {handle}: {e}"))?)
    } else {
        None
    };
    let options = whole.get("options").cloned().unwrap_or(Value::Null);
    let details = kind_details(&kind, &options, &whole, has_stats);
    Ok(Qdisc {
        kind,
        handle,
        parent,
        root,
        stab,
        stats,
        details,
    })
}

/// Reads the kind-specific part; a known kind that does not fit is kept as `Other` with why.
fn kind_details(kind: &str, options: &Value, whole: &Value, has_stats: bool) -> QdiscKind {
    let typed = match kind {
        "cake" => CakeOptions::deserialize(options).and_then(|options| {
            let stats = if has_stats && whole.get("tins").is_some() {
                Some(CakeStats::deserialize(whole)?)
            } else {
                None
            };
            Ok(QdiscKind::Cake { options, stats })
        }),
        "fq_codel" => FqCodelOptions::deserialize(options).and_then(|options| {
            let stats = if has_stats && whole.get("maxpacket").is_some() {
                Some(FqCodelStats::deserialize(whole)?)
            } else {
                None
            };
            Ok(QdiscKind::FqCodel { options, stats })
        }),
        "htb" => HtbOptions::deserialize(options).map(QdiscKind::Htb),
        "ingress" | "clsact" => Ok(QdiscKind::Ingress),
        _ => {
            return QdiscKind::Other {
                options: options.clone(),
                error: None,
            }
        }
    };
    typed.unwrap_or_else(|e| QdiscKind::Other {
        options: options.clone(),
        error: Some(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codel_times_read_back_as_the_kernel_rounds_them() {
        assert_eq!(
            codel_time_readback(Time::from_millis(5)),
            Time::from_micros(4999)
        );
        assert_eq!(
            codel_time_readback(Time::from_millis(100)),
            Time::from_micros(99999)
        );
        assert_eq!(
            codel_time_readback(Time::from_micros(0)),
            Time::from_micros(0)
        );
        // Never more than what was set, and less by at most a microsecond or two per 40 ms.
        let t = Time::from_micros(14_570);
        assert_eq!(codel_time_readback(t), Time::from_micros(14_569));
        // Not idempotent: setting what was read back loses another microsecond.
        assert_eq!(
            codel_time_readback(codel_time_readback(t)),
            Time::from_micros(14_568)
        );
    }

    #[test]
    fn unknown_kinds_and_odd_shapes_never_break_parsing() {
        let text = r#"[{"kind":"sfb","handle":"1:","root":true,"options":{"anything":[1,2]}},
                      {"kind":"cake","handle":"2:","parent":"1:","options":{"bandwidth":"fast"}}]"#;
        let q = parse_qdiscs(text).unwrap();
        assert!(matches!(
            &q[0].details,
            QdiscKind::Other { error: None, .. }
        ));
        match &q[1].details {
            QdiscKind::Other { error: Some(e), .. } => assert!(e.contains("bandwidth"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(q[1].parent, Some(Handle::new(1, 0)));
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let e = parse_qdiscs("qdisc noqueue 0: root").unwrap_err();
        assert!(e.to_string().contains("not the JSON list"), "{e}");
        let e = parse_qdiscs(r#"[{"handle":"1:"}]"#).unwrap_err();
        assert_eq!(e.to_string(), "`tc qdisc show` entry 0: no \"kind\"");
        assert_eq!(parse_qdiscs("").unwrap(), vec![]);
        assert_eq!(parse_qdiscs("[]\n").unwrap(), vec![]);
    }

    #[test]
    fn c_numbers() {
        assert_eq!(parse_c_number("0x12"), Some(0x12));
        assert_eq!(parse_c_number("0"), Some(0));
        assert_eq!(parse_c_number("255"), Some(255));
        assert_eq!(parse_c_number("0xzz"), None);
    }
}
