//! Classification in a real kernel (issue 40): a rule's connection in its tin on the upload and,
//! restored from the connection by ctinfo, on the download, over a far end whose marks say
//! otherwise; a client's own mark kept on the upload and restored on the download where no rule
//! matched; the automatic classes' small-packet connection in video both ways and a fast one in
//! bulk; bad rules refused with nothing changed; `stop` leaves no table, filter or qdisc.

mod common;

use common::{in_ns, text, Netns};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::Duration;
use unbloat_testbed::real_kernel_test;

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

/// The far end's nftables table `isp`: everything it sends marked CS1 (an ISP's mark, or a
/// washed one), and `chains` beside that chain (each ending in `;`, as nft's one-line form wants).
fn far_end_marks_cs1(far: &str, chains: &str) {
    let table = format!(
        "table inet isp {{ chain out {{ type filter hook output priority mangle; ip dscp set cs1; }}; {chains} }}"
    );
    let out = common::sh(&format!("ip netns exec {far} nft '{table}'"));
    assert!(out.status.success(), "{table}: {}", text(&out));
}

/// `n` echoes of `len` bytes from wan0 to the far end's `port`, one after the other, each
/// answered; the far end marks its answers CS1 (an ISP's mark, or a washed one: bulk to cake).
/// The requests leave with the TOS byte `tos`, as a client that marks its own traffic sends them.
fn echoes(ns: &Netns, far: &str, port: u16, n: usize, tos: u8, len: usize) {
    let far = far.to_string();
    let server = std::thread::spawn(move || {
        in_ns(&far, move || {
            let s = UdpSocket::bind(("10.9.0.2", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 1500];
            for _ in 0..n {
                let (len, from) = s.recv_from(&mut buf).expect("an echo request");
                s.send_to(&buf[..len], from).unwrap();
            }
        })
    });
    std::thread::sleep(Duration::from_millis(300));
    in_ns(&ns.name, move || {
        let c = UdpSocket::bind("10.9.0.1:0").unwrap();
        let tos = libc::c_int::from(tos);
        // SAFETY: a valid socket and an int option of the size given.
        let set = unsafe {
            libc::setsockopt(
                c.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_TOS,
                (&tos as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(set, 0, "IP_TOS: {}", std::io::Error::last_os_error());
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 1500];
        for _ in 0..n {
            c.send_to(&vec![7u8; len], ("10.9.0.2", port)).unwrap();
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
        far_end_marks_cs1(&far.0, "");
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
        echoes(&ns, &far.0, 3074, 20, 0, 64);
        // A client's own mark (CS1) does not override a rule: video.
        echoes(&ns, &far.0, 4000, 10, 0x20, 64);
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
        // The two rules, then the client's own marks by tin: nothing reached those.
        assert_eq!(rules.len(), 5, "{v}");
        assert_eq!(rules[0]["rule"], "1 voice udp port 3074", "{v}");
        assert_eq!(rules[0]["packets"], 1, "one connection, classified once: {v}");
        assert_eq!(rules[1]["packets"], 1, "{v}");
        assert_eq!(rules[2]["rule"], "no rule: the client's own mark, voice", "{v}");
        assert!(rules[2..].iter().all(|r| r["packets"] == 0), "{v}");
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

real_kernel_test! {
    fn a_client_s_own_mark_is_kept_on_the_upload_and_restored_on_the_download_where_no_rule_matched() needs ["cake", "ingress", "mirred"] {
        let ns = Netns::new();
        let far = ns.wan_to_far_end();
        // The far end marks its answers CS1, and counts the requests that reach it still CS5.
        far_end_marks_cs1(&far.0, "chain in { type filter hook input priority 0; ip dscp cs5 counter; };");
        let before = ns.snapshot();
        let start = ns.unbloat(&[
            "start", "wan0", "--down", "20mbit", "--up", "5mbit", "--classify", "voice udp port 3074",
        ]);
        assert!(start.status.success(), "{}", text(&start));
        let up0 = tin_packets(&ns, "wan0");
        let down0 = tin_packets(&ns, "ifb4wan0");
        // No rule matches port 4001; the client marks its requests CS5 (voice to cake).
        echoes(&ns, &far.0, 4001, 12, 0xa0, 64);
        let up = tin_packets(&ns, "wan0");
        let down = tin_packets(&ns, "ifb4wan0");
        let grew = |a: &[u64], b: &[u64], tin: usize| b[tin] - a[tin];
        assert!(grew(&up0, &up, VOICE) >= 12, "upload tins {up0:?} -> {up:?}");
        assert!(grew(&down0, &down, VOICE) >= 12, "download tins {down0:?} -> {down:?}");
        assert_eq!(grew(&down0, &down, BULK), 0, "download tins {down0:?} -> {down:?}");
        // The client's CS5 left as it was sent (stored as voice, not rewritten to EF).
        let seen = common::sh(&format!("ip netns exec {} nft list chain inet isp in", far.0));
        let listed = text(&seen);
        let packets: u64 = listed
            .split("packets ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no counter in {listed}"));
        assert!(packets >= 12, "the far end saw {packets} requests still CS5: {listed}");

        let status = ns.unbloat(&["status", "wan0", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&status.stdout)
            .unwrap_or_else(|e| panic!("status --json ({e}): {}", text(&status)));
        let counts = v[0]["classify"].as_array().unwrap_or_else(|| panic!("no rules in {v}"));
        assert_eq!(counts[0]["packets"], 0, "{v}");
        assert_eq!(counts[1]["rule"], "no rule: the client's own mark, voice", "{v}");
        assert_eq!(counts[1]["packets"], 1, "one connection, stored once: {v}");

        let stop = ns.unbloat(&["stop", "wan0"]);
        assert!(stop.status.success(), "{}", text(&stop));
        assert_eq!(ns.snapshot(), before, "stop left something behind");
    }
}

real_kernel_test! {
    fn automatic_classes_promote_small_packets_and_demote_a_fast_connection() needs ["cake", "ingress", "mirred"] {
        let ns = Netns::new();
        let far = ns.wan_to_far_end();
        far_end_marks_cs1(&far.0, "");
        let before = ns.snapshot();
        for (entry, says) in [("auto bulk-pps 0", "not a whole number"), ("auto fast", "unknown word")] {
            let out = ns.unbloat(&["start", "wan0", "--down", "20mbit", "--up", "5mbit", "--classify", entry]);
            assert_eq!(out.status.code(), Some(2), "{entry}: {}", text(&out));
            assert!(text(&out).contains(says), "{entry}: {}", text(&out));
            assert_eq!(ns.snapshot(), before, "{entry}: a refused entry changed something");
        }
        // A bucket of 50 packets at 50 a second: the small connection's 30 each way never drain
        // it; the large one's back-to-back echoes do, after 50 to 100.
        let start = ns.unbloat(&[
            "start", "wan0", "--down", "20mbit", "--up", "5mbit",
            "--classify", "auto bulk-pps 50 bulk-after 1s",
        ]);
        assert!(start.status.success(), "{}", text(&start));
        let (up0, down0) = (tin_packets(&ns, "wan0"), tin_packets(&ns, "ifb4wan0"));
        // 64-byte echoes: after 20 packets both ways, the connection is video.
        echoes(&ns, &far.0, 4002, 30, 0, 64);
        let (up1, down1) = (tin_packets(&ns, "wan0"), tin_packets(&ns, "ifb4wan0"));
        let grew = |a: &[u64], b: &[u64], tin: usize| b[tin] - a[tin];
        assert!(grew(&up0, &up1, VIDEO) >= 15, "upload tins {up0:?} -> {up1:?}");
        // Restored over the far end's CS1.
        assert!(grew(&down0, &down1, VIDEO) >= 15, "download tins {down0:?} -> {down1:?}");
        // 1000-byte echoes as fast as they come back: bulk after the bucket.
        echoes(&ns, &far.0, 4003, 400, 0, 1000);
        let up2 = tin_packets(&ns, "wan0");
        assert!(grew(&up1, &up2, BULK) >= 250, "upload tins {up1:?} -> {up2:?}");
        assert_eq!(grew(&up1, &up2, VIDEO), 0, "never small: {up1:?} -> {up2:?}");

        let status = ns.unbloat(&["status", "wan0", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&status.stdout)
            .unwrap_or_else(|e| panic!("status --json ({e}): {}", text(&status)));
        let counts = v[0]["classify"].as_array().unwrap_or_else(|| panic!("no counts in {v}"));
        let count = |rule: &str| {
            counts.iter().find(|c| c["rule"] == rule).unwrap_or_else(|| panic!("no {rule:?} in {v}"))["packets"].clone()
        };
        assert_eq!(count("auto: bulk, past 50 packets/s one way for 1 s"), 1, "{v}");
        assert_eq!(count("auto: video, at most 500 bytes a packet on average"), 1, "{v}");
        let plan = text(&ns.unbloat(&["plan", "wan0", "--down", "20mbit", "--up", "5mbit", "--classify", "auto"]));
        assert!(plan.contains("update @auto_up { ct id limit rate over 500/second burst 2500 packets }"), "{plan}");

        let stop = ns.unbloat(&["stop", "wan0"]);
        assert!(stop.status.success(), "{}", text(&stop));
        assert_eq!(ns.snapshot(), before, "stop left something behind");
    }
}
