//! Classes, from `tc -j -s -d class show`: JSON from iproute2 versions that print it, tc's text
//! from those that ignore `-j` for classes (iproute2 6.1, Debian 12's, prints text).
//!
//! The text of an htb class with `-s -d` (iproute2 tc/q_htb.c `htb_print_opt`, `htb_print_xstats`):
//!
//! ```text
//! class htb 1:11 parent 1:1 leaf 110: prio 1 quantum 300 rate 6650Kbit ceil 19950Kbit linklayer ethernet burst 1598b/1 mpu 0b cburst 1596b/1 mpu 0b level 0
//!  Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
//!  backlog 0b 0p requeues 0
//!  lended: 0 borrowed: 0 giants: 0
//!  tokens: 30062 ctokens: 10015
//! ```
//!
//! tc's text rates are exact for every rate unbloat writes (whole kbit/s print as `19950Kbit`),
//! but iproute2's printer divides by 1000 while the value is at least 1000 of the next unit, so
//! an odd rate like 78123456 bit/s prints as `78123Kbit`: [`tc_text_rate`] reproduces that
//! rounding so a comparison can be made at the precision tc gave.

use super::{handle_field, json_list, parse_c_number, TcJsonError};
use crate::model::Handle;
use serde_json::{Map, Value};
use unbloat_units::{Rate, Size};

/// Where a class list came from, which decides how exact its rates are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `tc -j` JSON: rates in exact bytes per second.
    Json,
    /// tc's text: rates as tc printed them ([`tc_text_rate`]).
    Text,
    /// Read over rtnetlink (unbloat-system's `tcnl`): exact, as the kernel holds them.
    Netlink,
}

/// Counters of a class (`-s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassStats {
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
}

/// An htb class's parameters and its extended statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HtbClassOptions {
    /// Only leaf classes (level 0) report prio and quantum.
    pub prio: Option<u32>,
    pub quantum: Option<u32>,
    pub rate: Rate,
    pub ceil: Rate,
    pub burst: Option<Size>,
    pub cburst: Option<Size>,
    pub level: Option<u32>,
    /// The htb rate table's own link layer (unbloat compensates with a stab instead).
    pub linklayer: Option<String>,
    pub lended: Option<u64>,
    pub borrowed: Option<u64>,
    pub giants: Option<u64>,
    pub tokens: Option<i64>,
    pub ctokens: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassKind {
    Htb(HtbClassOptions),
    /// Any other kind (cake and fq_codel list their busy flows as classes): the raw output.
    Other(String),
}

/// One class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    pub kind: String,
    pub handle: Handle,
    /// None for a class at the root of its qdisc (`root`).
    pub parent: Option<Handle>,
    /// The qdisc attached to this class, if any (`leaf 110:`).
    pub leaf: Option<Handle>,
    pub stats: Option<ClassStats>,
    pub details: ClassKind,
    pub source: Source,
}

impl Class {
    pub fn htb(&self) -> Option<&HtbClassOptions> {
        match &self.details {
            ClassKind::Htb(o) => Some(o),
            ClassKind::Other(_) => None,
        }
    }
}

/// Parses `tc -j -s -d class show dev DEV` output, JSON or text. Empty output means no classes.
pub fn parse_classes(text: &str) -> Result<Vec<Class>, TcJsonError> {
    let t = text.trim_start();
    if t.is_empty() {
        Ok(Vec::new())
    } else if t.starts_with('[') {
        parse_json(text)
    } else {
        parse_text(text)
    }
}

/// The rate tc's text shows for `rate`: iproute2 lib/json_print.c `print_color_rate` divides by
/// 1000 while the value is divisible by 1000, or is at least 1000 * 1000, dropping the remainder.
pub fn tc_text_rate(rate: Rate) -> Rate {
    let mut value = rate.bits_per_sec();
    let mut scale = 1u64;
    // Units "", K, M, G, T: at most four divisions.
    for _ in 0..4 {
        if value < 1000 || (!value.is_multiple_of(1000) && value < 1_000_000) {
            break;
        }
        value /= 1000;
        scale *= 1000;
    }
    Rate::from_bits_per_sec(value.saturating_mul(scale))
}

fn parse_json(text: &str) -> Result<Vec<Class>, TcJsonError> {
    json_list("class", text)?
        .into_iter()
        .enumerate()
        .map(|(index, v)| {
            class_from_json(v).map_err(|message| TcJsonError::Entry {
                what: "class",
                index,
                message,
            })
        })
        .collect()
}

fn class_from_json(v: Value) -> Result<Class, String> {
    let obj = match v {
        Value::Object(o) => o,
        _ => return Err("expected an object".to_string()),
    };
    let kind = obj
        .get("class")
        .or_else(|| obj.get("kind"))
        .and_then(Value::as_str)
        .ok_or("no \"class\" (kind)")?
        .to_string();
    let handle = handle_field(&obj, "handle")?.ok_or("no \"handle\"")?;
    let parent = handle_field(&obj, "parent")?;
    // print_0xhex: "0x110" for `leaf 110:`.
    let leaf = match obj.get("leaf").and_then(Value::as_str) {
        Some(s) => Some(
            parse_c_number(s)
                .and_then(|m| u16::try_from(m).ok())
                .map(|m| Handle::new(m, 0))
                .ok_or_else(|| format!("leaf {s:?} is not a qdisc major"))?,
        ),
        None => None,
    };
    let stats_obj = obj.get("stats").and_then(Value::as_object).unwrap_or(&obj);
    let stats = stats_obj.get("bytes").map(|_| ClassStats {
        bytes: num(stats_obj, "bytes"),
        packets: num(stats_obj, "packets"),
        drops: num(stats_obj, "drops"),
        overlimits: num(stats_obj, "overlimits"),
        requeues: num(stats_obj, "requeues"),
        backlog_bytes: num(stats_obj, "backlog"),
        backlog_packets: num(stats_obj, "qlen"),
    });
    let details = if kind == "htb" {
        let rate = obj
            .get("rate")
            .and_then(Value::as_u64)
            .ok_or("htb class without \"rate\"")?;
        let ceil = obj
            .get("ceil")
            .and_then(Value::as_u64)
            .ok_or("htb class without \"ceil\"")?;
        ClassKind::Htb(HtbClassOptions {
            prio: opt_u32(&obj, "prio"),
            quantum: opt_u32(&obj, "quantum"),
            rate: Rate::from_bytes_per_sec(rate),
            ceil: Rate::from_bytes_per_sec(ceil),
            burst: obj
                .get("burst")
                .and_then(Value::as_u64)
                .map(Size::from_bytes),
            cburst: obj
                .get("cburst")
                .and_then(Value::as_u64)
                .map(Size::from_bytes),
            level: opt_u32(&obj, "level"),
            linklayer: obj
                .get("linklayer")
                .and_then(Value::as_str)
                .map(str::to_string),
            lended: stats_obj.get("lended").and_then(Value::as_u64),
            borrowed: stats_obj.get("borrowed").and_then(Value::as_u64),
            giants: stats_obj.get("giants").and_then(Value::as_u64),
            tokens: stats_obj.get("tokens").and_then(Value::as_i64),
            ctokens: stats_obj.get("ctokens").and_then(Value::as_i64),
        })
    } else {
        ClassKind::Other(Value::Object(obj.clone()).to_string())
    };
    Ok(Class {
        kind,
        handle,
        parent,
        leaf,
        stats,
        details,
        source: Source::Json,
    })
}

fn num(obj: &Map<String, Value>, key: &str) -> u64 {
    obj.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn opt_u32(obj: &Map<String, Value>, key: &str) -> Option<u32> {
    obj.get(key)
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
}

/// Splits tc's text into one block per class: a line starting with `class ` and the indented
/// lines under it.
fn parse_text(text: &str) -> Result<Vec<Class>, TcJsonError> {
    let mut blocks: Vec<(usize, Vec<&str>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("class ") {
            blocks.push((i + 1, vec![line]));
        } else if line.trim().is_empty() {
            continue;
        } else if let Some((_, b)) = blocks.last_mut() {
            b.push(line);
        } else {
            return Err(TcJsonError::ClassText {
                line: i + 1,
                message: format!("expected a line starting with \"class \", found {line:?}"),
            });
        }
    }
    blocks
        .into_iter()
        .map(|(line, b)| {
            class_from_text(&b).map_err(|message| TcJsonError::ClassText { line, message })
        })
        .collect()
}

fn class_from_text(lines: &[&str]) -> Result<Class, String> {
    let head: Vec<&str> = lines[0].split_whitespace().collect();
    let kind = head.get(1).ok_or("no kind after \"class\"")?.to_string();
    let handle: Handle = head.get(2).ok_or("no class id")?.parse()?;
    let mut parent = None;
    let mut leaf = None;
    let mut rest = Vec::new();
    let mut i = 3;
    while i < head.len() {
        match head[i] {
            "root" => i += 1,
            "parent" => {
                parent = Some(value_at(&head, i)?.parse::<Handle>()?);
                i += 2;
            }
            "leaf" => {
                let v = value_at(&head, i)?;
                // 6.1 prints `leaf 110:`; be lenient about the colon.
                let v = if v.contains(':') {
                    v.to_string()
                } else {
                    format!("{v}:")
                };
                leaf = Some(v.parse::<Handle>()?);
                i += 2;
            }
            _ => {
                rest.push(head[i]);
                i += 1;
            }
        }
    }
    let body: Vec<&str> = lines[1..]
        .iter()
        .flat_map(|l| l.split_whitespace())
        .collect();
    let stats = text_stats(&body)?;
    let details = if kind == "htb" {
        ClassKind::Htb(htb_from_text(&rest, &body)?)
    } else {
        ClassKind::Other(lines.join("\n"))
    };
    Ok(Class {
        kind,
        handle,
        parent,
        leaf,
        stats,
        details,
        source: Source::Text,
    })
}

fn value_at<'a>(tokens: &[&'a str], i: usize) -> Result<&'a str, String> {
    tokens
        .get(i + 1)
        .copied()
        .ok_or_else(|| format!("{:?} without a value", tokens[i]))
}

fn int<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.trim_end_matches([',', ')'])
        .parse()
        .map_err(|_| format!("{key} {v:?} is not a number"))
}

/// ` Sent B bytes P pkt (dropped D, overlimits O requeues R)` and ` backlog Bb Pp requeues R`;
/// cake's flow classes have no "Sent" part. None when neither is there (no `-s`).
fn text_stats(body: &[&str]) -> Result<Option<ClassStats>, String> {
    let mut s = ClassStats::default();
    let mut seen = false;
    for (i, t) in body.iter().enumerate() {
        let next = body.get(i + 1).copied().unwrap_or("");
        match *t {
            "Sent" => {
                s.bytes = int("Sent", next)?;
                s.packets = int("pkt", body.get(i + 3).copied().unwrap_or(""))?;
                seen = true;
            }
            "(dropped" => {
                s.drops = int("dropped", next)?;
                seen = true;
            }
            "overlimits" => s.overlimits = int("overlimits", next)?,
            "requeues" if s.requeues == 0 => s.requeues = int("requeues", next)?,
            "backlog" => {
                s.backlog_bytes = next.parse::<Size>().map_err(|e| e.to_string())?.bytes();
                let p = body.get(i + 2).copied().unwrap_or("");
                s.backlog_packets = int("backlog packets", p.trim_end_matches('p'))?;
                seen = true;
            }
            _ => {}
        }
    }
    Ok(seen.then_some(s))
}

fn htb_from_text(opts: &[&str], body: &[&str]) -> Result<HtbClassOptions, String> {
    let mut o = HtbClassOptions {
        prio: None,
        quantum: None,
        rate: Rate::ZERO,
        ceil: Rate::ZERO,
        burst: None,
        cburst: None,
        level: None,
        linklayer: None,
        lended: None,
        borrowed: None,
        giants: None,
        tokens: None,
        ctokens: None,
    };
    let (mut rate, mut ceil) = (None, None);
    let size = |key: &str, v: &str| -> Result<Size, String> {
        // `1598b/1`: size, then the cell size of the rate table.
        let v = v.split('/').next().unwrap_or(v);
        v.parse::<Size>().map_err(|e| format!("{key}: {e}"))
    };
    let mut i = 0;
    while i < opts.len() {
        let key = opts[i];
        let take = || value_at(opts, i);
        match key {
            "prio" => o.prio = Some(int(key, take()?)?),
            "quantum" => o.quantum = Some(int(key, take()?)?),
            "rate" => rate = Some(take()?.parse::<Rate>().map_err(|e| e.to_string())?),
            "ceil" => ceil = Some(take()?.parse::<Rate>().map_err(|e| e.to_string())?),
            "burst" => o.burst = Some(size(key, take()?)?),
            "cburst" => o.cburst = Some(size(key, take()?)?),
            "level" => o.level = Some(int(key, take()?)?),
            "linklayer" => o.linklayer = Some(take()?.to_string()),
            // mpu and overhead of the rate tables (unbloat leaves them 0 and uses a stab).
            "mpu" | "overhead" => {
                take()?;
            }
            // Anything else is a word without a value (newer flags); skip it alone.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o.rate = rate.ok_or("htb class without a rate")?;
    o.ceil = ceil.ok_or("htb class without a ceil")?;
    for (i, t) in body.iter().enumerate() {
        let next = body.get(i + 1).copied().unwrap_or("");
        match *t {
            "lended:" => o.lended = Some(int(t, next)?),
            "borrowed:" => o.borrowed = Some(int(t, next)?),
            "giants:" => o.giants = Some(int(t, next)?),
            "tokens:" => o.tokens = Some(int(t, next)?),
            "ctokens:" => o.ctokens = Some(int(t, next)?),
            _ => {}
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_text_rate_rounds_like_iproute2() {
        for (bits, shown) in [
            (19_950_000, 19_950_000),         // 19950Kbit
            (78_000_000, 78_000_000),         // 78Mbit
            (78_123_456, 78_123_000),         // 78123Kbit
            (1_500, 1_500),                   // 1500bit
            (999, 999),                       // 999bit
            (1_234_567_891, 1_234_000_000),   // 1234Mbit
            (10_000_000_000, 10_000_000_000), // 10Gbit
        ] {
            assert_eq!(
                tc_text_rate(Rate::from_bits_per_sec(bits)).bits_per_sec(),
                shown,
                "{bits}"
            );
        }
    }

    #[test]
    fn reads_an_htb_class_in_json_as_newer_iproute2_prints_it() {
        // The shape of iproute2 >= 6.2's tc/tc_class.c print_class + q_htb.c (not captured here:
        // this machine's iproute2 6.1 prints text).
        let text = r#"[{"class":"htb","handle":"1:11","parent":"1:1","leaf":"0x110","prio":1,
            "quantum":300,"rate":831250,"ceil":2493750,"linklayer":"ethernet","burst":1598,
            "burst_cell":1,"mpu_rate":0,"cburst":1596,"cburst_cell":1,"mpu_ceil":0,"level":0,
            "stats":{"bytes":1400,"packets":1,"drops":2,"overlimits":3,"requeues":0,"backlog":0,
            "qlen":0,"lended":1,"borrowed":0,"giants":0,"tokens":30062,"ctokens":10015}}]"#;
        let c = parse_classes(text).unwrap();
        assert_eq!(c[0].source, Source::Json);
        assert_eq!(c[0].leaf, Some(Handle::new(0x110, 0)));
        let h = c[0].htb().unwrap();
        assert_eq!(h.rate, Rate::from_kbit(6650));
        assert_eq!(h.ceil, Rate::from_kbit(19_950));
        assert_eq!(h.tokens, Some(30062));
        assert_eq!(c[0].stats.unwrap().drops, 2);
    }

    #[test]
    fn text_that_is_not_a_class_list_is_an_error_with_the_line() {
        let e = parse_classes("Error: Cannot find device \"eth9\".\n").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = parse_classes("class htb 1:1 root rate fast ceil 1Mbit\n").unwrap_err();
        assert!(e.to_string().contains("fast"), "{e}");
    }
}
