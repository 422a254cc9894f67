//! `unbloat-lab bench hostile`'s machinery on a small scale (issue 53 §3), against the real
//! daemon in the bench's own namespaces: a slow attack and a connect flood from every /64 of one
//! IPv6 /56, each address a client of its own, while another address loads the page. What
//! crates/measure/tests/hostile.rs and the daemon's own tests do not reach: the /56's cap across
//! real addresses of a real network, and the daemon process's threads under it.

mod common;

use std::time::Duration;
use unbloat_lab::bench_hostile::attack::Kind;
use unbloat_lab::bench_hostile::net::Source;
use unbloat_lab::bench_hostile::{run, HostileArgs, Target};

/// The daemon's page holds 32 connections from one /56 (crates/daemon/src/http.rs).
const PER_SLASH56: u64 = 32;

unbloat_testbed::real_kernel_test! {
    /// 200 connections from one /56, slow then as a flood: the other address is served every
    /// time, the /56 holds no more than its share, the rest get a 503 that says why, and the
    /// daemon's threads stay bounded by the cap (one per connection held, and its own).
    fn a_slash56_attacking_the_page_keeps_to_its_share_and_another_address_is_served() needs [] {
        let args = HostileArgs {
            connections: 200,
            seconds: 4.0,
            gap: Duration::from_secs(1),
            flood_rate: 300,
            targets: vec![Target::Page],
            attacks: vec![Kind::Slow, Kind::Flood],
            sources: vec![Source::OneSlash56],
        };
        let bench = run(&common::unbloat_exe(), &args, |_| {}).expect("the bench runs");
        assert_eq!(bench.cases.len(), 2);
        for c in &bench.cases {
            let what = format!("{} from {}: {c:#?}", c.attack.name(), c.source.name());
            assert!(c.legit.asked >= 2, "{what}");
            assert_eq!(c.legit.served, c.legit.asked, "{what}");
            assert!(c.outcomes.refused_503 > 0, "{what}");
            assert!(c.outcomes.held_at_end <= PER_SLASH56, "{what}");
            let why = c.outcomes.refusal.as_deref().unwrap_or_default();
            assert!(why.contains("fd53:0:0:53") && why.contains("already holds"), "{what}");
            // The /56's connections, the other client's one, and the daemon's own threads
            // (main, link events, two listeners, the keeper: under 16).
            assert!(c.server.peak.threads <= PER_SLASH56 + 1 + 16, "{what}");
        }
    }
}
