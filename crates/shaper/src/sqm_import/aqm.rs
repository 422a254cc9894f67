//! fq_codel under HTB (simple.qos, simplest.qos, simplest_tbf.qos): the tiers, and each
//! direction's `limit`, `target` and `ecn` as functions.sh makes them (`get_limit`: ilimit/elimit,
//! else LIMIT, 1001; `get_target`: empty or `auto` is sqm's rule for slow links, `default` fq_codel's
//! own, `5ms` that target with fq_codel's interval; `get_ecn`: ECN or NOECN).

use super::ctx::Ctx;
use super::dir::DirWords;
use super::model::{ImportError, Key, NoteKind, Script};
use crate::model::Direction;
use crate::options::tc_units;
use unbloat_units::Time;

pub fn fq_tiers(
    cx: &mut Ctx,
    script: Script,
    squash_dscp: bool,
    squash_ingress: bool,
    e_on: bool,
    i_on: bool,
) -> Option<u8> {
    if script != Script::Simple {
        for key in [Key::SquashDscp, Key::SquashIngress, Key::IptMask] {
            cx.note_if_set(
                key,
                NoteKind::Ignored,
                format!("{} does not look at DSCP", script.name()),
            );
        }
        return None;
    }
    let down = if squash_ingress { 1 } else { 3 };
    let tiers = if e_on { 3 } else { down };
    if e_on && i_on && down == 1 {
        cx.note(Key::SquashIngress, NoteKind::NotMapped, "simple.qos sorts the upload into three tiers and ignores DSCP on the download (squash_ingress 1, its default); unbloat's tiers apply to both directions, so tiers = 3 sorts the download by DSCP too");
    } else {
        cx.note_if_set(
            Key::SquashIngress,
            NoteKind::Mapped,
            format!("tiers = {tiers}"),
        );
    }
    cx.note(
        Key::SquashDscp,
        if squash_dscp { NoteKind::NotMapped } else { NoteKind::Mapped },
        if squash_dscp {
            "simple.qos clears DSCP on the download with an iptables rule (its default); unbloat's HTB + fq_codel has no wash (cake's has: qdisc = \"cake\", extra-ingress = \"wash\")"
        } else {
            "DSCP marks kept on the download, as unbloat's HTB does"
        },
    );
    cx.note_if_set(
        Key::IptMask,
        NoteKind::NotMapped,
        "unbloat sorts by DSCP with u32 filters, without firewall marks",
    );
    (tiers == 3).then_some(3)
}

/// limit, target and ECN of one direction's fq_codel (simple.qos, simplest.qos, simplest_tbf).
pub fn aqm(cx: &mut Ctx, d: &mut DirWords, dir: Direction) -> Result<(), ImportError> {
    let (lk, tk, ek, ecn_key) = match dir {
        Direction::Egress => (Key::Elimit, Key::Etarget, Key::EgressEcn, "ecn-egress"),
        Direction::Ingress => (Key::Ilimit, Key::Itarget, Key::IngressEcn, "ecn-ingress"),
    };
    let (key, v) = match (cx.plain(lk)?, cx.plain(Key::Limit)?) {
        (Some(v), _) => (lk, Some(v)),
        (None, Some(g)) if g != "1001" => (Key::Limit, Some(g)),
        _ => (lk, None),
    };
    if let Some(v) = v {
        let n: u32 = v
            .parse()
            .map_err(|_| cx.bad(key, "not a whole number of packets"))?;
        d.opts.limit = Some(n);
        d.source("limit", cx.source(key, ""));
        cx.note(key, NoteKind::Mapped, format!("limit = {n}"));
    }
    if let Some(v) = cx.plain(tk)? {
        let fq_default = (Time::from_millis(5), Time::from_millis(100));
        let (set, kind, text) = match sqm_target(v) {
            Target::Auto => (None, NoteKind::Default, "sqm-scripts' automatic target (max(5 ms, 13992000 us / kbit/s), interval 95 ms + target); unbloat's automatic one: max(5 ms, 1.5 full frames at the rate), interval 100 ms + (target - 5 ms)".to_string()),
            Target::Value(t) => (Some((t, fq_default.1)), NoteKind::Mapped, format!("target = \"{t}\", and interval = \"100ms\": sqm-scripts leaves fq_codel's interval, where unbloat would lengthen it with the target")),
            Target::QdiscDefault { understood: true } => (Some(fq_default), NoteKind::Mapped, "fq_codel's own: target = \"5ms\", interval = \"100ms\"".to_string()),
            Target::QdiscDefault { understood: false } => (Some(fq_default), NoteKind::Warning, "not a target sqm-scripts understands (it warns and leaves fq_codel's own): target = \"5ms\", interval = \"100ms\"".to_string()),
        };
        if let Some((t, iv)) = set {
            d.opts.target = Some(t);
            d.opts.interval = Some(iv);
            d.source("target", cx.source(tk, ""));
            d.source("interval", cx.source(tk, ""));
        }
        cx.note(tk, kind, text);
    }
    match cx.value(ek).map(str::to_ascii_lowercase).as_deref() {
        None => {}
        Some("ecn") => cx.note(ek, NoteKind::Default, match dir {
            Direction::Egress => "sqm-scripts' default, ECN on; unbloat's: on from 4 Mbit/s, off on a slower upload (where a dropped packet frees the link and a marked one does not)",
            Direction::Ingress => "sqm-scripts' default, ECN on; unbloat's default is on too",
        }),
        Some("noecn") => {
            match dir {
                Direction::Egress => d.opts.ecn_egress = Some(false),
                Direction::Ingress => d.opts.ecn_ingress = Some(false),
            }
            d.source(ecn_key, cx.source(ek, ""));
            cx.note(ek, NoteKind::Mapped, format!("{ecn_key} = false"));
        }
        Some(_) => cx.note(ek, NoteKind::Warning, "neither ECN nor NOECN: sqm-scripts hands it to tc, which refuses it, so that direction was not shaped; left at unbloat's default"),
    }
    Ok(())
}

/// sqm's `get_target`: what an itarget/etarget value makes fq_codel's target and interval.
pub enum Target {
    /// Empty or `auto`: sqm's own rule for slow links.
    Auto,
    /// A target, with fq_codel's interval (100ms) left as it is.
    Value(Time),
    /// `default`, or a value sqm-scripts does not understand: fq_codel's own 5ms / 100ms.
    QdiscDefault { understood: bool },
}

pub fn sqm_target(v: &str) -> Target {
    let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
    let unit: String = {
        let tail: Vec<char> = v
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        tail.into_iter().rev().collect()
    };
    match unit.as_str() {
        "auto" | "Auto" | "AUTO" => return Target::Auto,
        "default" | "Default" | "DEFAULT" => return Target::QdiscDefault { understood: true },
        _ => {}
    }
    if digits.is_empty() && unit.is_empty() {
        return Target::Auto;
    }
    let valid = matches!(
        unit.as_str(),
        "s" | "sec" | "secs" | "ms" | "msec" | "msecs" | "us" | "usec" | "usecs"
    );
    match (digits.is_empty(), valid) {
        (false, true) => tc_units::tc_time(&format!("{digits}{unit}"))
            .map(Target::Value)
            .unwrap_or(Target::QdiscDefault { understood: false }),
        _ => Target::QdiscDefault { understood: false },
    }
}
