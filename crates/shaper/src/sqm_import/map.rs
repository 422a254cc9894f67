//! One sqm queue -> what unbloat shapes for it ([`MappedQueue`]), every option it sets noted.
//!
//! The queue-level options are read as sqm-scripts reads them: `enabled` (run-openwrt.sh starts
//! a UCI section only when `[ "$enabled" -eq 1 ]`; start-sqm skips a shell file only when
//! `[ "${ENABLED:-1}" -ne 1 ]`), `interface`, `script`, `qdisc` (defaults.sh: fq_codel; the cake
//! recipes set `QDISC=cake` themselves) and the rates; [`super::recipe`] does the rest.

use super::aqm;
use super::ctx::Ctx;
use super::dir::DirWords;
use super::model::{ImportError, Key, Note, NoteKind, Script, SqmQueue};
use super::recipe::{self, Mapped};
use crate::model::Direction;
use crate::options::Qdisc;
use crate::spec::parse_iface;
use unbloat_units::IfName;

/// One queue, mapped.
#[derive(Debug, Clone)]
pub struct MappedQueue {
    pub iface: IfName,
    pub script: Script,
    pub mapped: Mapped,
    pub notes: Vec<Note>,
}

/// Whether sqm-scripts would start this queue, and what to say about it.
pub fn enabled(q: &SqmQueue) -> (bool, Option<String>) {
    let v = q.get(Key::Enabled).map(|s| s.value.trim());
    let n = v.and_then(|v| v.parse::<i64>().ok());
    match (q.format, v, n) {
        (super::model::Format::Uci, None, _) => (
            false,
            Some("no `enabled` option: run.sh starts only sections with enabled 1".into()),
        ),
        (super::model::Format::Uci, Some(_), Some(1)) => (true, None),
        (super::model::Format::Uci, Some(_), _) => (false, None),
        (super::model::Format::Shell, None, _) | (super::model::Format::Shell, _, Some(1)) => {
            (true, None)
        }
        (super::model::Format::Shell, Some(_), Some(_)) => (false, None),
        (super::model::Format::Shell, Some(_), None) => (
            true,
            Some("not a number, so start-sqm's test `-ne 1` fails and the queue starts".into()),
        ),
    }
}

pub fn queue(q: &SqmQueue, path: &str, on: bool) -> Result<MappedQueue, ImportError> {
    let mut cx = Ctx::new(q, path);
    let (_, why) = enabled(q);
    match (on, why) {
        (true, Some(w)) => cx.note(Key::Enabled, NoteKind::Warning, w),
        (true, None) => cx.note_if_set(Key::Enabled, NoteKind::Mapped, "started"),
        (false, w) => cx.note(
            Key::Enabled,
            NoteKind::Warning,
            w.unwrap_or_else(|| "disabled: sqm-scripts does not start it".into())
                + "; imported commented out, uncomment the table to shape it",
        ),
    }
    let iface = interface(&mut cx)?;
    let script = script(&mut cx)?;
    let qdisc = qdisc(&mut cx, script);
    let up = recipe::rate(&mut cx, Key::Upload, 2302)?;
    let down = recipe::rate(&mut cx, Key::Download, 14698)?;
    let flag = |key| {
        cx.value(key)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(1)
            == 1
    };
    let (squash_dscp, squash_ingress) = (flag(Key::SquashDscp), flag(Key::SquashIngress));
    let link = recipe::link(&mut cx, qdisc)?;
    let mut e = DirWords {
        link,
        ..DirWords::default()
    };
    let mut i = e.clone();
    e.opts.up = Some(up);
    i.opts.down = Some(down);
    e.source(
        "up",
        cx.source(Key::Upload, "2302, sqm-scripts' built-in default"),
    );
    i.source(
        "down",
        cx.source(Key::Download, "14698, sqm-scripts' built-in default"),
    );
    if link.touched {
        for d in [&mut e, &mut i] {
            d.source("overhead", cx.source(Key::Overhead, "0"));
            d.source("mpu", cx.source(Key::TcMpu, "0"));
            d.source("framing", cx.source(Key::Linklayer, ""));
            if link.raw {
                d.source("link", "sqm-scripts' size table (Linux's length)".into());
            }
        }
    }
    let (e_on, i_on) = (!up.is_zero(), !down.is_zero());
    let mut tiers = None;
    match qdisc {
        Qdisc::Cake => {
            let (ew, iw) = recipe::cake_recipe(&mut cx, script, squash_dscp, squash_ingress);
            if e_on {
                recipe::apply_words(
                    &mut cx,
                    &mut e,
                    &ew,
                    Key::EqdiscOpts,
                    qdisc,
                    Direction::Egress,
                )?;
            }
            if i_on {
                recipe::apply_words(
                    &mut cx,
                    &mut i,
                    &iw,
                    Key::IqdiscOpts,
                    qdisc,
                    Direction::Ingress,
                )?;
            }
            for key in [
                Key::Ilimit,
                Key::Elimit,
                Key::Itarget,
                Key::Etarget,
                Key::Limit,
            ] {
                cx.note_if_set(
                    key,
                    NoteKind::Ignored,
                    "sqm-scripts' cake recipes do not use it",
                );
            }
            for key in [Key::IngressEcn, Key::EgressEcn] {
                cx.note_if_set(
                    key,
                    NoteKind::Ignored,
                    "sqm-scripts' cake recipes do not use it: cake marks ECN-capable flows always",
                );
            }
        }
        Qdisc::FqCodel => {
            tiers = aqm::fq_tiers(&mut cx, script, squash_dscp, squash_ingress, e_on, i_on);
            cx.note_queue(
                NoteKind::Default,
                "fq_codel tuning left at sqm-scripts' defaults (limit 1001, its automatic target, \
                 ECN on both ways, quantum 300 on the upload) gets unbloat's: limit 1001 up to \
                 ~120 Mbit/s then 100 ms worth of frames, target max(5 ms, 1.5 full frames at \
                 the rate), ECN off on an upload under 4 Mbit/s, quantum 300 under 100 Mbit/s",
            );
            if e_on {
                aqm::aqm(&mut cx, &mut e, Direction::Egress)?;
                recipe::apply_words(
                    &mut cx,
                    &mut e,
                    &[],
                    Key::EqdiscOpts,
                    qdisc,
                    Direction::Egress,
                )?;
            }
            if i_on {
                aqm::aqm(&mut cx, &mut i, Direction::Ingress)?;
                recipe::apply_words(
                    &mut cx,
                    &mut i,
                    &[],
                    Key::IqdiscOpts,
                    qdisc,
                    Direction::Ingress,
                )?;
            }
        }
    }
    for (on, keys, what) in [
        (
            e_on,
            [Key::EqdiscOpts, Key::Elimit, Key::Etarget, Key::EgressEcn],
            "upload",
        ),
        (
            i_on,
            [Key::IqdiscOpts, Key::Ilimit, Key::Itarget, Key::IngressEcn],
            "download",
        ),
    ] {
        if !on {
            for key in keys {
                cx.note_if_set(
                    key,
                    NoteKind::Ignored,
                    format!("the {what} is not shaped (its rate is 0)"),
                );
            }
        }
    }
    other_options(&mut cx, script, qdisc);
    cx.note_the_rest();
    let mut sources = vec![("qdisc", cx.source(Key::Script, ""))];
    if tiers.is_some() {
        sources.push(("tiers", script.name().to_string()));
    }
    Ok(MappedQueue {
        iface,
        script,
        mapped: Mapped {
            qdisc,
            tiers,
            egress: e,
            ingress: i,
            sources,
        },
        notes: cx.notes,
    })
}

fn interface(cx: &mut Ctx) -> Result<IfName, ImportError> {
    let (text, key) = match (&cx.q.iface_flag, cx.plain(Key::Interface)?) {
        (Some(flag), _) => (flag.clone(), None),
        (None, Some(v)) => (v.to_string(), Some(Key::Interface)),
        (None, None) => match &cx.q.iface_from_name {
            Some(n) => (n.clone(), None),
            None => {
                return Err(cx.queue_error(match cx.q.format {
                    super::model::Format::Uci => "no interface: sqm-scripts cannot start it (start-sqm exits when IFACE is empty); add option interface 'eth1'",
                    super::model::Format::Shell => "no interface: name the file IFACE.iface.conf as sqm-scripts expects, set IFACE=, or give --iface",
                }))
            }
        },
    };
    let name = parse_iface(&text).map_err(|e| match key {
        Some(k) => cx.bad(k, e.to_string()),
        None => cx.queue_error(e.to_string()),
    })?;
    if key.is_some() {
        let table = super::render::toml_key(name.as_str());
        cx.note(
            Key::Interface,
            NoteKind::Mapped,
            format!("[interface.{table}]"),
        );
    } else {
        cx.note_if_set(
            Key::Interface,
            NoteKind::Ignored,
            "--iface names the interface",
        );
    }
    Ok(name)
}

fn script(cx: &mut Ctx) -> Result<Script, ImportError> {
    let Some(v) = cx.plain(Key::Script)? else {
        return Err(cx.queue_error(
            "no script: sqm-scripts refuses to start without one (\"SCRIPT value is not defined\"); add option script 'piece_of_cake.qos'",
        ));
    };
    let Some(s) = Script::ALL.into_iter().find(|s| s.name() == v) else {
        let names: Vec<&str> = Script::ALL.iter().map(|s| s.name()).collect();
        return Err(cx.bad(
            Key::Script,
            format!(
                "not one of sqm-scripts' recipes ({}): unbloat cannot tell what it shapes",
                names.join(", ")
            ),
        ));
    };
    let text = match s {
        Script::PieceOfCake => "cake with one tin both ways: qdisc = \"cake\", diffserv besteffort",
        Script::LayerCake => "cake with DSCP tins (diffserv3 unless the option strings say otherwise): qdisc = \"cake\"",
        Script::Simple => "HTB + fq_codel with three tiers on the upload: qdisc = \"fq_codel\", tiers = 3. unbloat sorts by DSCP with u32 filters (priority CS7, CS6, EF, VA; bulk CS1, LE) where simple.qos marks with iptables (priority CS6, EF, AF42, TOS minimize-delay; bulk CS1; ICMP to bulk), and guarantees priority 1/4 and bulk 1/16 of the rate where simple.qos gives priority 128 kbit capped at 1/3; burst and quantum are 1 ms at the rate in both",
        Script::Simplest => "HTB + fq_codel, one class each way: qdisc = \"fq_codel\"",
        Script::SimplestTbf => "TBF + fq_codel, one class each way: unbloat has no TBF and shapes with HTB at the same rate: qdisc = \"fq_codel\"",
    };
    let kind = match s {
        Script::SimplestTbf => NoteKind::NotMapped,
        _ => NoteKind::Mapped,
    };
    cx.note(Key::Script, kind, text);
    Ok(s)
}

fn qdisc(cx: &mut Ctx, script: Script) -> Qdisc {
    let set = cx.value(Key::Qdisc);
    let v = set.unwrap_or("fq_codel");
    if script.forces_cake() {
        if set.is_some_and(|v| v != "cake") {
            cx.note(
                Key::Qdisc,
                NoteKind::Ignored,
                format!("{} uses cake whatever qdisc says", script.name()),
            );
        } else {
            cx.note_if_set(Key::Qdisc, NoteKind::Mapped, "qdisc = \"cake\"");
        }
        return Qdisc::Cake;
    }
    if v.starts_with("cake") {
        if script == Script::SimplestTbf {
            cx.note(Key::Qdisc, NoteKind::Mapped, "simplest_tbf.qos falls back to fq_codel for cake (its own warning): qdisc = \"fq_codel\"");
            return Qdisc::FqCodel;
        }
        cx.note(
            Key::Qdisc,
            NoteKind::Mapped,
            format!(
                "{} with cake is cake alone, without the recipe's tiers: qdisc = \"cake\"",
                script.name()
            ),
        );
        return Qdisc::Cake;
    }
    if v.ends_with("fq_codel") {
        cx.note_if_set(
            Key::Qdisc,
            NoteKind::Mapped,
            "qdisc = \"fq_codel\" (HTB + fq_codel)",
        );
    } else {
        cx.note(Key::Qdisc, NoteKind::NotMapped, format!("unbloat's HTB leaves are fq_codel; a {v} leaf has no equivalent: fq_codel, with the limit, target and ECN options carried"));
    }
    Qdisc::FqCodel
}

/// The options that change nothing unbloat shapes: GUI switches, logging, sqm's HTB timing.
fn other_options(cx: &mut Ctx, script: Script, qdisc: Qdisc) {
    for key in [
        Key::QdiscAdvanced,
        Key::QdiscReallyAdvanced,
        Key::LinklayerAdvanced,
    ] {
        cx.note_if_set(key, NoteKind::Ignored, "a switch of LuCI's page only: run.sh reads the options under it whatever it says, and so does this import");
    }
    cx.note_if_set(Key::Target, NoteKind::Ignored, "run.sh exports it as TARGET, but no recipe uses it (itarget and etarget set fq_codel's target)");
    for key in [Key::DebugLogging, Key::Verbosity, Key::VerbosityMin] {
        cx.note_if_set(key, NoteKind::NotMapped, "sqm-scripts' logging; unbloat prints its errors and warnings on stderr and has no log level");
    }
    let htb = qdisc == Qdisc::FqCodel;
    for key in [
        Key::BurstDur,
        Key::IBurstDur,
        Key::EBurstDur,
        Key::QuantumDur,
        Key::IQuantumDur,
        Key::EQuantumDur,
    ] {
        if htb {
            cx.note_if_set(key, NoteKind::NotMapped, "unbloat sizes HTB's burst and quantum as 1 ms at the rate (sqm-scripts' default), at least one full frame; not configurable");
        } else {
            cx.note_if_set(
                key,
                NoteKind::Ignored,
                "sqm-scripts uses it only for HTB and TBF",
            );
        }
    }
    match cx.value(Key::Autoflow) {
        Some("1") if htb => cx.note(Key::Autoflow, NoteKind::NotMapped, "sqm-scripts then sizes fq_codel's flows by the rate of each class; unbloat keeps fq_codel's 1024 (flows = N to change it)"),
        Some(_) => cx.note(Key::Autoflow, NoteKind::Ignored, "fq_codel's 1024 flows, as unbloat's"),
        None => {}
    }
    if script.forces_cake() {
        cx.covered(Key::IptMask);
    }
    if !cx.is_noted(Key::Limit) {
        match cx.value(Key::Limit) {
            Some("1001") => cx.note(Key::Limit, NoteKind::Default, "sqm-scripts' default, 1001 packets: unbloat's limit is 1001 up to ~120 Mbit/s, then 100 ms worth of frames"),
            Some(_) => cx.note(Key::Limit, NoteKind::Ignored, "ILIMIT and ELIMIT, or a rate of 0, leave it unused"),
            None => {}
        }
    }
}
