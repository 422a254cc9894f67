//! The text of `unbloat status`: the summary line, then per direction the shaper's settings and a
//! table in human units, columns aligned like `tc -s qdisc` but labelled in words.

use super::{CakeStatus, HtbStatus, Shaper, Side, Status};
pub use crate::human::{human_rate, human_size, human_time};
use std::fmt::Write;

/// The whole status as text.
pub fn render_text(s: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", s.summary);
    if let Some(f) = &s.fairness {
        let _ = writeln!(out, "fairness: {f}");
    }
    if let Some(rules) = &s.classify {
        // Each connection is counted once, at the packet that chose its tin; the tins' own
        // counters below show every packet.
        let _ = writeln!(out, "classify: connections each rule put in its tin");
        for r in rules {
            let _ = writeln!(out, "  {:>8}  {}", r.packets, r.rule);
        }
    }
    for side in [&s.egress, &s.ingress].into_iter().flatten() {
        out.push('\n');
        render_side(&mut out, side);
    }
    out
}

fn render_side(out: &mut String, s: &Side) {
    let _ = writeln!(out, "{} on {}: {}", s.direction, s.device, s.qdisc);
    let _ = writeln!(
        out,
        "  sent {} ({} packets), dropped {}, overlimits {}, backlog {}",
        human_size(s.sent_bytes),
        s.sent_packets,
        s.drops,
        s.overlimits,
        human_size(s.backlog_bytes)
    );
    match &s.shaper {
        Shaper::Cake(c) => render_cake(out, c),
        Shaper::Htb(h) => render_htb(out, h),
        Shaper::Other => {}
    }
}

fn render_cake(out: &mut String, c: &CakeStatus) {
    let rate = c.bandwidth_bps.map_or("unlimited".to_string(), human_rate);
    let mut shaping = vec![format!("shaped at {rate}")];
    shaping.extend(c.shaping_text.iter().cloned());
    let _ = writeln!(out, "  {}", shaping.join(", "));
    let _ = writeln!(out, "  link layer: {}", c.link_text.join(", "));
    if let (Some(used), Some(limit)) = (c.memory_used_bytes, c.memory_limit_bytes) {
        let _ = writeln!(
            out,
            "  memory: {} of {}",
            human_size(used),
            human_size(limit)
        );
    }
    if c.tins.is_empty() {
        return;
    }
    let mut rows: Vec<Vec<String>> = vec![std::iter::once(String::new())
        .chain(c.tins.iter().map(|t| t.name.clone()))
        .collect()];
    let mut row = |label: &str, f: &dyn Fn(&super::TinStatus) -> String| {
        rows.push(
            std::iter::once(label.to_string())
                .chain(c.tins.iter().map(f))
                .collect(),
        );
    };
    row("thresh", &|t| human_rate(t.threshold_bps));
    row("target", &|t| human_time(t.target_us));
    row("interval", &|t| human_time(t.interval_us));
    row("peak delay", &|t| human_time(t.peak_delay_us));
    row("avg delay", &|t| human_time(t.avg_delay_us));
    row("sparse delay", &|t| human_time(t.sparse_delay_us));
    row("backlog", &|t| human_size(t.backlog_bytes));
    row("packets", &|t| t.sent_packets.to_string());
    row("bytes", &|t| human_size(t.sent_bytes));
    row("drops", &|t| t.drops.to_string());
    row("ECN marks", &|t| t.ecn_marks.to_string());
    row("ACK drops", &|t| t.ack_drops.to_string());
    row("sparse flows", &|t| t.sparse_flows.to_string());
    row("bulk flows", &|t| t.bulk_flows.to_string());
    row("unresp. flows", &|t| t.unresponsive_flows.to_string());
    out.push('\n');
    table(out, &rows, 1);
}

fn render_htb(out: &mut String, h: &HtbStatus) {
    if let Some(stab) = &h.stab {
        let _ = writeln!(out, "  link layer (stab): {stab}");
    }
    if let Some(d) = &h.default_class {
        let _ = writeln!(out, "  unclassified traffic goes to {d}");
    }
    let mut rows = vec![[
        "class",
        "parent",
        "rate",
        "ceil",
        "sent",
        "packets",
        "drops",
        "overlimits",
        "leaf",
        "leaf drops",
        "ECN marks",
        "new flows",
    ]
    .map(str::to_string)
    .to_vec()];
    for c in &h.classes {
        let leaf = c.leaf.as_ref();
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        rows.push(vec![
            c.classid.clone(),
            c.parent.clone().unwrap_or_else(|| "root".to_string()),
            human_rate(c.rate_bps),
            human_rate(c.ceil_bps),
            human_size(c.sent_bytes),
            c.sent_packets.to_string(),
            c.drops.to_string(),
            c.overlimits.to_string(),
            leaf.map_or("-".to_string(), |l| l.qdisc.clone()),
            opt(leaf.map(|l| l.drops)),
            opt(leaf.and_then(|l| l.ecn_marks)),
            opt(leaf.and_then(|l| l.new_flows)),
        ]);
    }
    out.push('\n');
    table(out, &rows, 2);
    for (class, leaf) in h.classes.iter().filter_map(|c| Some((c, c.leaf.as_ref()?))) {
        if !leaf.text.is_empty() {
            let _ = writeln!(
                out,
                "  {} under {}: {}",
                leaf.qdisc,
                class.classid,
                leaf.text.join(", ")
            );
        }
    }
}

/// Writes rows with every column as wide as its widest cell: the first `left` columns aligned
/// left (labels), the rest right (numbers), two spaces apart, indented by two.
fn table(out: &mut String, rows: &[Vec<String>], left: usize) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            line.push_str("  ");
            if i < left {
                let _ = write!(line, "{cell:<w$}", w = width[i]);
            } else {
                let _ = write!(line, "{cell:>w$}", w = width[i]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_rate(19_950_000), "19.95 Mbit/s");
        assert_eq!(human_rate(78_000_000), "78 Mbit/s");
        assert_eq!(human_rate(1_246_872), "1.247 Mbit/s");
        assert_eq!(human_rate(640_000), "640 kbit/s");
        assert_eq!(human_rate(999), "999 bit/s");
        assert_eq!(human_time(14_570), "14.57 ms");
        assert_eq!(human_time(5_000), "5 ms");
        assert_eq!(human_time(850), "850 us");
        assert_eq!(human_time(1_200_000), "1.2 s");
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(214_272), "209.2 KiB");
        assert_eq!(human_size(4 << 20), "4 MiB");
    }

    #[test]
    fn columns_align() {
        let mut out = String::new();
        let rows = vec![
            vec![
                "".to_string(),
                "Bulk".to_string(),
                "Best Effort".to_string(),
            ],
            vec!["drops".to_string(), "1".to_string(), "12345".to_string()],
        ];
        table(&mut out, &rows, 1);
        assert_eq!(
            out,
            "         Bulk  Best Effort\n  drops     1        12345\n"
        );
    }
}
