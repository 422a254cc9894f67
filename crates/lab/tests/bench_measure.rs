//! The lab's accuracy benchmarks of the measuring engine (crates/lab/src/bench_measure), checked
//! on this machine: moved here from unbloat-measure with the code they test (the product's
//! crate holds no benchmark code).

use std::time::Duration;

use unbloat_lab::bench_measure::http::load_cpu_cost;
use unbloat_lab::bench_measure::iperf3::{compare_with_iperf3_client, Comparison};
use unbloat_report::Direction;
use unbloat_testbed::netns::Testbed;

// The measure crate's nginx for its HTTP far-end tests; only part of it is used here.
#[path = "../../measure/tests/common/nginx.rs"]
#[allow(dead_code)]
mod nginx;
use nginx::Nginx;

// --- Accuracy against iperf3's own client ----------------------------------------------------

#[test]
fn goodput_matches_iperf3s_client_through_a_shaped_router() {
    let bed = Testbed::new().expect("namespaces (run as root)");
    bed.shape_htb(20_000_000, 100).expect("HTB");
    for direction in [Direction::Down, Direction::Up] {
        let what = Comparison {
            direction,
            streams: 4,
            skip: Duration::from_secs(2),
            measure: Duration::from_secs(6),
        };
        let c = compare_with_iperf3_client(Some(&bed.a), Some(&bed.b), bed.ip4_a.into(), &what)
            .expect("comparison runs");
        eprintln!(
            "{direction:?}: unbloat {:.3} Mbit/s, iperf3 {:.3} Mbit/s, ratio {:.4}; {:?}",
            c.unbloat_bps / 1e6,
            c.iperf3_bps / 1e6,
            c.ratio,
            c.notes
        );
        assert!(c.iperf3_bps > 15e6 && c.iperf3_bps < 20e6, "{c:?}");
        assert!((c.ratio - 1.0).abs() <= 0.03, "{direction:?}: {c:?}");
    }
}

/// Prints what the HTTP load costs on loopback (CPU seconds per Gbit/s of goodput, both
/// ends on this machine). A measurement, not a check: `cargo test --release -- --ignored`.
#[test]
#[ignore = "a measurement, not a check: run it with --ignored to print the numbers"]
fn cpu_cost_of_the_load_on_loopback() {
    let nginx = Nginx::start(true);
    let opts = nginx.opts();
    let target = unbloat_measure::http::discover(&nginx.config_url(), &opts).expect("discover");
    for direction in [Direction::Down, Direction::Up] {
        let cost = load_cpu_cost(&target, direction, Duration::from_secs(5), &opts).expect("load");
        eprintln!(
            "{direction:?}: {:.2} Gbit/s over {} connections, user {:.2} s + system {:.2} s \
             in {:.1} s = {:.2} CPU s per Gbit",
            cost.bps() / 1e9,
            cost.connections,
            cost.user_s,
            cost.system_s,
            cost.seconds,
            cost.cpu_s_per_gbit()
        );
    }
}
