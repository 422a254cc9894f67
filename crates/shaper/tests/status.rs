//! `status` on captured tc output (tests/fixtures/, see its README): the text shows the right
//! numbers in human units, the JSON has the fields with base-unit integers, and the three
//! ownership cases read plainly.

use std::path::Path;
use unbloat_shaper::plan::Plan;
use unbloat_shaper::status::{render_text, Ownership, Shaper, Status};
use unbloat_shaper::tcjson::{IfbTexts, LiveState, LiveTexts};
use unbloat_units::IfName;

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn name(s: &str) -> IfName {
    s.parse().unwrap()
}

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
            filter: fixture(&format!("{scenario}.ifb.filter-root.json")),
        }),
    };
    LiveState::parse(&name("wanx"), &t).unwrap()
}

/// Any plan will do to mark the device as unbloat's: status only asks whether there is one.
fn some_plan() -> Plan {
    Plan {
        wan: name("wanx"),
        egress: None,
        ingress: None,
        classify: None,
    }
}

/// The cells of the text row whose label is `label` (labels are one or two words).
fn row(text: &str, label: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(label) && l.starts_with("  "))
        .unwrap_or_else(|| panic!("no row {label:?} in\n{text}"));
    line.trim_start()[label.len()..]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn cake_per_tin_in_text() {
    let s = Status::from_live(&live("cake-vdsl2"), Some(&some_plan()));
    assert_eq!(s.ownership, Ownership::Unbloat);
    assert_eq!(
        s.summary,
        "wanx: shaped by unbloat: upload 19.95 Mbit/s (cake 8001: on wanx), download 78 Mbit/s (cake 8002: on ifb4wanx)"
    );
    let text = render_text(&s);
    assert!(
        text.contains("egress (upload) on wanx: cake 8001:"),
        "{text}"
    );
    assert!(
        text.contains("ingress (download) on ifb4wanx: cake 8002:"),
        "{text}"
    );
    assert!(
        text.contains("link layer: overhead 26 bytes, mpu 72, ptm"),
        "{text}"
    );
    assert!(text.contains(
        "shaped at 19.95 Mbit/s, rtt 100 ms, diffserv4, dual-srchost, nat, ack-filter enabled"
    ));
    assert!(
        text.contains("sent 557.7 KiB (696 packets), dropped 4"),
        "{text}"
    );
    // The egress tins come first; the ingress side has one tin, so `row` finds egress rows.
    assert_eq!(
        row(&text, "thresh"),
        [
            "1.247 Mbit/s",
            "19.95 Mbit/s",
            "9.975 Mbit/s",
            "4.987 Mbit/s"
        ]
    );
    assert_eq!(row(&text, "target"), ["14.57 ms", "5 ms", "5 ms", "5 ms"]);
    assert_eq!(
        row(&text, "peak delay"),
        ["56.13 ms", "18.57 ms", "0 us", "55.02 ms"]
    );
    assert_eq!(row(&text, "packets"), ["175", "356", "0", "169"]);
    assert_eq!(row(&text, "drops"), ["1", "1", "0", "2"]);
    assert_eq!(row(&text, "sparse flows"), ["1", "0", "0", "1"]);
    let header = text
        .lines()
        .find(|l| l.contains("Best Effort") && l.contains("Voice"))
        .unwrap();
    assert_eq!(
        header
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>(),
        ["Bulk", "Best Effort", "Video", "Voice"]
    );
}

#[test]
fn cake_in_json() {
    let s = Status::from_live(&live("cake-vdsl2"), Some(&some_plan()));
    let j = serde_json::to_value(&s).unwrap();
    assert_eq!(j["ownership"], "unbloat");
    let e = &j["egress"]["shaper"];
    assert_eq!(e["kind"], "cake");
    assert_eq!(e["bandwidth_bps"], 19_950_000);
    assert_eq!(
        (e["overhead"].as_i64(), e["mpu"].as_u64()),
        (Some(26), Some(72))
    );
    assert_eq!(
        (e["framing"].as_str(), e["diffserv"].as_str()),
        (Some("ptm"), Some("diffserv4"))
    );
    assert_eq!(
        (e["isolation"].as_str(), e["ack_filter"].as_str()),
        (Some("dual-srchost"), Some("enabled"))
    );
    assert_eq!(e["tins"][0]["name"], "Bulk");
    assert_eq!(e["tins"][0]["threshold_bps"], 155_859 * 8);
    assert_eq!(e["tins"][0]["target_us"], 14_570);
    assert_eq!(e["tins"][3]["drops"], 2);
    let i = &j["ingress"]["shaper"];
    assert_eq!(
        (i["ingress_mode"].as_bool(), i["wash"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(i["tins"][0]["name"], "Best Effort");
    assert_eq!(j["ingress"]["drops"], 5);
}

#[test]
fn htb_and_fq_codel_per_class() {
    let s = Status::from_live(&live("htb3"), Some(&some_plan()));
    let text = render_text(&s);
    let c13 = row(&text, "1:13");
    assert_eq!(
        c13[..4],
        ["1:1", "1.247 Mbit/s", "19.95 Mbit/s", "229.4 KiB"]
    );
    // packets, drops, overlimits, leaf, leaf drops, ECN marks, new flows
    assert_eq!(
        c13[4..],
        ["160", "0", "158", "fq_codel 130:", "0", "0", "1"]
    );
    assert_eq!(
        row(&text, "1:1 ")[..3],
        ["root", "19.95 Mbit/s", "19.95 Mbit/s"]
    );
    assert!(
        text.contains("link layer (stab): linklayer ethernet overhead 26 mpu 72"),
        "{text}"
    );
    assert!(
        text.contains("link layer (stab): linklayer atm overhead 44 mpu 0"),
        "{text}"
    );
    let j = serde_json::to_value(&s).unwrap();
    let classes = &j["egress"]["shaper"]["classes"];
    assert_eq!(classes.as_array().unwrap().len(), 4);
    assert_eq!(classes[0]["classid"], "1:1");
    assert_eq!(classes[2]["leaf"]["new_flows"], 3);
    assert_eq!(classes[2]["leaf"]["backlog_bytes"], 45_508);
    let Some(ingress) = &s.ingress else {
        panic!("no ingress side")
    };
    let Shaper::Htb(h) = &ingress.shaper else {
        panic!("not htb")
    };
    assert_eq!(h.classes[1].leaf.as_ref().unwrap().drops, 1);
    assert_eq!(h.default_class.as_deref(), Some("1:10"));
}

#[test]
fn shaped_by_something_else() {
    let s = Status::from_live(&live("htb3"), None);
    assert_eq!(s.ownership, Ownership::Other);
    assert_eq!(
        s.summary,
        "wanx: shaped by something other than unbloat (root qdisc htb 1:, not created by unbloat)"
    );
    // Still shown, so the user sees what is there.
    assert!(render_text(&s).contains("egress (upload) on wanx: htb 1:"));
}

#[test]
fn not_shaped() {
    let t = LiveTexts {
        qdisc: fixture("unshaped.wan.qdisc.json"),
        ..LiveTexts::default()
    };
    let s = Status::from_live(&LiveState::parse(&name("wanx"), &t).unwrap(), None);
    assert_eq!(s.ownership, Ownership::NotShaped);
    assert_eq!(render_text(&s), "wanx: not shaped (root qdisc noqueue)\n");
    let j = serde_json::to_value(&s).unwrap();
    assert_eq!(j["ownership"], "not-shaped");
    assert!(j["egress"].is_null() && j["ingress"].is_null());
}
