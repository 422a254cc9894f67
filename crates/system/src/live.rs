//! What the kernel holds for a WAN device and its IFB, read with as few processes as tc allows,
//! and which of unbloat's pieces are still there as unbloat left them.
//!
//! One `tc -j -s -d -batch -` reads the qdiscs and filters of both devices (each command prints
//! one JSON array). Classes are read apart, one `tc -j -s -d class show` per device, and only
//! where an HTB qdisc holds them (the only classes unbloat reads): iproute2 6.1's `class show`
//! ignores `-j` inside a batch and prints text, or nothing for a device without classes, and in
//! the batch that broke its one-array-per-command reading, so every read fell back to a process
//! per command (9 for a status). In User-Mode Linux every process costs 50-100 ms, which is why
//! this matters.

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
    // One tc process for the qdiscs and filters (a process costs far more than the reads, most
    // of all in User-Mode Linux, and the daemon's metrics read this every scrape).
    let mut batch = vec![
        format!("qdisc show dev {wan}"),
        format!("filter show dev {wan}"),
        format!("filter show dev {wan} ingress"),
    ];
    if let Some(ifb) = ifb {
        batch.push(format!("qdisc show dev {ifb}"));
        batch.push(format!("filter show dev {ifb}"));
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
    let ifb_texts = ifb.map(|name| (name, next(), next()));
    let class_of = |dev: &IfName, qdisc: &str| -> Result<String, RunError> {
        if classes && holds_htb(qdisc) {
            one(runner, &format!("class show dev {dev}"))
        } else {
            Ok(String::new())
        }
    };
    let class = class_of(wan, &qdisc)?;
    let ifb = match ifb_texts {
        Some((name, qdisc, filter)) => Some(IfbTexts {
            name: name.clone(),
            class: class_of(name, &qdisc)?,
            qdisc,
            filter,
        }),
        None => None,
    };
    Ok(LiveTexts {
        qdisc,
        class,
        filter,
        filter_ingress,
        ifb,
    })
}

/// Whether a device's `tc -j qdisc show` lists an HTB qdisc (text that is not JSON: we cannot
/// tell, so yes).
fn holds_htb(qdisc_json: &str) -> bool {
    match serde_json::from_str::<Vec<serde_json::Value>>(qdisc_json) {
        Ok(qdiscs) => qdiscs.iter().any(|q| q["kind"] == "htb"),
        Err(_) => !qdisc_json.trim().is_empty(),
    }
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
            classify: None,
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
            classify: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::RecordingRunner;

    fn name(s: &str) -> IfName {
        s.parse().unwrap()
    }

    /// A runner whose batch read prints `qdisc_wan` and `qdisc_ifb` as the two devices' qdiscs
    /// and `[]` for every filter list, and `class show` prints `CLASSES dev`.
    fn kernel(qdisc_wan: &'static str, qdisc_ifb: &'static str) -> RecordingRunner {
        RecordingRunner::new()
            .stdout_when(
                |c| c.args.iter().any(|a| a == "-batch"),
                format!("{qdisc_wan}\n[]\n[]\n{qdisc_ifb}\n[]\n"),
            )
            .stdout_when(
                |c| c.args.iter().any(|a| a == "class"),
                "class htb 1:1 root rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b\n",
            )
    }

    /// Regression: `class show` in the batch printed text (or nothing), the batch never read as
    /// one array per command, and every read fell back to a process per command: 9 per status.
    #[test]
    fn cake_is_read_with_one_process_and_htb_classes_apart() {
        let cake = r#"[{"kind":"cake","handle":"8001:","root":true}]"#;
        let r = kernel(cake, cake);
        let texts = read(&r, &name("eth0"), Some(&name("ifb4eth0")), true).unwrap();
        assert_eq!(r.calls().len(), 1, "{:?}", r.lines());
        assert_eq!(
            texts.qdisc,
            serde_json::from_str::<serde_json::Value>(cake)
                .unwrap()
                .to_string()
        );
        assert_eq!(texts.class, "");
        assert_eq!(texts.ifb.as_ref().unwrap().filter, "[]");

        let htb = r#"[{"kind":"htb","handle":"1:","root":true}]"#;
        let r = kernel(htb, cake);
        let texts = read(&r, &name("eth0"), Some(&name("ifb4eth0")), true).unwrap();
        assert_eq!(
            r.lines()[1..],
            ["tc -j -s -d class show dev eth0".to_string()],
            "classes of the HTB device only"
        );
        assert!(texts.class.starts_with("class htb 1:1"), "{}", texts.class);
        assert_eq!(texts.ifb.unwrap().class, "");

        // Not asked for classes: none read, HTB or not.
        let r = kernel(htb, htb);
        read(&r, &name("eth0"), Some(&name("ifb4eth0")), false).unwrap();
        assert_eq!(r.calls().len(), 1);
    }

    /// A batch that prints fewer arrays than it has commands (a device gone under us): one
    /// process per command, and what failed reads as nothing there.
    #[test]
    fn a_short_batch_falls_back_to_one_command_each() {
        let r = RecordingRunner::new()
            .stdout_when(|c| c.args.iter().any(|a| a == "-batch"), "[]\n")
            .fail_when(
                |c| c.args.iter().any(|a| a == "ingress"),
                2,
                "Cannot find device",
            )
            .stdout_when(
                |c| c.args.iter().any(|a| a == "qdisc"),
                "[{\"kind\":\"htb\"}]",
            );
        let texts = read(&r, &name("eth0"), None, true).unwrap();
        assert_eq!(
            r.lines()[1..],
            [
                "tc -j -s -d qdisc show dev eth0",
                "tc -j -s -d filter show dev eth0",
                "tc -j -s -d filter show dev eth0 ingress",
                "tc -j -s -d class show dev eth0",
            ]
        );
        assert_eq!(texts.filter_ingress, "");
        assert!(texts.ifb.is_none());
    }
}
