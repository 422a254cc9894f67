//! Parsing of `tc -j -s -d` output captured from real kernels.
//!
//! Two fixture directories are read: `crates/shaper/tests/fixtures/` (captured for these tests,
//! see its README) and the workspace's `fixtures/tc/` (the shared captures). Every `.json`/`.txt`
//! file in both is parsed, so a new fixture is covered as soon as it is added: which command
//! printed it is told from the content (class text or a `"class"` key: `tc class show`; a
//! `"pref"` key: `tc filter show`; otherwise `tc qdisc show`). Then specific files are checked
//! for the values they are known to hold.

use std::path::{Path, PathBuf};
use unbloat_shaper::linklayer::Framing;
use unbloat_shaper::plan::{AckFilter, Diffserv, FlowMode, Handle};
use unbloat_shaper::tcjson::{
    parse_classes, parse_filters, parse_qdiscs, Class, Filter, Qdisc, QdiscKind, Source,
};
use unbloat_units::{Dscp, Rate, Size, Time};

fn dirs() -> Vec<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    vec![here.join("tests/fixtures"), here.join("../../fixtures/tc")]
}

fn own(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn qdiscs(name: &str) -> Vec<Qdisc> {
    parse_qdiscs(&own(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn classes(name: &str) -> Vec<Class> {
    parse_classes(&own(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn filters(name: &str) -> Vec<Filter> {
    parse_filters(&own(name), None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn h(s: &str) -> Handle {
    s.parse().unwrap()
}

#[test]
fn every_fixture_parses() {
    let mut seen = 0;
    for dir in dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue; // fixtures/tc/ may not exist in a partial checkout
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !(name.ends_with(".json") || name.ends_with(".txt")) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            if name.contains("version") || text.trim_start().starts_with("tc utility") {
                continue;
            }
            // Which command printed it, from the content: tc's class text starts with "class ",
            // JSON classes have a "class" key, filters a "pref".
            let head = text.trim_start();
            let first = head
                .find('{')
                .map(|i| &head[i..(i + 200).min(head.len())])
                .unwrap_or("");
            let result = if head.starts_with("class ") || first.contains("\"class\"") {
                parse_classes(&text).map(|c| c.len())
            } else if first.contains("\"pref\"") {
                parse_filters(&text, None).map(|f| f.len())
            } else {
                parse_qdiscs(&text).map(|q| {
                    // A known kind must be read as such, not fall back to raw JSON.
                    for q in &q {
                        if let QdiscKind::Other { error: Some(e), .. } = &q.details {
                            panic!(
                                "{}: {} {} not understood: {e}",
                                path.display(),
                                q.kind,
                                q.handle
                            );
                        }
                    }
                    q.len()
                })
            };
            if let Err(e) = result {
                panic!("{}: {e}", path.display());
            }
            seen += 1;
        }
    }
    assert!(seen >= 30, "only {seen} fixtures found");
}

#[test]
fn cake_vdsl2_egress_holds_what_was_asked() {
    // bandwidth 19950kbit diffserv4 dual-srchost nat ack-filter bridged-ptm ether-vlan mpu 72
    let q = qdiscs("cake-vdsl2.wan.qdisc.json");
    assert_eq!(q.len(), 2);
    let root = &q[0];
    assert!(root.root);
    assert_eq!(root.label(), "cake 8001:");
    let (o, stats) = root.cake().expect("cake");
    assert_eq!(o.bandwidth, Some(Rate::from_kbit(19_950)));
    assert_eq!(o.framing(), Framing::Ptm);
    assert_eq!(o.overhead, 26);
    assert_eq!(o.mpu, 72);
    assert!(!o.raw);
    assert_eq!(o.diffserv, Diffserv::Diffserv4);
    assert_eq!(o.flowmode, FlowMode::DualSrchost);
    assert!(o.nat && !o.wash && !o.ingress && o.split_gso);
    assert_eq!(o.ack_filter, AckFilter::Enabled);
    assert_eq!(o.rtt, Time::from_millis(100));
    assert_eq!(o.fwmark, 0);
    let s = stats.expect("-s was given");
    assert_eq!(s.capacity_estimate, Rate::from_kbit(19_950));
    assert_eq!(s.memory_limit, 4 << 20);
    assert_eq!(s.tins.len(), 4);
    // tc's text of the same qdisc: "thresh 1246Kbit 19950Kbit 9975Kbit 4987Kbit",
    // "target 14.6ms 5ms 5ms 5ms", "pk_delay 56.1ms 18.6ms 0us 55ms", "pkts 175 356 0 169".
    let t = &s.tins;
    assert_eq!(t[0].threshold_rate, Rate::from_bytes_per_sec(155_859));
    assert_eq!(t[1].threshold_rate, Rate::from_kbit(19_950));
    assert_eq!(t[0].target, Time::from_micros(14_570));
    assert_eq!(t[1].target, Time::from_millis(5));
    assert_eq!(
        [
            t[0].sent_packets,
            t[1].sent_packets,
            t[2].sent_packets,
            t[3].sent_packets
        ],
        [175, 356, 0, 169]
    );
    assert_eq!(t[0].peak_delay.micros() / 100, 561);
    assert_eq!(t.iter().map(|t| t.drops).sum::<u64>(), 4);
    assert_eq!(root.stats.unwrap().drops, 4);
    assert_eq!(root.stats.unwrap().bytes, 571_120);
    assert!(q[1].is_ingress());
    assert_eq!(q[1].handle, Handle::INGRESS);
}

#[test]
fn cake_vdsl2_ingress_side() {
    let q = qdiscs("cake-vdsl2.ifb.qdisc.json");
    let (o, s) = q[0].cake().unwrap();
    assert_eq!(o.bandwidth, Some(Rate::from_mbit(78)));
    assert_eq!(o.diffserv, Diffserv::Besteffort);
    assert_eq!(o.flowmode, FlowMode::DualDsthost);
    assert!(o.nat && o.wash && o.ingress);
    assert_eq!(o.ack_filter, AckFilter::Disabled);
    assert_eq!(o.rtt, Time::from_millis(50));
    // mpu 0 is left out by tc.
    assert_eq!(o.mpu, 0);
    assert_eq!(s.unwrap().tins.len(), 1);
    assert_eq!(s.unwrap().tins[0].flow_quantum, 1514);
}

#[test]
fn cake_variants() {
    let o = |name: &str| {
        qdiscs(&format!("cake-variant.{name}.qdisc.json"))[0]
            .cake()
            .unwrap()
            .0
            .clone()
    };
    let a = o("bandwidth-2mbit-pppoe-llcsnap");
    assert_eq!(
        (a.bandwidth, a.framing(), a.overhead, a.mpu),
        (Some(Rate::from_mbit(2)), Framing::Atm, 40, 0)
    );
    let d = o("bandwidth-50mbit-docsis-triple-isolate");
    assert_eq!(
        (d.framing(), d.overhead, d.mpu, d.flowmode),
        (Framing::None, 18, 64, FlowMode::TripleIsolate)
    );
    let r = o("bandwidth-1gbit-raw-diffserv8-flows-ack-filter-aggressive");
    assert!(r.raw);
    assert_eq!(r.atm, None, "tc omits atm in raw mode");
    assert_eq!(
        (r.diffserv, r.flowmode, r.ack_filter),
        (Diffserv::Diffserv8, FlowMode::Flows, AckFilter::Aggressive)
    );
    let u = o("unlimited-conservative-diffserv3-hosts-nonat");
    assert_eq!(u.bandwidth, None);
    assert_eq!(
        (u.overhead, u.framing(), u.flowmode, u.nat),
        (48, Framing::Atm, FlowMode::Hosts, false)
    );
    // cake's default is raw (`man tc-cake`: "raw (default)").
    let plain = o("bandwidth-10mbit");
    assert!(plain.raw);
    let e = o("bandwidth-100mbit-ethernet-dual-dsthost-wash-ingress-rtt-20ms-fwmark-0xff");
    assert_eq!(
        (e.overhead, e.mpu, e.rtt, e.fwmark),
        (38, 84, Time::from_millis(20), 0xff)
    );
    let n = o("bandwidth-30mbit-overhead--10-mpu-0-atm");
    assert_eq!((n.overhead, n.framing()), (-10, Framing::Atm));
}

#[test]
fn replace_on_a_cake_keeps_the_options_it_did_not_name() {
    // `tc qdisc add ... cake bandwidth 1gbit raw diffserv8 flows ack-filter-aggressive`, then
    // `tc qdisc replace ... cake bandwidth 10mbit`: only the bandwidth changed. A re-apply must
    // name every option (or delete first), never rely on cake's defaults.
    let o = qdiscs("cake-replace-keeps-old-options.qdisc.json")[0]
        .cake()
        .unwrap()
        .0
        .clone();
    assert_eq!(o.bandwidth, Some(Rate::from_mbit(10)));
    assert_eq!(
        (o.diffserv, o.flowmode, o.ack_filter),
        (Diffserv::Diffserv8, FlowMode::Flows, AckFilter::Aggressive)
    );
}

#[test]
fn htb_three_tiers_with_fq_codel_leaves() {
    let q = qdiscs("htb3.wan.qdisc.json");
    let root = q.iter().find(|q| q.root).unwrap();
    assert_eq!(root.htb().unwrap().default_class, 0x12);
    let stab = root.stab.as_ref().unwrap();
    assert_eq!(
        (
            stab.linklayer.as_str(),
            stab.overhead,
            stab.mpu,
            stab.mtu,
            stab.tsize
        ),
        ("ethernet", 26, 72, 2047, 512)
    );
    let leaf = q.iter().find(|q| q.parent == Some(h("1:13"))).unwrap();
    let (o, s) = leaf.fq_codel().unwrap();
    assert_eq!(
        (o.limit, o.flows, o.quantum, o.ecn),
        (1001, 1024, 300, false)
    );
    // 5ms and 100ms as the kernel keeps them.
    assert_eq!(
        (o.target, o.interval),
        (Time::from_micros(4999), Time::from_micros(99_999))
    );
    assert_eq!(o.memory_limit, Some(4 << 20));
    assert!(s.is_some());
    let ifb = qdiscs("htb3.ifb.qdisc.json");
    let (o, s) = ifb[1].fq_codel().unwrap();
    assert!(o.ecn);
    assert_eq!(o.quantum, 1514);
    assert_eq!(s.unwrap().maxpacket, 1643);
    assert_eq!(ifb[0].stab.as_ref().unwrap().linklayer, "atm");
    assert_eq!(ifb[0].stab.as_ref().unwrap().overhead, 44);
}

#[test]
fn htb_classes_from_tc_text() {
    let all = classes("htb3.wan.class.txt");
    assert!(all.iter().all(|c| c.source == Source::Text));
    // fq_codel lists its flows as classes too: kept, but raw.
    let fq: Vec<_> = all.iter().filter(|c| c.kind == "fq_codel").collect();
    assert_eq!(fq.len(), 3);
    assert!(fq.iter().all(|c| c.htb().is_none() && c.parent.is_some()));
    let c: Vec<_> = all.iter().filter(|c| c.kind == "htb").collect();
    assert_eq!(c.len(), 4);
    let top = c.iter().find(|c| c.handle == h("1:1")).unwrap();
    assert_eq!(top.parent, None);
    assert_eq!(top.htb().unwrap().rate, Rate::from_kbit(19_950));
    assert_eq!(top.htb().unwrap().level, Some(7));
    assert_eq!(top.htb().unwrap().prio, None);
    let bulk = c.iter().find(|c| c.handle == h("1:13")).unwrap();
    assert_eq!(bulk.parent, Some(h("1:1")));
    assert_eq!(bulk.leaf, Some(h("130:")));
    let o = bulk.htb().unwrap();
    assert_eq!(
        (o.rate, o.ceil),
        (Rate::from_kbit(1247), Rate::from_kbit(19_950))
    );
    assert_eq!((o.prio, o.quantum), (Some(3), Some(300)));
    assert_eq!(
        (o.burst, o.cburst),
        (Some(Size::from_bytes(1599)), Some(Size::from_bytes(1596)))
    );
    assert_eq!(
        (o.lended, o.borrowed, o.tokens),
        (Some(12), Some(148), Some(-139_347))
    );
    let s = bulk.stats.unwrap();
    assert_eq!((s.bytes, s.packets, s.overlimits), (234_880, 160, 158));
}

#[test]
fn cake_flow_classes_are_kept_raw() {
    let c = classes("cake-vdsl2.wan.class.txt");
    assert!(!c.is_empty());
    assert!(c.iter().all(|c| c.kind == "cake" && c.htb().is_none()));
    assert_eq!(c[0].handle, h("8001:256"));
    assert_eq!(c[0].stats.unwrap().drops, 1);
}

#[test]
fn dscp_filters_and_the_mirred_redirect() {
    let f = filters("htb3.wan.filter-root.json");
    let keys: Vec<_> = f
        .iter()
        .filter_map(|f| f.u32_key().map(|k| (f, k)))
        .collect();
    assert_eq!(keys.len(), 3);
    let (ef4, k) = keys[0];
    assert_eq!((ef4.protocol.as_str(), ef4.pref), ("ip", 1));
    assert_eq!(k.flowid, Some(h("1:11")));
    assert_eq!(k.matches[0].ipv4_dscp(), Some(Dscp::new(46).unwrap()));
    let (ef6, k) = keys[1];
    assert_eq!((ef6.protocol.as_str(), ef6.pref), ("ipv6", 2));
    assert_eq!(k.matches[0].ipv6_dscp(), Some(Dscp::new(46).unwrap()));
    assert_eq!(
        keys[2].1.matches[0].ipv4_dscp(),
        Some(Dscp::new(8).unwrap())
    );
    assert_eq!(keys[2].1.flowid, Some(h("1:13")));

    let r = parse_filters(&own("htb3.wan.filter-ingress.json"), Some(Handle::INGRESS)).unwrap();
    let (f, k) = r.iter().find_map(|f| f.u32_key().map(|k| (f, k))).unwrap();
    assert_eq!(
        (f.protocol.as_str(), f.pref, f.parent),
        ("all", 10, Some(Handle::INGRESS))
    );
    assert!(k.matches[0].is_catch_all());
    let m = k.mirred().next().unwrap();
    assert_eq!(
        (m.action.as_str(), m.direction.as_str(), m.to_dev.as_str()),
        ("redirect", "egress", "ifb4wanx")
    );
    assert_eq!(m.packets, Some(1333));
}

#[test]
fn filters_listed_without_a_parent_name_their_own() {
    let f = filters("host-htb.wan.filter-root.json");
    assert!(f.iter().all(|f| f.parent == Some(h("1:"))));
    let f = filters("host-htb.wan.filter-ingress.json");
    assert!(
        f.iter().all(|f| f.parent.is_none()),
        "tc omits the parent it was asked for"
    );
}

#[test]
fn repeated_match_keys_are_all_kept() {
    // `match ip dsfield 0xb8 0xfc match ip protocol 17 0xff`, as iproute2 6.1 prints it.
    let text = r#"[{"parent":"1:","protocol":"ip","pref":1,"kind":"u32","chain":0,"options":{"fh":"800::800","order":2048,"key_ht":"800","bkt":"0","flowid":"1:11","not_in_hw":true,"match":{"value":"b80000","mask":"fc0000","offmask":"","off":0},"match":{"value":"110000","mask":"ff0000","offmask":"","off":8}}}]"#;
    let f = parse_filters(text, None).unwrap();
    let k = f[0].u32_key().unwrap();
    assert_eq!(k.matches.len(), 2);
    assert_eq!(k.matches[1].off, 8);
}

#[test]
fn an_unshaped_device() {
    let q = qdiscs("unshaped.wan.qdisc.json");
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].kind, "noqueue");
    assert!(q[0].root && q[0].is_kernel_default());
}

/// The shared captures in `fixtures/tc/` (see its README for the commands).
fn shared(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tc")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn shared_cake(name: &str) -> unbloat_shaper::tcjson::CakeOptions {
    let q = parse_qdiscs(&shared(name)).unwrap();
    let root = q.iter().find(|q| q.root).unwrap();
    root.cake().unwrap().0.clone()
}

#[test]
fn shared_cake_fixtures_hold_their_keywords_numbers() {
    let ptm = shared_cake("cake-egress-ptm.qdisc.json");
    assert_eq!(ptm.bandwidth, Some(Rate::from_kbit(19_950)));
    assert_eq!(
        (ptm.framing(), ptm.overhead, ptm.mpu),
        (Framing::Ptm, 26, 72)
    );
    assert_eq!(
        (ptm.flowmode, ptm.ack_filter, ptm.nat),
        (FlowMode::DualSrchost, AckFilter::Enabled, true)
    );
    let docsis = shared_cake("cake-ingress-docsis.qdisc.json");
    assert_eq!(docsis.bandwidth, Some(Rate::from_mbit(78)));
    assert_eq!(
        (docsis.framing(), docsis.overhead, docsis.mpu),
        (Framing::None, 18, 64)
    );
    assert!(docsis.ingress && docsis.wash && docsis.nat);
    assert_eq!(docsis.diffserv, Diffserv::Besteffort);
    let atm = shared_cake("cake-atm-pppoe-vcmux.qdisc.json");
    assert_eq!(
        (atm.bandwidth, atm.framing(), atm.overhead),
        (Some(Rate::from_mbit(7)), Framing::Atm, 32)
    );
    let raw = shared_cake("cake-raw.qdisc.json");
    assert!(raw.raw);
    assert_eq!(
        (raw.rtt, raw.flowmode),
        (Time::from_millis(50), FlowMode::Flows)
    );
    let d8 = parse_qdiscs(&shared("cake-diffserv8.qdisc.json")).unwrap();
    let (_, s) = d8[0].cake().unwrap();
    assert_eq!(s.unwrap().tins.len(), 8);
    // Without -s there are no statistics, and that is not an error.
    let q = parse_qdiscs(&shared("cake-egress-ptm.qdisc-nostats.json")).unwrap();
    assert!(q[0].stats.is_none() && q[0].cake().unwrap().1.is_none());
}

#[test]
fn shared_htb_fixtures() {
    let c = parse_classes(&shared("htb3-fqcodel.class.txt")).unwrap();
    let rate = |id: &str| {
        c.iter()
            .find(|c| c.handle == h(id))
            .unwrap()
            .htb()
            .unwrap()
            .rate
    };
    assert_eq!(
        [rate("1:1"), rate("1:11"), rate("1:12"), rate("1:13")],
        [
            Rate::from_kbit(19_950),
            Rate::from_kbit(4987),
            Rate::from_kbit(9975),
            Rate::from_kbit(1246)
        ]
    );
    let f = parse_filters(&shared("htb3-fqcodel.filter.json"), Some(h("1:"))).unwrap();
    let keys: Vec<_> = f
        .iter()
        .filter_map(|f| f.u32_key().map(|k| (f.pref, f.protocol.clone(), k.clone())))
        .collect();
    assert_eq!(keys.len(), 4);
    assert_eq!(keys[3].1, "ipv6");
    assert_eq!(
        keys[3].2.matches[0].ipv6_dscp(),
        Some(Dscp::new(8).unwrap())
    );
    let m = parse_filters(&shared("ingress-mirred.filter.json"), Some(Handle::INGRESS)).unwrap();
    let mirred = m
        .iter()
        .find_map(|f| f.u32_key())
        .unwrap()
        .mirred()
        .next()
        .unwrap()
        .clone();
    assert_eq!(mirred.to_dev, "ifb4vethfxa");
    let q = parse_qdiscs(&shared("htb1-fqcodel-ifb.qdisc.json")).unwrap();
    assert_eq!(
        q[0].stab.as_ref().map(|s| (s.overhead, s.mpu)),
        Some((18, 64))
    );
    assert!(q[1].fq_codel().unwrap().0.ecn);
    for d in ["veth-default", "ifb-default", "dummy-default"] {
        let q = parse_qdiscs(&shared(&format!("{d}.qdisc.json"))).unwrap();
        assert!(q[0].root && q[0].is_kernel_default(), "{d}");
    }
}
