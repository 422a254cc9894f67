//! The metrics text on real tc output (the shaper crate's fixtures, captured from Linux 6.1, see
//! crates/shaper/tests/fixtures/README.md): the numbers seen in the fixtures come out in base
//! units, every family is written once and in one piece, and promtool accepts the text and the
//! shipped alert rules.
//!
//! promtool is Debian's `prometheus` package (scripts/install-deps installs it); these tests
//! fail, not skip, without it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use unbloat_daemon::metrics::{render, DaemonCounters, Sample};
use unbloat_shaper::options::{Qdisc, ShapeOptions};
use unbloat_shaper::plan::Plan;
use unbloat_shaper::spec::Spec;
use unbloat_shaper::tcjson::{IfbTexts, LiveState, LiveTexts};
use unbloat_units::{IfName, Rate};

const PROMTOOL: &str = "/usr/bin/promtool";

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shaper/tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn optional_fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shaper/tests/fixtures")
        .join(name);
    std::fs::read_to_string(p).unwrap_or_default()
}

fn name(s: &str) -> IfName {
    s.parse().unwrap()
}

/// A scenario with a WAN and an IFB, as the shaper's status tests read it.
fn live(scenario: &str) -> LiveState {
    let t = LiveTexts {
        qdisc: fixture(&format!("{scenario}.wan.qdisc.json")),
        class: fixture(&format!("{scenario}.wan.class.txt")),
        filter: fixture(&format!("{scenario}.wan.filter-root.json")),
        filter_ingress: fixture(&format!("{scenario}.wan.filter-ingress.json")),
        ifb: Some(IfbTexts {
            name: name("ifb4wanx"),
            qdisc: fixture(&format!("{scenario}.ifb.qdisc.json")),
            class: fixture(&format!("{scenario}.ifb.class.txt")),
            // host-htb has no IFB filters captured: none, as tc's empty output means.
            filter: optional_fixture(&format!("{scenario}.ifb.filter-root.json")),
        }),
    };
    LiveState::parse(&name("wanx"), &t).unwrap()
}

/// A one-device capture (`cake-variant.*`, `unshaped.*`): its qdiscs only.
fn live_qdiscs_only(file: &str) -> LiveState {
    let t = LiveTexts {
        qdisc: fixture(file),
        ..LiveTexts::default()
    };
    LiveState::parse(&name("wanx"), &t).unwrap()
}

/// unbloat's plan for wanx (IFB ifb4wanx) with `qdisc` both ways.
fn plan(qdisc: Qdisc) -> Plan {
    let opts = ShapeOptions {
        up: Some(Rate::from_kbit(19_950)),
        down: Some(Rate::from_kbit(78_000)),
        qdisc: Some(qdisc),
        ..ShapeOptions::default()
    };
    let spec = Spec::new(name("wanx"), &opts).unwrap();
    assert_eq!(spec.ifb, name("ifb4wanx"), "the fixtures' IFB");
    Plan::build(&spec)
}

fn sample(live: LiveState, plan: Option<Plan>) -> Sample {
    Sample {
        iface: "wanx".to_string(),
        live,
        plan,
    }
}

fn daemon() -> DaemonCounters {
    let mut d = DaemonCounters {
        link_events: 4,
        reloads: 2,
        reload_failures: 1,
        last_apply_unix: Some(1_790_000_100),
        start_unix: 1_790_000_000,
        ..DaemonCounters::default()
    };
    d.reapplies.insert("wanx".to_string(), 3);
    d
}

/// The value of the sample written exactly `series` (name and labels), failing if absent.
fn value<'a>(text: &'a str, series: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
}

/// Every family has one HELP and one TYPE, before its samples, and its samples are together.
fn assert_families_whole(text: &str) {
    let mut done: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    let seen = |family: &str, done: &mut Vec<String>| {
        assert!(
            !done.iter().any(|f| f == family),
            "{family} appears again after another family:\n{text}"
        );
        done.push(family.to_string());
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let family = rest.split(' ').next().unwrap().to_string();
            seen(&family, &mut done);
            current = Some(family);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let family = rest.split(' ').next().unwrap();
            assert_eq!(Some(family), current.as_deref(), "TYPE right after HELP");
        } else {
            let series_name = line.split(['{', ' ']).next().unwrap();
            assert_eq!(
                Some(series_name),
                current.as_deref(),
                "sample outside its family: {line}\n{text}"
            );
        }
    }
    for f in &done {
        assert_eq!(text.matches(&format!("# HELP {f} ")).count(), 1, "{f}");
        assert_eq!(text.matches(&format!("# TYPE {f} ")).count(), 1, "{f}");
    }
}

/// Runs promtool; a missing promtool is a failure with the way to install it.
fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    assert!(
        Path::new(PROMTOOL).exists(),
        "{PROMTOOL} is missing: run scripts/install-deps (it installs Debian's prometheus package)"
    );
    let mut child = Command::new(PROMTOOL)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {PROMTOOL}: {e}"));
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `promtool check metrics` prints nothing for text it finds no problem in; any line it prints
/// names a problem (a lint like "counter metrics should have _total suffix" included).
fn assert_promtool_accepts(what: &str, text: &str) {
    let (ok, out) = promtool(&["check", "metrics"], Some(text));
    assert!(
        ok && out.trim().is_empty(),
        "promtool on {what}:\n{out}\n--- text:\n{text}"
    );
}

#[test]
fn cake_both_ways_in_base_units() {
    let text = render(
        &[sample(live("cake-vdsl2"), Some(plan(Qdisc::Cake)))],
        &daemon(),
    );
    let up = r#"iface="wanx",direction="up""#;
    let down = r#"iface="wanx",direction="down""#;
    assert_eq!(value(&text, &format!("unbloat_shaped{{{up}}}")), "1");
    assert_eq!(value(&text, &format!("unbloat_shaped{{{down}}}")), "1");
    // bandwidth 19950kbit is 2493750 bytes/s; the IFB's 78mbit is 9750000.
    let rate = "unbloat_shaper_rate_bytes_per_second";
    assert_eq!(
        value(&text, &format!("{rate}{{{up},qdisc=\"cake\"}}")),
        "2493750"
    );
    assert_eq!(
        value(&text, &format!("{rate}{{{down},qdisc=\"cake\"}}")),
        "9750000"
    );
    // The root's totals: Sent 571120 bytes 696 pkt (dropped 4, overlimits 1282).
    let q = format!("{{{up},qdisc=\"cake\"}}");
    assert_eq!(
        value(&text, &format!("unbloat_qdisc_sent_bytes_total{q}")),
        "571120"
    );
    assert_eq!(value(&text, &format!("unbloat_qdisc_drops_total{q}")), "4");
    assert_eq!(
        value(&text, &format!("unbloat_qdisc_overlimits_total{q}")),
        "1282"
    );
    // diffserv4's tins in tc's order; bulk: av_delay 21073 us, thresh 155859 bytes/s.
    let tin = |t: &str| format!("{{{up},tin=\"{t}\"}}");
    let avg = "unbloat_cake_tin_average_delay_seconds";
    assert_eq!(value(&text, &format!("{avg}{}", tin("bulk"))), "0.021073");
    assert_eq!(
        value(
            &text,
            &format!("unbloat_cake_tin_peak_delay_seconds{}", tin("bulk"))
        ),
        "0.056127"
    );
    assert_eq!(
        value(
            &text,
            &format!("unbloat_cake_tin_target_seconds{}", tin("bulk"))
        ),
        "0.01457"
    );
    let thresh = "unbloat_cake_tin_threshold_rate_bytes_per_second";
    assert_eq!(value(&text, &format!("{thresh}{}", tin("bulk"))), "155859");
    assert_eq!(
        value(
            &text,
            &format!("unbloat_cake_tin_drops_total{}", tin("voice"))
        ),
        "2"
    );
    assert_eq!(
        value(
            &text,
            &format!("unbloat_cake_tin_way_misses_total{}", tin("voice"))
        ),
        "3"
    );
    assert_eq!(
        value(
            &text,
            &format!("unbloat_cake_tin_bulk_flows{}", tin("best_effort"))
        ),
        "1"
    );
    assert_eq!(
        value(
            &text,
            &format!("unbloat_cake_tin_sent_packets_total{}", tin("video"))
        ),
        "0"
    );
    // besteffort on the IFB: one tin.
    let be = format!("{{{down},tin=\"best_effort\"}}");
    assert_eq!(
        value(&text, &format!("unbloat_cake_tin_drops_total{be}")),
        "5"
    );
    assert_eq!(value(&text, &format!("{avg}{be}")), "0.012721");
    assert_eq!(
        value(&text, &format!("unbloat_cake_tin_base_delay_seconds{be}")),
        "0.002131"
    );
    assert!(!text.contains(r#"direction="down",tin="bulk""#), "{text}");
    assert_eq!(
        value(&text, &format!("unbloat_cake_memory_limit_bytes{{{up}}}")),
        "4194304"
    );
    // The daemon's counters.
    assert_eq!(
        value(&text, r#"unbloat_daemon_reapplies_total{iface="wanx"}"#),
        "3"
    );
    assert_eq!(
        value(
            &text,
            r#"unbloat_daemon_apply_failures_total{iface="wanx"}"#
        ),
        "0"
    );
    assert_eq!(value(&text, "unbloat_daemon_reload_failures_total"), "1");
    assert_eq!(
        value(&text, "unbloat_daemon_last_apply_time_seconds"),
        "1790000100"
    );
    assert!(
        !text.contains("unbloat_htb") && !text.contains("unbloat_fq_codel"),
        "{text}"
    );
    assert_families_whole(&text);
}

#[test]
fn htb_classes_and_fq_codel_leaves() {
    let text = render(
        &[sample(live("htb3"), Some(plan(Qdisc::FqCodel)))],
        &daemon(),
    );
    let up = r#"iface="wanx",direction="up""#;
    assert_eq!(value(&text, &format!("unbloat_shaped{{{up}}}")), "1");
    // The root class 1:1's ceil, 19950Kbit.
    let rate = "unbloat_shaper_rate_bytes_per_second";
    assert_eq!(
        value(&text, &format!("{rate}{{{up},qdisc=\"htb\"}}")),
        "2493750"
    );
    let class = |c: &str| format!("{{{up},class=\"{c}\"}}");
    // class htb 1:11 ... rate 6650Kbit ceil 19950Kbit; Sent 252496 bytes 172 pkt (overlimits 156)
    // lended: 70 borrowed: 102.
    let c11 = class("1:11");
    assert_eq!(
        value(&text, &format!("unbloat_htb_class_sent_bytes_total{c11}")),
        "252496"
    );
    assert_eq!(
        value(&text, &format!("unbloat_htb_class_overlimits_total{c11}")),
        "156"
    );
    assert_eq!(
        value(
            &text,
            &format!("unbloat_htb_class_rate_bytes_per_second{c11}")
        ),
        "831250"
    );
    assert_eq!(
        value(
            &text,
            &format!("unbloat_htb_class_ceil_bytes_per_second{c11}")
        ),
        "2493750"
    );
    assert_eq!(
        value(&text, &format!("unbloat_htb_class_borrowed_total{c11}")),
        "102"
    );
    // fq_codel 120: under 1:12: drops 1, backlog 45508b 31p, new_flow_count 3, old list 1.
    let c12 = class("1:12");
    assert_eq!(
        value(&text, &format!("unbloat_fq_codel_drops_total{c12}")),
        "1"
    );
    assert_eq!(
        value(&text, &format!("unbloat_fq_codel_backlog_bytes{c12}")),
        "45508"
    );
    assert_eq!(
        value(&text, &format!("unbloat_fq_codel_backlog_packets{c12}")),
        "31"
    );
    assert_eq!(
        value(&text, &format!("unbloat_fq_codel_new_flows_total{c12}")),
        "3"
    );
    assert_eq!(
        value(&text, &format!("unbloat_fq_codel_flows_old{c12}")),
        "1"
    );
    assert_eq!(
        value(&text, &format!("unbloat_fq_codel_max_packet_bytes{c12}")),
        "1468"
    );
    // The root class first, then by id; the fq_codels by handle.
    let classes: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("unbloat_htb_class_sent_bytes_total{") && l.contains(up))
        .collect();
    assert!(
        classes[0].contains("\"1:1\"") && classes[1].contains("\"1:11\""),
        "{classes:?}"
    );
    assert!(!text.contains("unbloat_cake"), "{text}");
    assert_families_whole(&text);
}

#[test]
fn shaped_is_zero_when_the_kind_differs_or_the_ifb_is_gone() {
    // The plan says cake; the kernel has HTB.
    let text = render(&[sample(live("htb3"), Some(plan(Qdisc::Cake)))], &daemon());
    assert_eq!(
        value(&text, r#"unbloat_shaped{iface="wanx",direction="up"}"#),
        "0"
    );
    assert_eq!(
        value(&text, r#"unbloat_shaped{iface="wanx",direction="down"}"#),
        "0"
    );
    // The IFB is gone (its counters go with it); the upload is still in place.
    let mut l = live("cake-vdsl2");
    l.ifb = None;
    let text = render(&[sample(l, Some(plan(Qdisc::Cake)))], &daemon());
    assert_eq!(
        value(&text, r#"unbloat_shaped{iface="wanx",direction="up"}"#),
        "1"
    );
    assert_eq!(
        value(&text, r#"unbloat_shaped{iface="wanx",direction="down"}"#),
        "0"
    );
    assert!(!text.contains(r#"direction="down",tin"#), "{text}");
    // The redirect is gone: nothing reaches the IFB.
    let mut l = live("cake-vdsl2");
    l.ingress_filters.clear();
    let text = render(&[sample(l, Some(plan(Qdisc::Cake)))], &daemon());
    assert_eq!(
        value(&text, r#"unbloat_shaped{iface="wanx",direction="down"}"#),
        "0"
    );
    // Nothing but the kernel's default: no totals, and 0 without a plan.
    let text = render(
        &[sample(live_qdiscs_only("unshaped.wan.qdisc.json"), None)],
        &daemon(),
    );
    assert_eq!(
        value(&text, r#"unbloat_shaped{iface="wanx",direction="up"}"#),
        "0"
    );
    assert!(!text.contains("unbloat_qdisc_"), "{text}");
}

#[test]
fn two_interfaces_keep_each_family_in_one_piece() {
    let mut second = sample(live("htb3"), Some(plan(Qdisc::FqCodel)));
    second.iface = "wan2".to_string();
    let samples = [sample(live("cake-vdsl2"), Some(plan(Qdisc::Cake))), second];
    let text = render(&samples, &daemon());
    assert_families_whole(&text);
    let block: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("unbloat_shaped{"))
        .collect();
    assert_eq!(block.len(), 4, "{block:?}");
    assert_eq!(
        value(&text, r#"unbloat_daemon_reapplies_total{iface="wan2"}"#),
        "0"
    );
    assert_promtool_accepts("two interfaces", &text);
}

#[test]
fn label_values_are_escaped() {
    let mut s = sample(live("cake-vdsl2"), Some(plan(Qdisc::Cake)));
    s.iface = "we\"ird\\name\nx".to_string();
    let text = render(&[s], &DaemonCounters::default());
    let want = r#"unbloat_shaped{iface="we\"ird\\name\nx",direction="up"} 1"#;
    assert!(text.lines().any(|l| l == want), "{want} in\n{text}");
    assert_families_whole(&text);
    assert_promtool_accepts("escaped labels", &text);
}

#[test]
fn promtool_accepts_every_fixture() {
    let mut cases: Vec<(String, Sample)> = Vec::new();
    for (scenario, qdisc) in [
        ("cake-vdsl2", Qdisc::Cake),
        ("htb3", Qdisc::FqCodel),
        ("host-htb", Qdisc::FqCodel),
        ("htb-mpu0", Qdisc::FqCodel),
        ("htb-raw", Qdisc::FqCodel),
    ] {
        cases.push((scenario.into(), sample(live(scenario), Some(plan(qdisc)))));
        cases.push((
            format!("{scenario} without a plan"),
            sample(live(scenario), None),
        ));
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shaper/tests/fixtures");
    let mut singles: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| {
            n.starts_with("cake-")
                && n.ends_with(".qdisc.json")
                && !n.contains(".wan.")
                && !n.contains(".ifb.")
        })
        .collect();
    singles.sort();
    assert!(singles.len() >= 8, "the cake variants: {singles:?}");
    singles.push("unshaped.wan.qdisc.json".into());
    for f in singles {
        cases.push((f.clone(), sample(live_qdiscs_only(&f), None)));
    }
    for (what, s) in cases {
        let text = render(&[s], &daemon());
        assert_families_whole(&text);
        assert_promtool_accepts(&what, &text);
    }
}

#[test]
fn nothing_accumulates_between_renders() {
    let samples = [sample(live("cake-vdsl2"), Some(plan(Qdisc::Cake)))];
    let first = render(&samples, &daemon());
    for _ in 0..10_000 {
        assert_eq!(render(&samples, &daemon()).len(), first.len());
    }
}

/// The shipped alert rules are valid, and their unit tests (when each alert fires and with what
/// text) pass.
#[test]
fn promtool_accepts_the_alert_rules_and_their_tests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/prometheus");
    let rules = dir.join("unbloat-alerts.yml");
    let rules = rules.to_str().unwrap();
    let (ok, out) = promtool(&["check", "rules", rules], None);
    assert!(
        ok && out.contains("SUCCESS"),
        "promtool check rules {rules}:\n{out}"
    );
    assert!(!out.contains("WARNING") && !out.contains("FAILED"), "{out}");
    let tests = dir.join("unbloat-alerts.test.yml");
    let tests = tests.to_str().unwrap();
    let (ok, out) = promtool(&["test", "rules", tests], None);
    assert!(
        ok && out.contains("SUCCESS"),
        "promtool test rules {tests}:\n{out}"
    );
}

/// The Grafana dashboard is JSON with the datasource as an input, and it and the alert rules
/// name only metrics the daemon writes (a renamed metric would leave an empty panel behind).
#[test]
fn packaged_dashboard_and_alerts_use_only_written_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging");
    let dashboard = std::fs::read_to_string(root.join("grafana/unbloat-dashboard.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&dashboard).expect("the dashboard is JSON");
    assert_eq!(json["__inputs"][0]["name"], "DS_PROMETHEUS");
    assert_eq!(json["templating"]["list"][0]["name"], "iface");
    let alerts = std::fs::read_to_string(root.join("prometheus/unbloat-alerts.yml")).unwrap();
    let mut second = sample(live("htb3"), Some(plan(Qdisc::FqCodel)));
    second.iface = "wan2".to_string();
    let samples = [sample(live("cake-vdsl2"), Some(plan(Qdisc::Cake))), second];
    let text = render(&samples, &daemon());
    for source in [&dashboard, &alerts] {
        for name in metric_names(source) {
            let written = format!("# TYPE {name} ");
            assert!(text.contains(&written), "{name} is not written:\n{text}");
        }
    }
}

/// Every `unbloat_...` word in `text`.
fn metric_names(text: &str) -> Vec<&str> {
    let mut names: Vec<&str> = text
        .match_indices("unbloat_")
        .map(|(i, _)| {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    names.sort();
    names.dedup();
    assert!(!names.is_empty(), "no metric names");
    names
}
