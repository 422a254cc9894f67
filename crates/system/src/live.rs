//! What the kernel holds for a WAN device and its IFB, read with as few processes as tc allows,
//! and which of unbloat's pieces are still there as unbloat left them.
//!
//! One `tc -j -s -d -batch -` reads the qdiscs and filters of both devices (each command prints
//! one JSON array). Classes are read apart, one `tc -j -s -d class show` per device, and only
//! when HTB is involved: iproute2 6.1's `class show` ignores `-j` inside a batch and prints text.
//! In User-Mode Linux every process costs 50-100 ms, which is why this matters.

use crate::runner::{Cmd, RunError, Runner};
use unbloat_shaper::plan::{Plan, RootQdisc};
use unbloat_shaper::tcjson::{IfbTexts, LiveState, LiveTexts};
use unbloat_shaper::verify::verify;
use unbloat_units::IfName;

/// Reads `wan` and, when it exists (`ifb` names it), its IFB. `classes`: read HTB classes too.
pub fn read(
    runner: &dyn Runner,
    wan: &IfName,
    ifb: Option<&IfName>,
    classes: bool,
) -> Result<LiveTexts, RunError> {
    // One tc process for everything (a process costs far more than the reads, most of all in
    // User-Mode Linux, and the daemon's metrics read this every scrape): per device its qdiscs,
    // filters and, when asked, classes.
    let device = |dev: &IfName, ingress: bool| {
        let mut lines = vec![
            format!("qdisc show dev {dev}"),
            format!("filter show dev {dev}"),
        ];
        if ingress {
            lines.push(format!("filter show dev {dev} ingress"));
        }
        if classes {
            lines.push(format!("class show dev {dev}"));
        }
        lines
    };
    let mut batch = device(wan, true);
    if let Some(ifb) = ifb {
        batch.extend(device(ifb, false));
    }
    let out =
        runner.run(&Cmd::tc(["-j", "-s", "-d", "-batch", "-"]).stdin(batch.join("\n") + "\n"))?;
    let mut arrays: Vec<String> = serde_json::Deserializer::from_str(&out.stdout)
        .into_iter::<serde_json::Value>()
        .map_while(Result::ok)
        .map(|v| v.to_string())
        .collect();
    if arrays.len() != batch.len() {
        // A device went away under us, or a tc that prints otherwise: one command each, where a
        // failure reads as "nothing there".
        arrays = batch
            .iter()
            .map(|line| one(runner, line))
            .collect::<Result<_, _>>()?;
    }
    let mut it = arrays.into_iter();
    let mut next = || it.next().unwrap_or_default();
    let (qdisc, filter, filter_ingress) = (next(), next(), next());
    let class = if classes { next() } else { String::new() };
    let ifb = ifb.map(|name| IfbTexts {
        name: name.clone(),
        qdisc: next(),
        filter: next(),
        class: if classes { next() } else { String::new() },
    });
    Ok(LiveTexts {
        qdisc,
        class,
        filter,
        filter_ingress,
        ifb,
    })
}

fn one(runner: &dyn Runner, line: &str) -> Result<String, RunError> {
    let out = runner.run(&Cmd::tc(["-j", "-s", "-d"]).args(line.split(' ')))?;
    // A device without classes or filters makes tc fail or print nothing: both "none".
    Ok(if out.success() {
        out.stdout
    } else {
        String::new()
    })
}

/// Whether a plan has HTB anywhere (then classes must be read to verify it).
pub fn has_htb(plan: &Plan) -> bool {
    roots(plan).any(|r| matches!(r, RootQdisc::Htb(_)))
}

/// The root qdiscs a plan puts in place: the WAN device's (upload), the IFB's (download).
pub fn roots(plan: &Plan) -> impl Iterator<Item = &RootQdisc> {
    plan.egress
        .iter()
        .map(|e| &e.root)
        .chain(plan.ingress.iter().map(|i| &i.shaping.root))
}

/// One of unbloat's pieces on a device, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Exactly as the plan says.
    Ours,
    /// Nothing of it is there (the kernel's default root; no ingress qdisc and no IFB).
    Gone,
    /// Something else is in its place; the text says what differs.
    Foreign(String),
}

/// The egress and ingress pieces of `plan` as `live` holds them (None: the plan has no such
/// piece).
pub fn pieces(plan: &Plan, live: &LiveState) -> (Option<Found>, Option<Found>) {
    let egress = plan.egress.as_ref().map(|e| {
        let only = Plan {
            wan: plan.wan.clone(),
            egress: Some(e.clone()),
            ingress: None,
        };
        let m = verify(&only, live);
        if rate_moved_only(&m) {
            Found::Ours
        } else if !live.wan.is_shaped() {
            Found::Gone
        } else {
            Found::Foreign(join(&m))
        }
    });
    let ingress = plan.ingress.as_ref().map(|i| {
        let only = Plan {
            wan: plan.wan.clone(),
            egress: None,
            ingress: Some(i.clone()),
        };
        let m = verify(&only, live);
        if rate_moved_only(&m) {
            Found::Ours
        } else if live.wan.ingress().is_none() {
            // The redirect is gone with the ingress qdisc; an IFB left behind is unbloat's
            // (the record names it) and is cleaned up by the caller.
            Found::Gone
        } else {
            Found::Foreign(join(&m))
        }
    });
    (egress, ingress)
}

/// Nothing differs, or only cake's rate: a cake whose every other setting is unbloat's is still
/// unbloat's, its rate moved by `unbloat autorate` a step ahead of the record (a crash between
/// the two; see [`crate::apply::RateSession`]) or by another controller a user runs on it
/// (cake-autorate changes only the bandwidth).
fn rate_moved_only(m: &[unbloat_shaper::verify::Mismatch]) -> bool {
    m.iter().all(|m| m.what == "bandwidth")
}

fn join(m: &[unbloat_shaper::verify::Mismatch]) -> String {
    m.iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}
