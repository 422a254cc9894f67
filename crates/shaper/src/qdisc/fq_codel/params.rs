//! fq_codel's parameters, each declared once ([`PARAMS`]): the words that set it on the tc
//! line, how the kernel reports it back (`tc -j`'s key in [`FqCodelOptions`], its netlink
//! attribute in [`FqCodelOptions::from_attrs`]) and how a mismatch is named. The script
//! ([`FqCodelParams::words`]) and the read-back check (`verify`) walk [`PARAMS`]; the defaults,
//! and why, are `params()` in the module above.
//!
//! Adding an fq_codel option: its field in `FqCodelParams` (`model.rs`, which the HTB tree
//! holds) and in [`FqCodelOptions`], its line in `params()`, [`FqCodelOptions::from_attrs`] and
//! [`expected`], its row here, and the option a user sets it with in `options/table.rs`.

use super::attr::*;
use super::codel_time_readback;
use crate::human::{human_size, human_time};
use crate::model::FqCodelParams;
use crate::qdisc::netlink::OptionAttrs;
use crate::qdisc::setting::{Setting, Settings};
use crate::qdisc::tc_values::{micros, opt_micros};
use serde::Deserialize;
use unbloat_units::Time;

/// fq_codel's options (iproute2 tc/q_fq_codel.c), as `tc -j` reports them or the kernel's
/// netlink answer holds them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FqCodelOptions {
    pub limit: u32,
    pub flows: u32,
    pub quantum: u32,
    /// As the kernel holds it: see [`codel_time_readback`].
    #[serde(deserialize_with = "micros")]
    pub target: Time,
    #[serde(deserialize_with = "micros")]
    pub interval: Time,
    #[serde(default)]
    pub memory_limit: Option<u64>,
    /// tc prints `"ecn": true` only when ECN is on.
    #[serde(default)]
    pub ecn: bool,
    #[serde(default)]
    pub drop_batch: Option<u32>,
    #[serde(default, deserialize_with = "opt_micros")]
    pub ce_threshold: Option<Time>,
}

impl FqCodelOptions {
    /// `TCA_FQ_CODEL_*`; times are the kernel's microseconds, as tc prints them.
    pub fn from_attrs(a: &dyn OptionAttrs) -> Result<FqCodelOptions, String> {
        let need = |k, name| a.u32(k).ok_or(format!("no TCA_FQ_CODEL_{name}"));
        let us = |v: u32| Time::from_micros(u64::from(v));
        Ok(FqCodelOptions {
            limit: need(LIMIT, "LIMIT")?,
            flows: need(FLOWS, "FLOWS")?,
            quantum: need(QUANTUM, "QUANTUM")?,
            target: us(need(TARGET, "TARGET")?),
            interval: us(need(INTERVAL, "INTERVAL")?),
            memory_limit: a.u32(MEMORY_LIMIT).map(u64::from),
            ecn: a.u32(ECN).unwrap_or(0) != 0,
            drop_batch: a.u32(DROP_BATCH_SIZE),
            ce_threshold: a.u32(CE_THRESHOLD).map(us),
        })
    }
}

/// What the kernel reports back for `p`: CoDel's times in its own rounding.
pub fn expected(p: &FqCodelParams) -> FqCodelOptions {
    FqCodelOptions {
        limit: p.limit,
        flows: p.flows,
        quantum: p.quantum,
        target: codel_time_readback(p.target),
        interval: codel_time_readback(p.interval),
        memory_limit: p.memory_limit.map(|m| m.bytes()),
        ecn: p.ecn,
        drop_batch: None,
        ce_threshold: None,
    }
}

/// One of fq_codel's parameters: see the module's documentation.
pub struct Param {
    /// How a mismatch names it: `egress fq_codel (110:): limit is 10240, expected 1001`.
    pub what: &'static str,
    /// Its words on the tc line, in this order.
    pub words: fn(&FqCodelParams) -> Vec<String>,
    /// The value read back, as a mismatch shows it.
    pub read: fn(&FqCodelOptions) -> String,
    /// Whether the read-back check compares it (a value left to the kernel is not).
    pub checked: fn(&FqCodelParams) -> bool,
    /// Its key and value in `unbloat status --json` (under each HTB class's leaf).
    pub status: (&'static str, fn(&FqCodelOptions) -> Setting),
    /// Its text in `unbloat status`'s line of the leaf (None: not shown).
    pub text: fn(&FqCodelOptions) -> Option<String>,
}

const ALWAYS: fn(&FqCodelParams) -> bool = |_| true;

/// fq_codel's parameters, in the order of the tc line (`limit 1001 flows 1024 quantum 300
/// target 5ms interval 100ms noecn`). Times are written in µs-exact units, as `Time` displays
/// them.
pub static PARAMS: &[Param] = &[
    Param {
        what: "limit",
        words: |p| vec!["limit".into(), p.limit.to_string()],
        read: |o| o.limit.to_string(),
        checked: ALWAYS,
        status: ("limit", |o| Setting::Int(i64::from(o.limit))),
        text: |o| Some(format!("limit {}", o.limit)),
    },
    Param {
        what: "flows",
        words: |p| vec!["flows".into(), p.flows.to_string()],
        read: |o| o.flows.to_string(),
        checked: ALWAYS,
        status: ("flows", |o| Setting::Int(i64::from(o.flows))),
        text: |o| Some(format!("flows {}", o.flows)),
    },
    Param {
        what: "quantum",
        words: |p| vec!["quantum".into(), p.quantum.to_string()],
        read: |o| o.quantum.to_string(),
        checked: ALWAYS,
        status: ("quantum", |o| Setting::Int(i64::from(o.quantum))),
        text: |o| Some(format!("quantum {}", o.quantum)),
    },
    Param {
        what: "target",
        words: |p| vec!["target".into(), p.target.to_string()],
        read: |o| o.target.to_string(),
        checked: ALWAYS,
        status: ("target_us", |o| Setting::Int(o.target.micros() as i64)),
        text: |o| Some(format!("target {}", human_time(o.target.micros()))),
    },
    Param {
        what: "interval",
        words: |p| vec!["interval".into(), p.interval.to_string()],
        read: |o| o.interval.to_string(),
        checked: ALWAYS,
        status: ("interval_us", |o| Setting::Int(o.interval.micros() as i64)),
        text: |o| Some(format!("interval {}", human_time(o.interval.micros()))),
    },
    Param {
        what: "memory_limit",
        words: |p| match p.memory_limit {
            Some(m) => vec!["memory_limit".into(), m.bytes().to_string()],
            None => vec![],
        },
        read: |o| {
            o.memory_limit
                .map_or("unset".into(), |b| format!("{b} bytes"))
        },
        // The kernel's 32 MB unless the user set one.
        checked: |p| p.memory_limit.is_some(),
        status: ("memory_limit_bytes", |o| {
            o.memory_limit
                .map_or(Setting::Unknown, |m| Setting::Int(m as i64))
        }),
        text: |o| {
            o.memory_limit
                .map(|m| format!("memory_limit {}", human_size(m)))
        },
    },
    Param {
        what: "ecn",
        words: |p| vec![if p.ecn { "ecn" } else { "noecn" }.into()],
        read: |o| if o.ecn { "on" } else { "off" }.into(),
        checked: ALWAYS,
        status: ("ecn", |o| Setting::Bool(o.ecn)),
        text: |o| Some(if o.ecn { "ecn" } else { "noecn" }.into()),
    },
];

impl FqCodelParams {
    /// The words after `fq_codel` (see [`PARAMS`]).
    pub fn words(&self) -> Vec<String> {
        PARAMS.iter().flat_map(|p| (p.words)(self)).collect()
    }
}

/// fq_codel's parameters in `unbloat status --json`, keyed as [`PARAMS`] says.
pub fn settings(o: &FqCodelOptions) -> Settings {
    Settings(
        PARAMS
            .iter()
            .map(|p| (p.status.0, (p.status.1)(o)))
            .collect(),
    )
}

/// fq_codel's parameters as `unbloat status` writes them.
pub fn text(o: &FqCodelOptions) -> Vec<String> {
    PARAMS.iter().filter_map(|p| (p.text)(o)).collect()
}
