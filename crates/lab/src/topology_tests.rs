//! The topology's commands, checked without a kernel (tests/topology.rs builds it for real).

use super::*;
use unbloat_system::runner::RecordingRunner;

fn topo(profile: &str) -> Topology {
    Topology {
        prefix: "t".into(),
        profile: LinkProfile::shipped(profile).expect("profile"),
        ipv6: true,
    }
}

fn lines(cmds: &[Cmd]) -> Vec<String> {
    cmds.iter().map(Cmd::display).collect()
}

#[test]
fn modem_on_adsl_is_htb_at_line_rate_with_an_atm_stab_and_a_1000_packet_serialising_fifo() {
    // pppoe-llcsnap: 40 bytes over IP = 26 over what Linux counts on a veth (14-byte MAC header).
    assert_eq!(
        lines(&modem_commands(&LinkProfile::shipped("adsl").expect("adsl"))),
        [
            "tc qdisc add dev cpe0 root handle 1: stab overhead 26 mpu 0 linklayer atm htb default 1",
            "tc class add dev cpe0 parent 1: classid 1:1 htb rate 7000000bit ceil 7000000bit",
            "tc qdisc add dev cpe0 parent 1:1 handle 10: netem limit 1000 rate 7000000bit",
            "tc qdisc add dev isp0 root handle 1: stab overhead 26 mpu 0 linklayer atm htb default 1",
            "tc class add dev isp0 parent 1: classid 1:1 htb rate 768000bit ceil 768000bit",
            "tc qdisc add dev isp0 parent 1:1 handle 10: netem limit 1000 rate 768000bit",
        ]
    );
}

#[test]
fn modem_on_vdsl2_pays_ptm_in_the_rate_and_docsis_gets_its_mpu() {
    let v = lines(&modem_commands(
        &LinkProfile::shipped("vdsl2").expect("vdsl2"),
    ));
    // 80 Mbit/s x 64/65 = 78769230 bit/s; 26 - 14 = 12 bytes of stab overhead, ethernet.
    assert_eq!(v[0], "tc qdisc add dev cpe0 root handle 1: stab overhead 12 mpu 0 linklayer ethernet htb default 1");
    assert_eq!(
        v[1],
        "tc class add dev cpe0 parent 1: classid 1:1 htb rate 78769230bit ceil 78769230bit"
    );
    // The serialising FIFO runs at the same rate as the HTB class.
    assert_eq!(
        v[2],
        "tc qdisc add dev cpe0 parent 1:1 handle 10: netem limit 1000 rate 78769230bit"
    );
    let d = lines(&modem_commands(
        &LinkProfile::shipped("docsis").expect("docsis"),
    ));
    assert_eq!(d[0], "tc qdisc add dev cpe0 root handle 1: stab overhead 4 mpu 64 linklayer ethernet htb default 1");
}

#[test]
fn a_bytes_fifo_is_a_bfifo_in_front_of_a_serialising_netem() {
    let mut p = LinkProfile::shipped("fiber").expect("fiber");
    p.modem = Some(crate::profile::ModemSection {
        fifo_packets: None,
        fifo_bytes: Some("256k".parse().expect("size")),
    });
    // Issue 55: the bfifo on an IFB in front, the device's netem serialising behind it.
    let l = lines(&modem_commands(&p));
    assert_eq!(
        l[2],
        "tc qdisc add dev cpe0 parent 1:1 handle 10: netem limit 1000 rate 250000000bit"
    );
    assert_eq!(
        l[3..10],
        [
            "ip link add ifb4isp0 type ifb",
            "ip link set dev ifb4isp0 up",
            "tc qdisc add dev ifb4isp0 root handle 1: stab overhead 24 mpu 84 linklayer ethernet htb default 1",
            "tc class add dev ifb4isp0 parent 1: classid 1:1 htb rate 250000000bit ceil 250000000bit",
            "tc qdisc add dev ifb4isp0 parent 1:1 handle 10: bfifo limit 262144",
            "tc qdisc add dev isp0 handle ffff: ingress",
            "tc filter add dev isp0 parent ffff: protocol all prio 1 u32 match u32 0 0 action mirred egress redirect dev ifb4isp0",
        ]
    );
    assert!(l[10..].iter().any(|c| c.contains("redirect dev ifb4cpe0")));
}

#[test]
fn internet_delays_half_the_rtt_each_way_with_jitter_and_loss_when_asked() {
    let mut p = LinkProfile::shipped("fiber").expect("fiber");
    assert_eq!(
        lines(&internet_commands(&p)),
        [
            "tc qdisc add dev mdm0 root netem limit 100000 delay 10ms",
            "tc qdisc add dev srv0 root netem limit 100000 delay 10ms"
        ]
    );
    p.base_rtt = Some(Time::from_millis(45));
    p.jitter = Some(Time::from_millis(2));
    p.loss_percent = Some(0.5);
    assert_eq!(
        lines(&internet_commands(&p))[0],
        "tc qdisc add dev mdm0 root netem limit 100000 delay 22500us 2ms loss random 0.5%"
    );
}

#[test]
fn every_node_routes_to_every_link_it_is_not_on() {
    let t = topo("vdsl2");
    let all = lines(&t.build_commands());
    let routes: Vec<&String> = all.iter().filter(|l| l.contains(" route add ")).collect();
    // lan: links 2,3,4 via router; rtr: 3,4 via modem; mdm: 1 via rtr, 4 via inet; inet: 1,2 via
    // modem; srv: 1,2,3 via inet. 12 routes, each for IPv4 and IPv6.
    assert_eq!(routes.len(), 24, "{routes:#?}");
    assert!(all.contains(&"ip -n t-lan route add 10.77.4.0/24 via 10.77.1.2".to_string()));
    assert!(all.contains(&"ip -n t-mdm route add 10.77.1.0/24 via 10.77.2.1".to_string()));
    assert!(all.contains(&"ip -n t-mdm route add 10.77.4.0/24 via 10.77.3.2".to_string()));
    assert!(all.contains(&"ip -n t-srv -6 route add fd77:0:0:1::/64 via fd77:0:0:4::1".to_string()));
    assert!(all.contains(
        &"ip netns exec t-rtr sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1"
            .to_string()
    ));
    assert!(!all.iter().any(|l| l.contains("t-lan sysctl")));
    assert_eq!(t.server_addr().to_string(), "10.77.4.2");
    assert_eq!(
        t.server_addr_v6().map(|a| a.to_string()).as_deref(),
        Some("fd77:0:0:4::2")
    );
}

#[test]
fn veths_are_made_inside_the_namespaces_never_in_the_callers() {
    let all = lines(&topo("fiber").build_commands());
    assert!(
        all.contains(&"ip -n t-rtr link add wan0 type veth peer name cpe0 netns t-mdm".to_string())
    );
    for l in &all {
        assert!(
            l.starts_with("ip -n t-")
                || l.starts_with("tc -n t-")
                || l.starts_with("ip netns exec t-"),
            "{l}"
        );
    }
}

#[test]
fn prefixes_are_unique_and_short_enough_for_names() {
    let (a, b) = (run_prefix(), run_prefix());
    assert_ne!(a, b);
    assert!(a.starts_with(&format!("ubl{}x", std::process::id())));
}

#[test]
fn a_failed_build_step_removes_the_namespaces_it_made() {
    // The 3rd netns add fails: the first two must be deleted again, and the error must quote it.
    let runner = RecordingRunner::new().fail_when(
        |c| c.args.iter().any(|a| a == "t-mdm") && c.args[1] == "add",
        1,
        "boom",
    );
    let err = LiveTopology::build(topo("fiber"), &runner)
        .err()
        .expect("must fail");
    assert!(err.to_string().contains("ip netns add t-mdm"), "{err}");
    let dels: Vec<String> = runner
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("ip netns del"))
        .collect();
    assert_eq!(dels, ["ip netns del t-lan", "ip netns del t-rtr"]);
}
