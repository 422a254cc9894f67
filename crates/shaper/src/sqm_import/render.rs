//! The import as text: unbloat's TOML, each key with a comment naming the sqm options it came
//! from, disabled queues commented out; and the notes, one per line.
//!
//! What callers can rely on: [`ConfigFile`](crate::config::ConfigFile) reads the TOML back to
//! exactly [`Imported::options`] for every enabled interface (a test checks every golden case),
//! and a disabled table, uncommented, to its options too.

use super::model::{Import, Imported, NoteKind};
use crate::options::ShapeOptions;
use unbloat_units::Rate;

/// The keys in the order a table is written (the order of the shipped example's).
const ORDER: &[&str] = &[
    "down",
    "up",
    "qdisc",
    "tiers",
    "link",
    "overhead",
    "mpu",
    "framing",
    "vlan",
    "isolation",
    "nat",
    "diffserv",
    "wash",
    "ack-filter",
    "rtt",
    "ingress-keyword",
    "split-gso",
    "memlimit",
    "target",
    "interval",
    "quantum",
    "limit",
    "flows",
    "memory-limit",
    "ecn-egress",
    "ecn-ingress",
    "extra-egress",
    "extra-ingress",
    "i-mean-it",
];

/// The TOML for `import`, read from `source` (a path, for the header).
pub fn toml(import: &Import, source: &str) -> String {
    let mut out = format!(
        "# unbloat configuration imported from {} by `unbloat config import-sqm`.\n\
         # Each key's comment names the sqm options it came from; what did not carry over is in\n\
         # the notes the import printed. Check: unbloat config check FILE; see the commands:\n\
         # unbloat plan --config FILE\n",
        comment_text(source)
    );
    if import.interfaces.iter().all(|i| !i.enabled) {
        out.push_str("#\n# No queue is enabled in sqm: this file shapes nothing until a table is uncommented.\n");
    }
    for i in &import.interfaces {
        out.push('\n');
        out.push_str(&table(i));
    }
    out
}

/// One interface's table, commented out when the queue is disabled.
pub fn table(i: &Imported) -> String {
    let mut lines = vec![format!(
        "# {} (line {}): {}",
        comment_text(&i.queue),
        i.line,
        i.script.name()
    )];
    if !i.enabled {
        lines.push(format!(
            "# Disabled in sqm: uncomment the lines below to shape {}.",
            i.iface
        ));
    }
    let mut body = vec![format!("[interface.{}]", toml_key(i.iface.as_str()))];
    for (key, value) in values(&i.options) {
        let line = format!("{key} = {value}");
        match i.comments.iter().find(|(k, _)| k == key) {
            Some((_, c)) if !c.is_empty() => {
                body.push(format!("{line:<31} # {}", comment_text(c)));
            }
            _ => body.push(line),
        }
    }
    for b in body {
        lines.push(if i.enabled { b } else { format!("# {b}") });
    }
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// The notes for people: all but the mapped ones (the TOML's comments say those), one per line.
pub fn notes(import: &Import) -> String {
    import
        .notes
        .iter()
        .filter(|n| n.kind != NoteKind::Mapped)
        .map(|n| format!("{n}\n"))
        .collect()
}

/// (key, TOML value) for every option the table sets, in [`ORDER`].
pub fn values(o: &ShapeOptions) -> Vec<(&'static str, String)> {
    let s = |t: &str| toml_string(t);
    let b = |v: bool| v.to_string();
    let rate = |r: Rate| match r.bits_per_sec() {
        0 => "0".to_string(),
        bps if bps % 1000 == 0 => s(&format!("{}kbit", bps / 1000)),
        _ => s(&r.to_string()),
    };
    let mut out: Vec<(&'static str, String)> = Vec::new();
    let mut put = |k: &'static str, v: Option<String>| {
        if let Some(v) = v {
            out.push((k, v));
        }
    };
    put("down", o.down.map(rate));
    put("up", o.up.map(rate));
    put("qdisc", o.qdisc.map(|q| s(&q.to_string())));
    put("tiers", o.tiers.map(|t| t.to_string()));
    put("link", o.link.map(|l| s(l.name())));
    put("overhead", o.overhead.map(|v| v.to_string()));
    put("mpu", o.mpu.map(|v| v.to_string()));
    put("framing", o.framing.map(|f| s(&f.to_string())));
    put("vlan", o.vlan.map(|v| v.to_string()));
    put("isolation", o.isolation.map(|v| s(v.name())));
    put("nat", o.nat.map(b));
    put("diffserv", o.diffserv.map(|d| s(d.keyword())));
    put("wash", o.wash.map(b));
    put(
        "ack-filter",
        o.ack_filter.map(|a| match a {
            crate::model::AckFilter::Enabled => "true".to_string(),
            crate::model::AckFilter::Disabled => "false".to_string(),
            crate::model::AckFilter::Aggressive => s("aggressive"),
        }),
    );
    put("rtt", o.rtt.map(|t| s(&t.to_string())));
    put("ingress-keyword", o.ingress_keyword.map(b));
    put("split-gso", o.split_gso.map(b));
    put("memlimit", o.memlimit.map(|m| s(&m.to_string())));
    put("target", o.target.map(|t| s(&t.to_string())));
    put("interval", o.interval.map(|t| s(&t.to_string())));
    put("quantum", o.quantum.map(|v| v.to_string()));
    put("limit", o.limit.map(|v| v.to_string()));
    put("flows", o.flows.map(|v| v.to_string()));
    put("memory-limit", o.memory_limit.map(|m| s(&m.to_string())));
    put("ecn-egress", o.ecn_egress.map(b));
    put("ecn-ingress", o.ecn_ingress.map(b));
    put("extra-egress", o.extra_egress.as_deref().map(s));
    put("extra-ingress", o.extra_ingress.as_deref().map(s));
    put("i-mean-it", o.i_mean_it.map(b));
    out.sort_by_key(|(k, _)| ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()));
    out
}

/// A TOML basic string.
fn toml_string(t: &str) -> String {
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

/// A table name part: bare when TOML allows it, quoted otherwise (`"eth0.2"`).
pub fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        k.to_string()
    } else {
        toml_string(k)
    }
}

/// Text a comment can hold: one line, cut to a length a reader takes in.
fn comment_text(t: &str) -> String {
    let one: String = t
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one.char_indices().nth(400) {
        Some((cut, _)) => format!("{}…", &one[..cut]),
        None => one,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqm_render_quotes_what_toml_needs() {
        assert_eq!(toml_key("eth0"), "eth0");
        assert_eq!(toml_key("eth0.2"), "\"eth0.2\"");
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(comment_text("a\nb"), "a b");
    }
}
