//! Golden tests: the exact commands of each strategy on representative links, written out by hand
//! from seed 000 and PEERS.md (not captured from the code), plus a snapshot of every combination in
//! `crates/lab/tests/golden/` (regenerate with `UNBLOAT_BLESS=1` and review the diff).

use super::*;
use crate::profile::LinkProfile;

/// A planner for tests: says what it was asked, so the wiring (devices, 95 % rates) is checked.
struct EchoPlanner;

impl UnbloatPlanner for EchoPlanner {
    fn commands(
        &self,
        devs: &RouterDevs,
        profile: &LinkProfile,
        down: Rate,
        up: Rate,
    ) -> Result<Vec<Cmd>, String> {
        Ok(vec![Cmd::new("echo").args([
            devs.wan.clone(),
            devs.ifb.clone(),
            profile.name.clone(),
            down.to_string(),
            up.to_string(),
        ])])
    }
}

fn lines(strategy: Strategy, profile: &str) -> Vec<String> {
    let p = LinkProfile::shipped(profile).expect("profile");
    commands(&strategy, &p, &RouterDevs::new("wan0"), &EchoPlanner)
        .expect("commands")
        .iter()
        .map(Cmd::display)
        .collect()
}

#[test]
fn none_configures_nothing() {
    for p in crate::profile::shipped_names() {
        assert!(lines(Strategy::None, p).is_empty());
    }
}

#[test]
fn wondershaper_on_its_own_link_is_seed_000_at_95_percent() {
    // 95 % of 800 and 220 kbit/s: 760 and 209; $[9*209/10] = 188, $[8*209/10] = 167.
    let expected = [
        "tc qdisc add dev wan0 root handle 1: htb default 20",
        "tc class add dev wan0 parent 1: classid 1:1 htb rate 209kbit burst 6k",
        "tc class add dev wan0 parent 1:1 classid 1:10 htb rate 209kbit burst 6k prio 1",
        "tc class add dev wan0 parent 1:1 classid 1:20 htb rate 188kbit burst 6k prio 2",
        "tc class add dev wan0 parent 1:1 classid 1:30 htb rate 167kbit burst 6k prio 2",
        "tc qdisc add dev wan0 parent 1:10 handle 10: sfq perturb 10",
        "tc qdisc add dev wan0 parent 1:20 handle 20: sfq perturb 10",
        "tc qdisc add dev wan0 parent 1:30 handle 30: sfq perturb 10",
        "tc filter add dev wan0 parent 1:0 protocol ip prio 10 u32 match ip tos 0x10 0xff flowid 1:10",
        "tc filter add dev wan0 parent 1:0 protocol ip prio 10 u32 match ip protocol 1 0xff flowid 1:10",
        "tc filter add dev wan0 parent 1: protocol ip prio 10 u32 match ip protocol 6 0xff match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 match u8 0x10 0xff at 33 flowid 1:10",
        "tc filter add dev wan0 parent 1: protocol ip prio 18 u32 match ip dst 0.0.0.0/0 flowid 1:20",
        "tc qdisc add dev wan0 handle ffff: ingress",
        "tc filter add dev wan0 parent ffff: protocol ip prio 50 u32 match ip src 0.0.0.0/0 police rate 760kbit burst 10k drop flowid :1",
    ];
    assert_eq!(lines(Strategy::Wondershaper, "dsl-2002"), expected);
}

#[test]
fn sqm_simple_on_vdsl2_is_simple_qos_with_its_defaults() {
    // UP = 19000 kbit: Q = 19000 * 1000 / 8000 = 2375; target max(5000, 13992000/19000) = 5000.
    // DOWN = 76000 kbit: Q = 9500. PTM has no sqm linklayer: ethernet, overhead 26.
    let stab = "stab mtu 2047 tsize 512 mpu 0 overhead 26 linklayer ethernet";
    let leaf = "fq_codel limit 1001 target 5000us interval 100000us ecn";
    let expected = vec![
        "ip link add name ifb4wan0 type ifb".to_string(),
        format!("tc qdisc add dev wan0 root handle 1: {stab} htb default 12"),
        "tc class add dev wan0 parent 1: classid 1:1 htb quantum 2375 rate 19000kbit ceil 19000kbit burst 2375 cburst 2375".into(),
        "tc class add dev wan0 parent 1:1 classid 1:11 htb quantum 2375 rate 128kbit ceil 6333kbit burst 2375 cburst 2375 prio 1".into(),
        "tc class add dev wan0 parent 1:1 classid 1:12 htb quantum 2375 rate 3166kbit ceil 18984kbit burst 2375 cburst 2375 prio 2".into(),
        "tc class add dev wan0 parent 1:1 classid 1:13 htb quantum 2375 rate 3166kbit ceil 18984kbit burst 2375 cburst 2375 prio 3".into(),
        format!("tc qdisc add dev wan0 parent 1:11 handle 110: {leaf} quantum 300 flows 1024"),
        format!("tc qdisc add dev wan0 parent 1:12 handle 120: {leaf} quantum 300 flows 1024"),
        format!("tc qdisc add dev wan0 parent 1:13 handle 130: {leaf} quantum 300 flows 1024"),
        "tc filter add dev wan0 parent 1:0 protocol all prio 1 handle 1/0xff fw classid 1:11".into(),
        "tc filter add dev wan0 parent 1:0 protocol all prio 2 handle 2/0xff fw classid 1:12".into(),
        "tc filter add dev wan0 parent 1:0 protocol all prio 3 handle 3/0xff fw classid 1:13".into(),
        "tc filter add dev wan0 parent 1:0 protocol arp prio 4 u32 match u32 0 0 flowid 1:11".into(),
        "tc filter add dev wan0 parent 1:0 protocol ip prio 5 u32 match ip protocol 1 0xff flowid 1:13".into(),
        "tc filter add dev wan0 parent 1:0 protocol ipv6 prio 6 u32 match ip6 protocol 58 0xff flowid 1:13".into(),
        "tc filter add dev wan0 parent 1:0 protocol all prio 999 u32 match ip protocol 0 0x00 flowid 1:12".into(),
        "tc qdisc add dev wan0 handle ffff: ingress".into(),
        format!("tc qdisc add dev ifb4wan0 root handle 1: {stab} htb default 10"),
        "tc class add dev ifb4wan0 parent 1: classid 1:1 htb quantum 9500 rate 76000kbit ceil 76000kbit burst 9500 cburst 9500".into(),
        "tc class add dev ifb4wan0 parent 1:1 classid 1:10 htb quantum 9500 rate 76000kbit ceil 76000kbit burst 9500 cburst 9500 prio 0".into(),
        format!("tc qdisc add dev ifb4wan0 parent 1:10 handle 110: {leaf} flows 1024"),
        "ip link set dev ifb4wan0 up".into(),
        "tc filter add dev wan0 parent ffff: protocol all prio 10 u32 match u32 0 0 flowid 1:1 action mirred egress redirect dev ifb4wan0".into(),
    ];
    assert_eq!(lines(Strategy::SqmSimple, "vdsl2"), expected);
}

#[test]
fn sqm_simple_grows_fq_codel_target_at_low_rates() {
    // dsl-2002 up: 209 kbit -> target 13992000 / 209 = 66947 us, interval 161947 us; Q floor 1749.
    assert_eq!(sqm_target_interval_us(209), (66_947, 161_947));
    assert_eq!(sqm_quantum(209), 1749);
    let l = lines(Strategy::SqmSimple, "dsl-2002");
    assert!(
        l.iter()
            .any(|c| c.contains("target 66947us interval 161947us")),
        "{l:#?}"
    );
    assert!(l[1].contains("linklayer atm"), "{}", l[1]);
}

#[test]
fn sqm_piece_of_cake_on_adsl_uses_atm_overhead_and_besteffort() {
    // 95 % of 768 kbit/s = 729.6 -> 729; of 7 Mbit/s = 6650.
    let expected = [
        "ip link add name ifb4wan0 type ifb",
        "tc qdisc add dev wan0 root cake bandwidth 729kbit atm overhead 40 mpu 0 diffserv3 nat besteffort",
        "tc qdisc add dev wan0 handle ffff: ingress",
        "tc qdisc add dev ifb4wan0 root cake bandwidth 6650kbit atm overhead 40 mpu 0 diffserv3 nat besteffort wash",
        "ip link set dev ifb4wan0 up",
        "tc filter add dev wan0 parent ffff: protocol all prio 10 u32 match u32 0 0 flowid 1:1 action mirred egress redirect dev ifb4wan0",
    ];
    assert_eq!(lines(Strategy::SqmPieceOfCake, "adsl"), expected);
    let fiber = lines(Strategy::SqmPieceOfCake, "fiber");
    assert_eq!(fiber[1], "tc qdisc add dev wan0 root cake bandwidth 237500kbit overhead 38 mpu 0 diffserv3 nat besteffort");
}

#[test]
fn unbloat_asks_the_planner_with_95_percent_rates() {
    assert_eq!(
        lines(Strategy::Unbloat, "docsis"),
        ["echo wan0 ifb4wan0 docsis 95mbit 9500kbit"]
    );
}

#[test]
fn a_planner_error_names_strategy_and_profile() {
    struct Refuse;
    impl UnbloatPlanner for Refuse {
        fn commands(
            &self,
            _: &RouterDevs,
            _: &LinkProfile,
            _: Rate,
            _: Rate,
        ) -> Result<Vec<Cmd>, String> {
            Err("--down 0: too slow".into())
        }
    }
    let p = LinkProfile::shipped("fiber").expect("fiber");
    let err = commands(&Strategy::Unbloat, &p, &RouterDevs::new("wan0"), &Refuse).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot build strategy unbloat for link profile fiber: --down 0: too slow"
    );
}

/// The strategies that run a program have no command list: asking is an error, not an empty list
/// (which would read as `none`).
#[test]
fn programs_have_no_command_list() {
    let p = LinkProfile::shipped("adsl").expect("adsl");
    for s in [
        Strategy::Script("/x.sh".into()),
        Strategy::SqmScripts(SqmRecipe::Simple),
    ] {
        let err = commands(&s, &p, &RouterDevs::new("wan0"), &EchoPlanner).unwrap_err();
        assert!(
            err.to_string().contains("runs a program in the router"),
            "{err}"
        );
    }
}

#[test]
fn strategy_names_parse_back_and_lists_refuse_repeats() {
    for s in Strategy::ALL {
        assert_eq!(s.name().parse::<Strategy>(), Ok(s));
    }
    assert_eq!(
        parse_list("none, unbloat"),
        Ok(vec![Strategy::None, Strategy::Unbloat])
    );
    assert!(parse_list("none,none").unwrap_err().contains("twice"));
    assert!(parse_list("cake")
        .unwrap_err()
        .contains("sqm-piece-of-cake"));
}

#[test]
fn in_netns_puts_tc_and_ip_in_the_namespace_and_keeps_stdin() {
    let c = in_netns(&Cmd::tc(["-batch", "-"]).stdin("qdisc show\n"), "lab-rtr");
    assert_eq!(c.argv(), ["tc", "-n", "lab-rtr", "-batch", "-"]);
    assert_eq!(c.stdin.as_deref(), Some("qdisc show\n"));
    let c = in_netns(
        &Cmd::new("sysctl").args(["-w", "net.ipv4.ip_forward=1"]),
        "lab-rtr",
    );
    assert_eq!(
        c.display(),
        "ip netns exec lab-rtr sysctl -w net.ipv4.ip_forward=1"
    );
}

/// Every strategy x every shipped profile against its snapshot in tests/golden.
#[test]
fn every_combination_matches_its_golden_file() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("UNBLOAT_BLESS").is_some();
    let mut mismatches = Vec::new();
    for profile in crate::profile::shipped_names() {
        for strategy in Strategy::ALL {
            if strategy == Strategy::Unbloat {
                continue; // pinned by the shaper's own goldens; here only through the planner
            }
            let text = lines(strategy.clone(), profile).join("\n") + "\n";
            let path = dir.join(format!("{strategy}-{profile}.txt"));
            if bless {
                std::fs::create_dir_all(&dir).expect("golden dir");
                std::fs::write(&path, &text).expect("write golden");
                continue;
            }
            match std::fs::read_to_string(&path) {
                Ok(golden) if golden == text => {}
                Ok(golden) => mismatches.push(format!(
                    "{}:\n--- golden\n{golden}--- now\n{text}",
                    path.display()
                )),
                Err(e) => mismatches.push(format!("{}: {e}", path.display())),
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// The `unbloat` strategy is what `unbloat plan wan0 --down .. --up .. --link ..` prints: cake on
/// both sides with the profile's compensation, through an IFB, from the shaper crate itself.
#[test]
fn the_shaper_planner_gives_unbloats_own_plan_for_the_link() {
    let p = LinkProfile::shipped("vdsl2").expect("vdsl2");
    let cmds = commands(
        &Strategy::Unbloat,
        &p,
        &RouterDevs::new("wan0"),
        &ShaperPlanner,
    )
    .expect("plan");
    let text: Vec<String> = cmds.iter().map(Cmd::display).collect();
    let all = text.join("\n");
    assert!(all.contains("link add"), "{all}");
    assert!(all.contains("ifb4wan0"), "{all}");
    let batch = cmds
        .iter()
        .find_map(|c| c.stdin.clone())
        .expect("a tc -batch");
    let egress = batch
        .lines()
        .find(|l| l.contains("dev wan0 root") && l.contains("cake"))
        .expect("egress cake");
    assert!(egress.contains("bandwidth 19mbit"), "{egress}");
    assert!(
        egress.contains("overhead 26") && egress.contains("ptm"),
        "{egress}"
    );
    let ingress = batch
        .lines()
        .find(|l| l.contains("dev ifb4wan0 root") && l.contains("cake"))
        .expect("ingress cake");
    assert!(
        ingress.contains("bandwidth 76mbit") && ingress.contains("ingress"),
        "{ingress}"
    );
}

/// A profile's `[unbloat]` table reaches the plan: the variant, not the shipped defaults, is run.
#[test]
fn a_profiles_unbloat_table_changes_the_unbloat_strategy_only() {
    let shipped = LinkProfile::shipped("adsl").expect("adsl");
    let mut variant = shipped.clone();
    variant.unbloat =
        Some(toml::from_str("diffserv = \"diffserv4\"\nack-filter = true").expect("options"));
    let batch = |p: &LinkProfile, s: Strategy| -> String {
        commands(&s, p, &RouterDevs::new("wan0"), &ShaperPlanner)
            .expect("plan")
            .iter()
            .map(|c| c.stdin.clone().unwrap_or_else(|| c.display()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (plain, varied) = (
        batch(&shipped, Strategy::Unbloat),
        batch(&variant, Strategy::Unbloat),
    );
    assert!(
        plain.contains("besteffort") && !plain.contains(" ack-filter "),
        "{plain}"
    );
    assert!(
        varied.contains("diffserv4") && varied.contains(" ack-filter "),
        "{varied}"
    );
    assert_eq!(
        batch(&shipped, Strategy::SqmPieceOfCake),
        batch(&variant, Strategy::SqmPieceOfCake)
    );
}
