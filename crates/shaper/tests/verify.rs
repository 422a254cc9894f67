//! `verify` against tc output captured from a real kernel (tests/fixtures/, see its README):
//! the plan that produced a capture verifies clean, and a capture altered in one number (as
//! text, the way the kernel could disagree) produces exactly the mismatch expected.

use std::path::Path;
use unbloat_shaper::linklayer::{Framing, LinkLayer};
use unbloat_shaper::plan::*;
use unbloat_shaper::tcjson::{IfbTexts, LiveState, LiveTexts};
use unbloat_shaper::verify::verify;
use unbloat_units::{Dscp, IfName, Rate, Size, Time};

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn name(s: &str) -> IfName {
    s.parse().unwrap()
}

fn h(s: &str) -> Handle {
    s.parse().unwrap()
}

/// The texts of one captured scenario, with the IFB's.
fn texts(scenario: &str, ifb: &str) -> LiveTexts {
    LiveTexts {
        qdisc: fixture(&format!("{scenario}.wan.qdisc.json")),
        class: fixture(&format!("{scenario}.wan.class.txt")),
        filter: fixture(&format!("{scenario}.wan.filter-root.json")),
        filter_ingress: fixture(&format!("{scenario}.wan.filter-ingress.json")),
        ifb: Some(IfbTexts {
            name: name(ifb),
            qdisc: fixture(&format!("{scenario}.ifb.qdisc.json")),
            class: fixture(&format!("{scenario}.ifb.class.txt")),
            filter: fixture(&format!("{scenario}.ifb.filter-root.json")),
        }),
    }
}

fn live(t: &LiveTexts) -> LiveState {
    LiveState::parse(&name("wanx"), t).unwrap()
}

fn redirect() -> Redirect {
    Redirect {
        dev: name("wanx"),
        parent: Handle::INGRESS,
        protocol: FilterProtocol::All,
        prio: 10,
        to: name("ifb4wanx"),
        restore_dscp: false,
    }
}

fn vdsl2_link(mpu: u32) -> LinkLayer {
    LinkLayer {
        preset: None,
        overhead: 26,
        mpu,
        framing: Framing::Ptm,
        raw: false,
    }
}

/// What was applied for the `cake-vdsl2` capture (see the fixtures README).
fn cake_plan() -> Plan {
    Plan {
        wan: name("wanx"),
        egress: Some(Shaping {
            dev: name("wanx"),
            root: RootQdisc::Cake(CakeParams {
                bandwidth: Rate::from_kbit(19_950),
                rtt: Time::from_millis(100),
                diffserv: Diffserv::Diffserv4,
                flow_mode: FlowMode::DualSrchost,
                nat: true,
                wash: false,
                ingress: false,
                ack_filter: AckFilter::Enabled,
                split_gso: true,
                memlimit: None,
                link: vdsl2_link(72),
                fwmark: 0,
            }),
        }),
        ingress: Some(IngressShaping {
            ifb: name("ifb4wanx"),
            redirect: redirect(),
            shaping: Shaping {
                dev: name("ifb4wanx"),
                root: RootQdisc::Cake(CakeParams {
                    bandwidth: Rate::from_mbit(78),
                    rtt: Time::from_millis(50),
                    diffserv: Diffserv::Besteffort,
                    flow_mode: FlowMode::DualDsthost,
                    nat: true,
                    wash: true,
                    ingress: true,
                    ack_filter: AckFilter::Disabled,
                    split_gso: true,
                    memlimit: None,
                    link: vdsl2_link(0),
                    fwmark: 0,
                }),
            },
        }),
        classify: None,
    }
}

fn class(
    parent: &str,
    id: &str,
    rate: Rate,
    ceil: Rate,
    quantum: u64,
    prio: Option<u8>,
) -> HtbClass {
    HtbClass {
        parent: h(parent),
        classid: h(id),
        rate,
        ceil,
        burst: Size::from_bytes(1600),
        cburst: Size::from_bytes(1600),
        quantum: Size::from_bytes(quantum),
        prio,
        label: String::new(),
    }
}

fn fq(
    parent: &str,
    handle: &str,
    limit: u32,
    quantum: u32,
    ecn: bool,
    mem: Option<u64>,
) -> FqCodelLeaf {
    FqCodelLeaf {
        parent: h(parent),
        handle: h(handle),
        params: FqCodelParams {
            limit,
            flows: 1024,
            target: Time::from_millis(5),
            interval: Time::from_millis(100),
            quantum,
            ecn,
            memory_limit: mem.map(Size::from_bytes),
        },
    }
}

fn dscp_filter(protocol: FilterProtocol, prio: u16, dscp: u8, to: &str) -> DscpFilter {
    DscpFilter {
        parent: h("1:"),
        protocol,
        prio,
        dscp: Dscp::new(dscp).unwrap(),
        flowid: h(to),
    }
}

/// What was applied for the `htb3` capture.
fn htb_plan() -> Plan {
    let up = Rate::from_kbit(19_950);
    let down = Rate::from_mbit(78);
    Plan {
        wan: name("wanx"),
        egress: Some(Shaping {
            dev: name("wanx"),
            root: RootQdisc::Htb(HtbTree {
                handle: h("1:"),
                default_class: h("1:12"),
                stab: Some(Stab {
                    mtu: 2047,
                    tsize: 512,
                    mpu: 72,
                    overhead: 26,
                    linklayer: StabLinkLayer::Ethernet,
                }),
                classes: vec![
                    class("1:", "1:1", up, up, 300, None),
                    class("1:1", "1:11", Rate::from_kbit(6650), up, 300, Some(1)),
                    class("1:1", "1:12", Rate::from_kbit(6650), up, 300, Some(2)),
                    class("1:1", "1:13", Rate::from_kbit(1247), up, 300, Some(3)),
                ],
                leaves: vec![
                    fq("1:11", "110:", 1001, 300, false, None),
                    fq("1:12", "120:", 1001, 300, false, None),
                    fq("1:13", "130:", 1001, 300, false, Some(4 << 20)),
                ],
                filters: vec![
                    dscp_filter(FilterProtocol::Ip, 1, 46, "1:11"),
                    dscp_filter(FilterProtocol::Ipv6, 2, 46, "1:11"),
                    dscp_filter(FilterProtocol::Ip, 3, 8, "1:13"),
                ],
            }),
        }),
        ingress: Some(IngressShaping {
            ifb: name("ifb4wanx"),
            redirect: redirect(),
            shaping: Shaping {
                dev: name("ifb4wanx"),
                root: RootQdisc::Htb(HtbTree {
                    handle: h("1:"),
                    default_class: h("1:10"),
                    stab: Some(Stab {
                        mtu: 2047,
                        tsize: 512,
                        mpu: 0,
                        overhead: 44,
                        linklayer: StabLinkLayer::Atm,
                    }),
                    classes: vec![
                        class("1:", "1:1", down, down, 1514, None),
                        class("1:1", "1:10", down, down, 1514, Some(0)),
                    ],
                    leaves: vec![fq("1:10", "110:", 10240, 1514, true, None)],
                    filters: vec![],
                }),
            },
        }),
        classify: None,
    }
}

fn lines(plan: &Plan, t: &LiveTexts) -> Vec<String> {
    verify(plan, &live(t))
        .iter()
        .map(|m| m.to_string())
        .collect()
}

/// Replaces exactly one occurrence of `from` in `text`.
fn alter(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?} must occur once");
    text.replacen(from, to, 1)
}

#[test]
fn the_cake_capture_verifies_clean() {
    assert_eq!(
        lines(&cake_plan(), &texts("cake-vdsl2", "ifb4wanx")),
        Vec::<String>::new()
    );
}

#[test]
fn the_htb_capture_verifies_clean() {
    assert_eq!(
        lines(&htb_plan(), &texts("htb3", "ifb4wanx")),
        Vec::<String>::new()
    );
}

#[test]
fn each_altered_cake_number_is_named() {
    let cases = [
        (
            "\"overhead\":26",
            "\"overhead\":18",
            "egress cake: overhead is 18, expected 26",
        ),
        (
            "\"bandwidth\":2493750",
            "\"bandwidth\":2493749",
            "egress cake: bandwidth is 19949992bit, expected 19950kbit",
        ),
        (
            "\"mpu\":72",
            "\"mpu\":64",
            "egress cake: mpu is 64, expected 72",
        ),
        (
            "\"atm\":\"ptm\"",
            "\"atm\":\"noatm\"",
            "egress cake: framing is noatm, expected ptm",
        ),
        (
            "\"diffserv\":\"diffserv4\"",
            "\"diffserv\":\"diffserv3\"",
            "egress cake: diffserv mode is diffserv3, expected diffserv4",
        ),
        (
            "\"flowmode\":\"dual-srchost\"",
            "\"flowmode\":\"triple-isolate\"",
            "egress cake: isolation is triple-isolate, expected dual-srchost",
        ),
        (
            "\"nat\":true",
            "\"nat\":false",
            "egress cake: nat is off, expected on",
        ),
        (
            "\"ack-filter\":\"enabled\"",
            "\"ack-filter\":\"disabled\"",
            "egress cake: ack-filter is disabled, expected enabled",
        ),
        (
            "\"rtt\":100000",
            "\"rtt\":50000",
            "egress cake: rtt is 50ms, expected 100ms",
        ),
        (
            "\"raw\":false",
            "\"raw\":true",
            "egress cake: raw is on, expected off",
        ),
    ];
    for (from, to, want) in cases {
        let mut t = texts("cake-vdsl2", "ifb4wanx");
        t.qdisc = alter(&t.qdisc, from, to);
        assert_eq!(
            lines(&cake_plan(), &t),
            vec![want.to_string()],
            "{from} -> {to}"
        );
    }
    // The ingress side: wash and cake's ingress mode on the IFB.
    let mut t = texts("cake-vdsl2", "ifb4wanx");
    let ifb = t.ifb.as_mut().unwrap();
    ifb.qdisc = alter(&ifb.qdisc, "\"ingress\":true", "\"ingress\":false");
    assert_eq!(
        lines(&cake_plan(), &t),
        vec!["ingress cake: ingress mode is off, expected on"]
    );
}

#[test]
fn a_wrong_or_missing_redirect_is_named() {
    let mut t = texts("cake-vdsl2", "ifb4wanx");
    t.filter_ingress = alter(
        &t.filter_ingress,
        "\"to_dev\":\"ifb4wanx\"",
        "\"to_dev\":\"ifb9\"",
    );
    assert_eq!(
        lines(&cake_plan(), &t),
        vec!["ingress redirect: action is mirred egress redirect to ifb9, expected mirred egress redirect to ifb4wanx"]
    );
    let mut t = texts("cake-vdsl2", "ifb4wanx");
    t.filter_ingress = "[]".to_string();
    assert_eq!(
        lines(&cake_plan(), &t),
        vec!["ingress redirect: filter prio 10 on wanx is missing, expected mirred egress redirect to ifb4wanx"]
    );
    let mut t = texts("cake-vdsl2", "ifb4wanx");
    t.filter_ingress = t
        .filter_ingress
        .replace("\"protocol\":\"all\"", "\"protocol\":\"ip\"");
    assert_eq!(
        lines(&cake_plan(), &t),
        vec!["ingress redirect: protocol is ip, expected all"]
    );
}

#[test]
fn missing_pieces_are_named() {
    let mut t = texts("cake-vdsl2", "ifb4wanx");
    t.qdisc = fixture("unshaped.wan.qdisc.json");
    assert_eq!(
        lines(&cake_plan(), &t),
        vec![
            "egress: root qdisc on wanx is noqueue 0:, expected cake",
            "ingress: ingress qdisc on wanx is missing, expected ingress ffff:",
        ]
    );
    let mut t = texts("cake-vdsl2", "ifb4wanx");
    t.ifb = None;
    assert_eq!(
        lines(&cake_plan(), &t),
        vec!["ingress: IFB device is missing, expected ifb4wanx"]
    );
}

#[test]
fn each_altered_htb_number_is_named() {
    let mut t = texts("htb3", "ifb4wanx");
    t.class = alter(&t.class, "rate 1247Kbit", "rate 1246Kbit");
    assert_eq!(
        lines(&htb_plan(), &t),
        vec!["egress class 1:13: rate is 1246kbit, expected 1247kbit"]
    );

    let mut t = texts("htb3", "ifb4wanx");
    t.class = alter(&t.class, "prio 3", "prio 1");
    assert_eq!(
        lines(&htb_plan(), &t),
        vec!["egress class 1:13: prio is 1, expected 3"]
    );

    let mut t = texts("htb3", "ifb4wanx");
    t.qdisc = alter(&t.qdisc, "\"overhead\":26", "\"overhead\":22");
    assert_eq!(
        lines(&htb_plan(), &t),
        vec!["egress stab: overhead is 22, expected 26"]
    );

    let mut t = texts("htb3", "ifb4wanx");
    t.qdisc = alter(&t.qdisc, "\"default\":\"0x12\"", "\"default\":\"0x11\"");
    assert_eq!(
        lines(&htb_plan(), &t),
        vec!["egress htb (1:): default class is 11, expected 12"]
    );

    // fq_codel reports 5 ms as 4999 us; anything else is a difference.
    let mut t = texts("htb3", "ifb4wanx");
    let ifb = t.ifb.as_mut().unwrap();
    ifb.qdisc = alter(&ifb.qdisc, "\"target\":4999", "\"target\":9999");
    assert_eq!(
        lines(&htb_plan(), &t),
        vec!["ingress fq_codel (110:): target is 9999us, expected 4999us"]
    );

    let mut t = texts("htb3", "ifb4wanx");
    let ifb = t.ifb.as_mut().unwrap();
    ifb.qdisc = alter(&ifb.qdisc, "\"ecn\":true,", "");
    assert_eq!(
        lines(&htb_plan(), &t),
        vec!["ingress fq_codel (110:): ecn is off, expected on"]
    );
}

#[test]
fn dscp_filters_are_checked_both_ways() {
    // A filter whose DSCP changed (CS1 -> CS2).
    let mut t = texts("htb3", "ifb4wanx");
    t.filter = alter(&t.filter, "\"value\":\"200000\"", "\"value\":\"400000\"");
    assert_eq!(
        lines(&htb_plan(), &t),
        vec!["egress filter prio 3 (ip): u32 match is DSCP CS2 to 1:13, expected DSCP CS1 to 1:13"]
    );

    // A planned filter missing, and a key the plan does not have.
    let mut plan = htb_plan();
    if let Some(Shaping {
        root: RootQdisc::Htb(tree),
        ..
    }) = &mut plan.egress
    {
        tree.filters.pop();
        tree.filters
            .push(dscp_filter(FilterProtocol::Ipv6, 4, 8, "1:13"));
    }
    assert_eq!(
        lines(&plan, &texts("htb3", "ifb4wanx")),
        vec![
            "egress filter prio 4 (ipv6): u32 filter is missing, expected DSCP CS1 to 1:13",
            "egress: extra filter is u32 prio 3 (ip) to 1:13, expected none",
        ]
    );
}

#[test]
fn extra_classes_and_qdiscs_are_named() {
    let mut plan = htb_plan();
    if let Some(Shaping {
        root: RootQdisc::Htb(tree),
        ..
    }) = &mut plan.egress
    {
        tree.classes.retain(|c| c.classid != h("1:13"));
        tree.leaves.retain(|l| l.handle != h("130:"));
        tree.filters.retain(|f| f.flowid != h("1:13"));
    }
    assert_eq!(
        lines(&plan, &texts("htb3", "ifb4wanx")),
        vec![
            "egress: extra class is htb 1:13, expected none",
            "egress: extra filter is u32 prio 3 (ip) to 1:13, expected none",
            "egress: extra qdisc is fq_codel 130: under 1:13, expected none",
        ]
    );
}

/// Bug: HTB + fq_codel with `--mpu 0` or `--link raw` always failed verification ("egress stab:
/// mtu is 0, expected 2047"). tc keeps no size table for `linklayer ethernet` without an mpu
/// (tc_core.c `tc_calc_size_table` zeroes mtu and tsize), and `tc -j` leaves out every stab key
/// that is 0. The plan now holds what the kernel does; the captures are of unbloat's own plans.
#[test]
fn htb_with_mpu_0_or_link_raw_failed_verification_on_the_stab() {
    for (scenario, link) in [
        ("htb-mpu0", "link = \"ethernet\"\nmpu = 0"),
        ("htb-raw", "link = \"raw\""),
    ] {
        let text = format!("qdisc = \"fq_codel\"\nup = \"10mbit\"\ndown = \"50mbit\"\n{link}");
        let opts = unbloat_shaper::tomlread::from_str(&text).expect("options");
        let spec = unbloat_shaper::spec::Spec::new(name("wanx"), &opts).expect("valid");
        let plan = Plan::build(&spec);
        let t = texts(scenario, "ifb4wanx");
        assert_eq!(lines(&plan, &t), Vec::<String>::new(), "{scenario}");

        // The plan before the fix asked for the table tc never sends.
        let mut old = plan.clone();
        let roots = [
            &mut old.egress.as_mut().expect("egress").root,
            &mut old.ingress.as_mut().expect("ingress").shaping.root,
        ];
        for root in roots {
            let RootQdisc::Htb(tree) = root else {
                panic!("htb")
            };
            let stab = tree.stab.as_mut().expect("a stab");
            (stab.mtu, stab.tsize) = (2047, 512);
        }
        assert_eq!(
            lines(&old, &t),
            [
                "egress stab: mtu is 0, expected 2047",
                "egress stab: tsize is 0, expected 512",
                "ingress stab: mtu is 0, expected 2047",
                "ingress stab: tsize is 0, expected 512",
            ],
            "{scenario}"
        );
    }
}
