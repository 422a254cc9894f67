//! Every declared option (`crates/shaper/src/options/table.rs`), walked the whole way in a kernel
//! that has the qdiscs: its flag and its config key say the same thing (the same plan), the plan
//! differs from the same setup without it, `start` applies it and the kernel reads back what was
//! planned (start verifies every parameter and exits 0 only when they agree), and
//! `status --json`, read from the kernel, differs from the setup without it. An option added to
//! the declarations but forgotten by the flags, the config, the plan, the read-back or status
//! fails here, named.

mod common;

use common::{text, Netns};
use serde_json::Value;
use unbloat_shaper::options::{Cli, Opt, Qdisc, ShapeOptions, OPTIONS};
use unbloat_testbed::real_kernel_test;

/// The setup an option is tried against, as config lines: rates, and the strategy that takes
/// it. cake's options get diffserv4's tins (fwmark picks among tins; diffserv's own example is
/// diffserv8).
fn base(opt: &Opt) -> Vec<(&'static str, String)> {
    // i-mean-it confirms a rate that could cut the user off: its setup has one, and is refused
    // without it.
    let up = if opt.key == "i-mean-it" {
        "20kbit"
    } else {
        "10mbit"
    };
    let mut lines = vec![
        ("down", "\"20mbit\"".to_string()),
        ("up", format!("\"{up}\"")),
    ];
    match opt.qdisc {
        Some(Qdisc::Cake) => lines.push(("diffserv", "\"diffserv4\"".into())),
        Some(Qdisc::FqCodel) => lines.push(("qdisc", "\"fq_codel\"".into())),
        None => {}
    }
    lines
}

/// The lines with the option's example in place of its own line, or after them; the example
/// written by its own type.
fn with(opt: &Opt, mut lines: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    let mut o = ShapeOptions::default();
    opt.field
        .set(&mut o, opt.example)
        .unwrap_or_else(|e| panic!("{}: the example {:?}: {e}", opt.key, opt.example));
    let value = opt.field.toml(&o).expect("set");
    lines.retain(|(k, _)| *k != opt.key);
    lines.push((opt.key, value));
    lines
}

fn table(lines: &[(&str, String)]) -> String {
    let body: String = lines.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
    format!("[interface.eth0]\n{body}")
}

/// The option's example as flags, or None for a key of the config file only.
fn flags(opt: &Opt) -> Option<Vec<String>> {
    let ex = opt.example;
    Some(match opt.cli {
        Cli::None => return None,
        Cli::Value(_) | Cli::Repeated(_) => vec![format!("--{}", opt.key), ex.into()],
        Cli::Named(flag, _) => vec![format!("--{flag}"), ex.into()],
        Cli::Optional(..) => vec![format!("--{}={ex}", opt.key)],
        Cli::Switch => {
            assert_eq!(ex, "true", "{}: a switch's example is true", opt.key);
            vec![format!("--{}", opt.key)]
        }
        Cli::Pair(off, _) => vec![format!("--{}", if ex == "true" { opt.key } else { off })],
        Cli::Off(off) => {
            assert_eq!(ex, "false", "{}: an off switch's example is false", opt.key);
            vec![format!("--{off}")]
        }
    })
}

/// `status --json` without what a moment changes (counters, the tins' statistics, memory in
/// use, the handles the kernel picks): what the kernel holds of the setup.
fn settings(mut v: Value) -> Value {
    const COUNTERS: &[&str] = &[
        "sent_bytes",
        "sent_packets",
        "drops",
        "overlimits",
        "backlog_bytes",
        "ecn_marks",
        "new_flows",
        "memory_used_bytes",
        "tins",
        "packets",
        "bytes",
    ];
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|k, _| !COUNTERS.contains(&k.as_str()));
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            // Handles the kernel picks itself (`cake 8001:`) differ from one start to the next.
            Value::String(t) => {
                *t = t
                    .split(' ')
                    .map(|w| match w.strip_suffix(':') {
                        Some(h) if h.len() == 4 && h.starts_with('8') => "8xxx:",
                        _ => w,
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// What `text` in `ns` plans (`plan --json`), with the extra flags; None when refused.
fn plan(ns: &Netns, config: &str, extra: &[String]) -> Option<String> {
    let mut args = vec!["plan", "eth0", "--config", config, "--json"];
    args.extend(extra.iter().map(String::as_str));
    let out = ns.unbloat(&args);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Start `config` on eth0 (verified against the kernel), read `status --json`, stop: the
/// settings the kernel held, or None when the setup is refused.
fn applied(ns: &Netns, what: &str, config: &str) -> Option<Value> {
    let before = ns.snapshot();
    let start = ns.unbloat(&["start", "eth0", "--config", config]);
    if start.status.code() == Some(2) {
        return None;
    }
    assert!(
        start.status.success() && text(&start).contains("verified"),
        "{what}: start failed, or the kernel did not hold the plan:\n{}",
        text(&start)
    );
    let status = ns.unbloat(&["status", "eth0", "--json"]);
    let v: Value = serde_json::from_slice(&status.stdout)
        .unwrap_or_else(|e| panic!("{what}: status --json ({e}): {}", text(&status)));
    assert_eq!(v[0]["ownership"], "unbloat", "{what}: {v}");
    let stop = ns.unbloat(&["stop", "eth0"]);
    assert!(stop.status.success(), "{what}: stop: {}", text(&stop));
    assert_eq!(ns.snapshot(), before, "{what}: stop left something behind");
    Some(settings(v))
}

/// Each option `pick` selects, walked from flag and key through the plan, the kernel and status.
fn walk(pick: fn(&Opt) -> bool) {
    let ns = Netns::new();
    std::fs::create_dir_all(&ns.run_dir).unwrap();
    // The status of each setup without an option, once per setup.
    let mut bases: std::collections::HashMap<String, Option<Value>> = Default::default();
    for opt in OPTIONS.iter().filter(|o| pick(o)) {
        let key = opt.key;
        let write = |name: &str, lines: &[(&str, String)]| {
            let p = ns.run_dir.join(format!("{key}-{name}.toml"));
            std::fs::write(&p, table(lines)).unwrap();
            p.to_str().unwrap().to_string()
        };
        let base_file = write("base", &base(opt));
        let with_lines = with(opt, base(opt));
        let with_file = write("with", &with_lines);

        // The config key is a real key, and changes the plan.
        let by_file = plan(&ns, &with_file, &[]);
        let without = plan(&ns, &base_file, &[]);
        assert!(by_file.is_some(), "{key}: {:?} is refused", with_lines);
        assert_ne!(
            by_file, without,
            "{key}: the plan is the same with and without it"
        );
        // The flag says the same as the key.
        if let Some(f) = flags(opt) {
            assert_eq!(
                plan(&ns, &base_file, &f),
                by_file,
                "{key}: {f:?} plans otherwise than the key"
            );
        }
        // The kernel holds it, and status shows it.
        let with = applied(&ns, key, &with_file);
        let base_status = bases
            .entry(table(&base(opt)))
            .or_insert_with(|| applied(&ns, &format!("{key} (without)"), &base_file))
            .clone();
        assert!(with.is_some(), "{key}: start refused it");
        assert_ne!(with, base_status, "{key}: status shows nothing of it");
    }
}

/// cake's options and the link layer's: the half of the walk [`the_rest`] does not take.
fn cake_and_link(o: &Opt) -> bool {
    o.qdisc == Some(Qdisc::Cake) || ["link", "overhead", "mpu", "framing", "vlan"].contains(&o.key)
}

fn the_rest(o: &Opt) -> bool {
    !cake_and_link(o)
}

real_kernel_test! {
    /// Issue 51: one declaration per option, and nothing that lists options may miss one. In two
    /// halves, which `make test`'s two threads for this binary walk side by side.
    fn every_cake_and_link_option_goes_from_flag_and_file_through_the_kernel_to_status() needs ["cake", "fq_codel", "htb", "ingress", "mirred"] {
        assert!(OPTIONS.len() >= 30, "{} options", OPTIONS.len());
        walk(cake_and_link);
    }

    fn every_other_declared_option_goes_from_flag_and_file_through_the_kernel_to_status() needs ["cake", "fq_codel", "htb", "ingress", "mirred"] {
        assert!(OPTIONS.iter().filter(|o| the_rest(o)).count() >= 15);
        walk(the_rest);
    }
}
