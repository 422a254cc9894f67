//! A real run between two network namespaces through a router namespace whose veths are shaped
//! to 20 Mbit/s with the host kernel's HTB (IPv4 for the deep FIFO, IPv6 for the short one): the measured goodput must match the link's theoretical TCP goodput, and
//! latency under load must rise with a deep FIFO and stay low with a short one. Needs root.

mod common;

use std::net::{IpAddr, SocketAddr};

use common::{mean_goodput, quantile, rtts, Running};
use unbloat_measure::{NoProgress, ServeOptions};
use unbloat_report::{Direction, Results};
use unbloat_testbed::netns::{self, Testbed};

const RATE: f64 = 20e6;

/// Runs `profile` from namespace b against a server in namespace a listening on `server_ip`.
fn run_between(pair: &Testbed, server_ip: IpAddr, profile: &str, load: f64) -> Results {
    let listen = SocketAddr::new(server_ip, 0);
    let server = pair
        .a
        .run_in(move || {
            Running::start(ServeOptions {
                listen: Some(listen),
                log: false,
                ..Default::default()
            })
        })
        .expect("enter namespace a")
        .join()
        .expect("server starts");
    let remote = server.addr.to_string();
    let profile = profile.to_string();
    let results = pair
        .b
        .run_in(move || {
            unbloat_measure::run_plan(
                &common::plan(&remote, &profile, Some(4), 1.0, load),
                &mut NoProgress,
            )
        })
        .expect("enter namespace b")
        .join()
        .expect("client thread");
    drop(server);
    results.expect("run between namespaces")
}

#[test]
fn shaped_veth_goodput_and_bloat() {
    let bed = Testbed::new().expect("namespaces and veths (needs root)");
    let expected = netns::tcp_goodput(
        RATE,
        1500,
        netns::IPV4_HEADER,
        netns::TCP_HEADER_TS,
        netns::ETHERNET_HEADER,
    );

    // A FIFO of 30 packets (18 ms at 20 Mbit/s): enough to keep the link busy (the path's own
    // round trip is 0.1 ms), short enough that the goodput window is not blurred by deliveries
    // held up a long round trip behind a loss. IPv4.
    bed.shape_htb(RATE as u64, 30).expect("htb");
    let short = run_between(&bed, bed.ip4_a.into(), "tcp_ndown", 3.0);
    // Skip the first second of load: slow start has not settled yet.
    let (from, to) = (short.phases.load_start() + 1.0, short.phases.load_end());
    let goodput = mean_goodput(&short, Direction::Down, from, to);
    let idle = quantile(rtts(&short, "UDP BE", 0.0, short.phases.load_start()), 0.5);
    let loaded = quantile(rtts(&short, "UDP BE", from, to), 0.5);
    eprintln!(
        "short FIFO: goodput {:.3} Mbit/s (expected {:.3}), idle {idle:.2} ms, loaded {loaded:.2} ms",
        goodput / 1e6,
        expected / 1e6
    );
    let error = (goodput - expected).abs() / expected;
    assert!(
        error < 0.04,
        "goodput {:.2} Mbit/s vs expected {:.2} Mbit/s ({:.1} % off)",
        goodput / 1e6,
        expected / 1e6,
        error * 100.0
    );
    assert!(idle < 5.0, "idle RTT {idle:.2} ms on a veth");
    assert!(
        loaded - idle < 25.0,
        "short FIFO: loaded {loaded:.1} ms vs idle {idle:.1} ms"
    );
    // The metadata found the client's interface and read its qdiscs.
    assert_eq!(
        short.metadata.egress_iface.as_deref(),
        Some(bed.dev_b.as_str())
    );
    assert!(
        !short.metadata.qdiscs.records().is_empty(),
        "{:?}",
        short.metadata.qdiscs
    );

    // A deep FIFO: 1000 packets, about 600 ms at 20 Mbit/s, a bloated modem. IPv6.
    bed.shape_htb(RATE as u64, 1000).expect("htb");
    let deep = run_between(&bed, bed.ip6_a.into(), "tcp_ndown", 3.0);
    let (from, to) = (deep.phases.load_start() + 1.0, deep.phases.load_end());
    let idle = quantile(rtts(&deep, "UDP BE", 0.0, deep.phases.load_start()), 0.5);
    let loaded = quantile(rtts(&deep, "UDP BE", from, to), 0.5);
    eprintln!("deep FIFO: idle {idle:.2} ms, loaded {loaded:.1} ms");
    assert!(
        loaded - idle > 100.0,
        "deep FIFO: loaded {loaded:.1} ms vs idle {idle:.1} ms"
    );
}
