//! Classification in a real kernel (issue 40): a rule's connection in its tin on the upload and,
//! restored from the connection by ctinfo, on the download, over a far end whose marks say
//! otherwise; bad rules refused with nothing changed; `stop` leaves no table, filter or qdisc.

mod common;

use common::{in_ns, text, Netns};
use std::net::UdpSocket;
use std::time::Duration;
use unbloat_system::real_kernel_test;

/// Packets each tin of the cake at `dev`'s root sent, by tin name (diffserv4: Bulk, Best Effort,
/// Video, Voice, in tc's order).
fn tin_packets(ns: &Netns, dev: &str) -> Vec<u64> {
    let out = ns.sh(&format!("tc -j -s qdisc show dev {dev} root"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("tc -j for {dev}: {e}: {}", text(&out)));
    let tins = v[0]["tins"]
        .as_array()
        .unwrap_or_else(|| panic!("no tins on {dev}: {v}"));
    tins.iter()
        .map(|t| t["sent_packets"].as_u64().unwrap_or(0))
        .collect()
}

const BULK: usize = 0;
const VIDEO: usize = 2;
const VOICE: usize = 3;

/// `n` echoes from wan0 to the far end's `port`, each answered; the far end marks its answers
/// CS1 (an ISP's mark, or a washed one: bulk to cake).
fn echoes(ns: &Netns, far: &str, port: u16, n: usize) {
    let far = far.to_string();
    let server = std::thread::spawn(move || {
        in_ns(&far, move || {
            let s = UdpSocket::bind(("10.9.0.2", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 200];
            for _ in 0..n {
                let (len, from) = s.recv_from(&mut buf).expect("an echo request");
                s.send_to(&buf[..len], from).unwrap();
            }
        })
    });
    std::thread::sleep(Duration::from_millis(300));
    in_ns(&ns.name, move || {
        let c = UdpSocket::bind("10.9.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 200];
        for _ in 0..n {
            c.send_to(&[7u8; 64], ("10.9.0.2", port)).unwrap();
            c.recv(&mut buf).expect("the echo");
        }
    });
    server.join().unwrap();
}

real_kernel_test! {
    fn a_rule_puts_its_connection_in_its_tin_both_ways_and_stop_removes_every_piece() needs ["cake", "ingress", "mirred"] {
        let ns = Netns::new();
        let far = ns.wan_to_far_end();
        // The far end marks everything it sends CS1: a mark a rule must win over.
        let wash = common::sh(&format!(
            "printf 'table inet isp {{\\n chain out {{\\n type filter hook output priority mangle;\\n ip dscp set cs1\\n }}\\n}}\\n' | ip netns exec {} nft -f -",
            far.0
        ));
        assert!(wash.status.success(), "{}", text(&wash));
        let before = ns.snapshot();

        // Bad rules: refused before anything changes, each naming what is wrong.
        for (rule, says) in [
            ("urgent udp port 3074", "neither a tin"),
            ("voice udp port 3079-3074", "runs backwards"),
            ("voice addr 10.9.0.0/8", "host bits set"),
            ("voice udp", "must name a port"),
        ] {
            let out = ns.unbloat(&["start", "wan0", "--down", "20mbit", "--up", "5mbit", "--classify", rule]);
            assert_eq!(out.status.code(), Some(2), "{rule}: {}", text(&out));
            assert!(text(&out).contains(says), "{rule}: {}", text(&out));
            assert_eq!(ns.snapshot(), before, "{rule}: a refused rule changed something");
        }
        let out = ns.unbloat(&[
            "start", "wan0", "--down", "20mbit", "--up", "5mbit", "--diffserv", "besteffort",
            "--classify", "gaming",
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("--diffserv besteffort"), "{}", text(&out));

        // The first rule that matches wins: port 3074 is voice, the rest to the far end video.
        let start = ns.unbloat(&[
            "start", "wan0", "--down", "20mbit", "--up", "5mbit",
            "--classify", "voice udp port 3074",
            "--classify", "video addr 10.9.0.2",
        ]);
        assert!(start.status.success(), "{}", text(&start));
        assert!(text(&start).contains("verified"), "{}", text(&start));
        let up0 = tin_packets(&ns, "wan0");
        let down0 = tin_packets(&ns, "ifb4wan0");
        echoes(&ns, &far.0, 3074, 20);
        echoes(&ns, &far.0, 4000, 10);
        let up = tin_packets(&ns, "wan0");
        let down = tin_packets(&ns, "ifb4wan0");
        let grew = |a: &[u64], b: &[u64], tin: usize| b[tin] - a[tin];
        assert!(grew(&up0, &up, VOICE) >= 20, "upload tins {up0:?} -> {up:?}");
        assert!(grew(&up0, &up, VIDEO) >= 10, "upload tins {up0:?} -> {up:?}");
        // The answers came marked CS1 (bulk); the connections' marks put them back.
        assert!(grew(&down0, &down, VOICE) >= 20, "download tins {down0:?} -> {down:?}");
        assert!(grew(&down0, &down, VIDEO) >= 10, "download tins {down0:?} -> {down:?}");
        assert_eq!(grew(&down0, &down, BULK), 0, "download tins {down0:?} -> {down:?}");

        // status: each rule with the connections it classified, beside the tins' counters.
        let status = ns.unbloat(&["status", "wan0", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&status.stdout)
            .unwrap_or_else(|e| panic!("status --json ({e}): {}", text(&status)));
        let rules = v[0]["classify"].as_array().unwrap_or_else(|| panic!("no rules in {v}"));
        assert_eq!(rules.len(), 2, "{v}");
        assert_eq!(rules[0]["rule"], "1 voice udp port 3074", "{v}");
        assert_eq!(rules[0]["packets"], 1, "one connection, classified once: {v}");
        assert_eq!(rules[1]["packets"], 1, "{v}");
        let shown = text(&ns.unbloat(&["status", "wan0"]));
        assert!(shown.contains("classify:") && shown.contains("2 video addr 10.9.0.2"), "{shown}");

        // The same start again changes nothing; a table someone flushed is written again.
        let again = ns.unbloat(&["start", "wan0", "--down", "20mbit", "--up", "5mbit",
            "--classify", "voice udp port 3074", "--classify", "video addr 10.9.0.2"]);
        assert!(text(&again).contains("nothing changed"), "{}", text(&again));
        ns.must("nft delete table inet unbloat_wan0");
        let back = ns.unbloat(&["start", "wan0", "--down", "20mbit", "--up", "5mbit",
            "--classify", "voice udp port 3074", "--classify", "video addr 10.9.0.2"]);
        assert!(back.status.success() && !text(&back).contains("nothing changed"), "{}", text(&back));
        assert!(text(&ns.sh("nft list table inet unbloat_wan0")).contains("1 voice udp port 3074"));

        let stop = ns.unbloat(&["stop", "wan0"]);
        assert!(stop.status.success(), "{}", text(&stop));
        assert_eq!(ns.snapshot(), before, "stop left something behind");
    }
}
