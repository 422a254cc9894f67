//! Results files with the qdiscs of real captures (`fixtures/tc/`, `tc -j -s -d qdisc show` in a
//! Linux 6.1 kernel): they load as typed records and write back byte for byte, and a results file
//! written before the records were typed still loads.

use std::path::{Path, PathBuf};

use unbloat_report::{synthetic, EgressQdiscs, Results};
use unbloat_shaper::tcjson::QdiscStats;
use unbloat_units::{Rate, Time};

fn captures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tc")
}

fn capture(name: &str) -> String {
    let path = captures().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A results file as unbloat 0.1.0 wrote it (version 1, `Metadata::qdiscs` a raw JSON value,
/// commit d423661): synthetic samples, and the qdiscs of `fixtures/tc/htb3-fqcodel.qdisc.json`.
const OLD: &str = include_str!("fixtures/results-v1-htb3-fqcodel.json");

#[test]
fn a_results_file_written_before_the_qdiscs_were_typed_loads_and_writes_back_the_same() {
    let results = Results::from_json(OLD).expect("an old results file loads");
    let q = &results.metadata.qdiscs;
    let kinds: Vec<_> = q
        .records()
        .iter()
        .map(|r| {
            (
                r.kind.as_str(),
                r.handle.to_string(),
                r.parent.map(|p| p.to_string()),
            )
        })
        .collect();
    let s = |t: &str| t.to_string();
    assert_eq!(
        kinds,
        [
            ("htb", s("1:"), None),
            ("fq_codel", s("120:"), Some(s("1:12"))),
            ("fq_codel", s("130:"), Some(s("1:13"))),
            ("fq_codel", s("110:"), Some(s("1:11"))),
        ]
    );
    let root = q.root().expect("a root qdisc");
    assert_eq!(root.kind, "htb");
    assert_eq!(
        root.stats,
        Some(QdiscStats {
            bytes: 9_036_232,
            packets: 9009,
            drops: 94,
            overlimits: 1586,
            requeues: 0,
            backlog: 0,
            qlen: 0,
        })
    );
    // fq_codel's 5ms and 100ms as the kernel holds them (units of 1024 ns).
    let (fq, _) = q.records()[1].fq_codel().expect("fq_codel");
    assert_eq!(
        (fq.limit, fq.target, fq.interval, fq.ecn),
        (
            1001,
            Time::from_micros(4999),
            Time::from_micros(99999),
            false
        )
    );
    assert_eq!(results.to_json_pretty().expect("write"), OLD);
}

#[test]
fn results_with_each_captured_qdisc_list_round_trip_word_for_word() {
    let mut names: Vec<String> = std::fs::read_dir(captures())
        .expect("fixtures/tc")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".qdisc") && n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(names.len() >= 25, "{names:?}");
    for name in names {
        let tc: serde_json::Value = serde_json::from_str(&capture(&name)).expect("JSON");
        let mut results = synthetic::ping(1);
        results.metadata.qdiscs =
            EgressQdiscs::from_tc_json(tc.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let n = tc.as_array().map_or(0, Vec::len);
        assert_eq!(results.metadata.qdiscs.records().len(), n, "{name}");
        let text = results.to_json_pretty().expect("write");
        // What the file holds is what tc printed.
        let written: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(written["metadata"]["qdiscs"], tc, "{name}");
        let back = Results::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back, results, "{name}");
        assert_eq!(back.to_json_pretty().expect("write"), text, "{name}");
    }
}

#[test]
fn a_captured_cake_reads_its_rate_in_bits_and_its_tins_stay_in_the_file() {
    let q = EgressQdiscs::from_tc_output(capture("cake-diffserv3.qdisc.json").as_bytes())
        .expect("cake");
    let root = q.root().expect("root");
    assert_eq!((root.kind.as_str(), root.parent), ("cake", None));
    let (cake, _) = root.cake().expect("cake's options");
    assert_eq!(cake.bandwidth, Some(Rate::from_mbit(50)));
    assert_eq!(cake.diffserv.keyword(), "diffserv3");
    assert_eq!((cake.rtt, cake.overhead), (Time::from_millis(100), 0));
    assert_eq!(root.stats.map(|c| c.drops), Some(69));
    // Read (the tins' statistics), and in what is written (and what flent's metadata carries).
    assert_eq!(q.tc_json()[0]["tins"].as_array().map(Vec::len), Some(3));
    let q = EgressQdiscs::from_tc_output(capture("cake-raw.qdisc-nostats.json").as_bytes())
        .expect("cake without -s");
    assert_eq!(q.root().map(|r| r.stats), Some(None));
}

/// flent's metadata carries the system's context: the qdiscs go there as tc printed them,
/// counters and cake's tins included, as they did when they were a raw JSON value.
#[cfg(feature = "plots")]
#[test]
fn flent_metadata_carries_the_captured_qdiscs_whole() {
    use unbloat_report::flent::{flent_json, FlentTest};
    let tc: serde_json::Value =
        serde_json::from_str(&capture("cake-diffserv3.qdisc.json")).expect("JSON");
    let mut results = synthetic::rrul(1);
    results.metadata.qdiscs = EgressQdiscs::from_tc_json(tc.clone()).expect("cake");
    let doc = flent_json(&results, FlentTest::Rrul, "rrul.flent.gz");
    assert_eq!(doc["metadata"]["UNBLOAT_QDISCS"], tc);
    let old = Results::from_json(OLD).expect("old");
    let doc = flent_json(&old, FlentTest::Rrul, "rrul.flent.gz");
    let raw: serde_json::Value = serde_json::from_str(OLD).expect("JSON");
    assert_eq!(doc["metadata"]["UNBLOAT_QDISCS"], raw["metadata"]["qdiscs"]);
}
