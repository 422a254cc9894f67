use super::*;
use crate::synthetic;

fn names(doc: &Value) -> Vec<String> {
    let mut v: Vec<String> = doc["results"]
        .as_object()
        .expect("results")
        .keys()
        .cloned()
        .collect();
    v.sort();
    v
}

fn sorted(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn iso_times_match_known_dates() {
    assert_eq!(iso_utc(0.0), "1970-01-01T00:00:00.000000Z");
    assert_eq!(iso_utc(1_700_000_000.5), "2023-11-14T22:13:20.500000Z");
    assert_eq!(iso_utc(951_782_400.0), "2000-02-29T00:00:00.000000Z");
    assert_eq!(iso_utc(4_102_444_799.25), "2099-12-31T23:59:59.250000Z");
    assert_eq!(iso_utc(-1.0), "1969-12-31T23:59:59.000000Z");
}

#[test]
fn rrul_series_are_the_ones_rrul_conf_plots() {
    let doc = flent_json(&synthetic::rrul(1), FlentTest::Rrul, "x.flent.gz");
    assert_eq!(
        names(&doc),
        sorted(&[
            "TCP upload BE",
            "TCP upload BK",
            "TCP upload CS5",
            "TCP upload EF",
            "TCP upload sum",
            "TCP upload avg",
            "TCP download BE",
            "TCP download BK",
            "TCP download CS5",
            "TCP download EF",
            "TCP download sum",
            "TCP download avg",
            "TCP totals",
            "Ping (ms) UDP BE",
            "Ping (ms) UDP EF",
            "Ping (ms) UDP BK",
            "Ping (ms) ICMP",
            "Ping (ms) avg",
        ])
    );
    assert_eq!(doc["version"], json!(4));
    assert_eq!(doc["metadata"]["NAME"], json!("rrul"));
    assert_eq!(doc["metadata"]["HOST"], json!("192.0.2.1"));
    assert_eq!(doc["metadata"]["IP_VERSION"], json!(4));
    assert_eq!(doc["metadata"]["STEP_SIZE"], json!(0.2));
    assert_eq!(
        doc["metadata"]["TIME"],
        json!("2023-11-14T22:13:20.000000Z")
    );
}

#[test]
fn every_series_has_one_value_per_x() {
    let doc = flent_json(&synthetic::rrul(1), FlentTest::Rrul, "x.flent.gz");
    let n = doc["x_values"].as_array().expect("x").len();
    // 30 s at 0.2 s, both ends included.
    assert_eq!(n, 151);
    for (name, values) in doc["results"].as_object().expect("results") {
        assert_eq!(values.as_array().expect("array").len(), n, "{name}");
    }
    assert_eq!(doc["x_values"][3], json!(0.6));
}

#[test]
fn throughput_is_in_mbits_and_sums_add_up() {
    let r = synthetic::rrul(2);
    let doc = flent_json(&r, FlentTest::Rrul, "x.flent.gz");
    // The sample ending at t = 10.0 s is grid point 50.
    let bps: f64 = r
        .streams
        .iter()
        .filter(|s| s.direction == Direction::Up)
        .map(|s| {
            s.samples
                .iter()
                .find(|x| (x.t - 10.0).abs() < 1e-9)
                .expect("sample")
                .bps
        })
        .sum();
    let got = doc["results"]["TCP upload sum"][50]
        .as_f64()
        .expect("value");
    assert!((got - bps / 1e6).abs() < 1e-9, "{got} vs {bps}");
    let avg = doc["results"]["TCP upload avg"][50]
        .as_f64()
        .expect("value");
    assert!((avg - got / 4.0).abs() < 1e-9);
    assert_eq!(
        doc["metadata"]["SERIES_META"]["TCP upload BE"]["UNITS"],
        json!("Mbits/s")
    );
    assert_eq!(
        doc["metadata"]["SERIES_META"]["Ping (ms) ICMP"]["UNITS"],
        json!("ms")
    );
}

#[test]
fn lost_probes_are_gaps_in_raw_values() {
    let mut r = synthetic::ping(1);
    for s in &mut r.probes[0].samples {
        s.rtt_ms = None;
    }
    let doc = flent_json(&r, FlentTest::Ping, "x.flent.gz");
    assert_eq!(doc["raw_values"]["Ping (ms) UDP"], json!([]));
    assert!(doc["results"]["Ping (ms) UDP"]
        .as_array()
        .expect("a")
        .iter()
        .all(Value::is_null));
    assert!(
        doc["raw_values"]["Ping (ms) ICMP"]
            .as_array()
            .expect("a")
            .len()
            > 100
    );
}

#[test]
fn rrul_be_numbers_repeated_classes_like_rrul_be_conf() {
    let mut r = synthetic::rrul(1);
    for s in &mut r.streams {
        s.dscp = 0;
    }
    r.probes.retain(|p| p.kind == ProbeKind::Udp);
    for p in &mut r.probes {
        p.dscp = 0;
    }
    let doc = flent_json(&r, FlentTest::RrulBe, "x.flent.gz");
    let n = names(&doc);
    for want in [
        "TCP upload BE",
        "TCP upload BE2",
        "TCP upload BE4",
        "TCP download BE3",
        "Ping (ms) UDP BE1",
        "Ping (ms) UDP BE3",
    ] {
        assert!(n.contains(&want.to_string()), "{want} not in {n:?}");
    }
}

#[test]
fn tcp_nup_and_ndown_use_numbered_streams_and_test_parameters() {
    let doc = flent_json(&synthetic::tcp_nup(3, 1), FlentTest::TcpNup, "x.flent.gz");
    assert_eq!(
        names(&doc),
        sorted(&[
            "TCP upload::1",
            "TCP upload::2",
            "TCP upload::3",
            "TCP upload sum",
            "TCP upload avg",
            "Ping (ms) UDP BE",
            "Ping (ms) ICMP",
        ])
    );
    assert_eq!(
        doc["metadata"]["TEST_PARAMETERS"]["upload_streams"],
        json!("3")
    );
    let doc = flent_json(
        &synthetic::tcp_ndown(2, 1),
        FlentTest::TcpNdown,
        "x.flent.gz",
    );
    assert!(names(&doc).contains(&"TCP download::2".to_string()));
    assert_eq!(
        doc["metadata"]["TEST_PARAMETERS"]["download_streams"],
        json!("2")
    );
}

#[test]
fn profiles_map_to_flent_tests() {
    assert_eq!(FlentTest::for_profile("rrul"), Some(FlentTest::Rrul));
    assert_eq!(FlentTest::for_profile("rrul_be"), Some(FlentTest::RrulBe));
    assert_eq!(FlentTest::for_profile("tcp_nup"), Some(FlentTest::TcpNup));
    assert_eq!(FlentTest::for_profile("upload"), Some(FlentTest::TcpNup));
    assert_eq!(
        FlentTest::for_profile("tcp_ndown"),
        Some(FlentTest::TcpNdown)
    );
    assert_eq!(FlentTest::for_profile("ping"), Some(FlentTest::Ping));
    assert_eq!(FlentTest::for_profile("bidir"), None);
}

#[test]
fn hosts_lose_their_port() {
    assert_eq!(host_of("192.0.2.1:5201"), ("192.0.2.1".into(), 4));
    assert_eq!(host_of("example.net"), ("example.net".into(), 4));
    assert_eq!(host_of("[2001:db8::1]:5201"), ("2001:db8::1".into(), 6));
    assert_eq!(host_of("2001:db8::1"), ("2001:db8::1".into(), 6));
}

#[test]
fn align_interpolates_within_reach_and_leaves_gaps() {
    let x = [0.0, 0.2, 0.4, 0.6, 3.0];
    let got = align(&[(0.1, 10.0), (0.3, 20.0), (2.0, 0.0)], &x, 0.2);
    assert_eq!(got[0], Some(10.0)); // the first point is within half a step
    assert!((got[1].expect("interpolated") - 15.0).abs() < 1e-9);
    // 0.3 and 2.0 are 1.7 s apart, more than flent's reach of 5 steps: no value at 0.6.
    assert_eq!(got[3], None);
    assert_eq!(got[4], None);
}
