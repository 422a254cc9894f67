//! The sweep's plan (pure) and a real sweep over loopback (needs unprivileged ICMP sockets or
//! root, as `make test` runs).

use super::*;

fn plan(sizes: &[u16], rounds: u32) -> SweepPlan {
    SweepPlan {
        ip_bytes: sizes.to_vec(),
        rounds,
        interval: Duration::from_millis(1),
        grace: Duration::from_millis(500),
        seed: 7,
    }
}

#[test]
fn every_round_sends_every_size_once_in_an_order_of_its_own() {
    let p = SweepPlan::default();
    assert_eq!(p.ip_bytes.len(), 193);
    assert_eq!(p.duration(), Duration::from_millis(193 * 10 * 10 + 1000));
    let order = p.schedule();
    assert_eq!(order.len(), p.echoes());
    let rounds: Vec<Vec<u16>> = (0..p.rounds)
        .map(|r| {
            order
                .iter()
                .filter(|(k, _)| *k == r)
                .map(|(_, s)| *s)
                .collect()
        })
        .collect();
    for (r, sizes) in rounds.iter().enumerate() {
        let mut sorted = sizes.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, p.ip_bytes, "round {r} is a permutation");
        assert_ne!(*sizes, p.ip_bytes, "round {r} is shuffled");
    }
    assert_ne!(rounds[0], rounds[1]);
    assert_eq!(order, p.schedule(), "the same plan sends in the same order");
    // Drift cannot tilt the line: on average every size sits mid-round. The mean position of
    // the smallest and the largest quarter of sizes differ by little.
    let mean_pos = |pick: &dyn Fn(u16) -> bool| {
        let pos: Vec<f64> = rounds
            .iter()
            .flat_map(|r| {
                r.iter()
                    .enumerate()
                    .filter(|(_, &s)| pick(s))
                    .map(|(i, _)| i as f64)
            })
            .collect();
        pos.iter().sum::<f64>() / pos.len() as f64
    };
    let (small, large) = (mean_pos(&|s| s < 112), mean_pos(&|s| s > 208));
    assert!((small - large).abs() < 15.0, "{small} vs {large}");
}

#[test]
fn plans_are_checked_against_the_address_family() {
    assert!(plan(&[40, 1500], 1).validate(false).is_ok());
    let err = plan(&[40], 1).validate(true).unwrap_err().to_string();
    assert!(err.contains("IPv6 echoes are 60..=1500"), "{err}");
    assert!(plan(&[39], 1).validate(false).is_err());
    assert!(plan(&[1501], 1).validate(false).is_err());
    assert!(plan(&[], 1).validate(false).is_err());
    assert!(plan(&[64], 0).validate(false).is_err());
    let mut fast = plan(&[64], 1);
    fast.interval = Duration::from_micros(100);
    assert!(fast
        .validate(false)
        .unwrap_err()
        .to_string()
        .contains("no floods"));
}

fn sweep(target: &str, sizes: &[u16]) -> SweepSamples {
    let stop = AtomicBool::new(false);
    let mut calls = 0;
    let got = run(&plan(sizes, 3), target.parse().unwrap(), &stop, &mut |p| {
        calls += 1;
        assert_eq!(p.sent, calls);
        assert_eq!(p.total, sizes.len() * 3);
    })
    .expect("a loopback sweep");
    assert_eq!(calls, sizes.len() * 3);
    got
}

#[test]
fn a_loopback_sweep_answers_every_size_both_families() {
    for (target, sizes, v6) in [
        ("127.0.0.1", vec![40u16, 64, 65, 200, 1500], false),
        ("::1", vec![60u16, 64, 257, 1500], true),
    ] {
        let s = sweep(target, &sizes);
        assert_eq!(s.ipv6, v6);
        assert!(!s.stopped);
        assert_eq!(s.echoes.len(), sizes.len() * 3);
        assert_eq!(s.lost(), 0, "{target}: {:?}", s.echoes);
        for e in &s.echoes {
            assert!(sizes.contains(&e.ip_bytes));
            let rtt = e.rtt_ns.expect("answered");
            assert!(rtt < 200_000_000, "{target} {} bytes: {rtt} ns", e.ip_bytes);
        }
        let sent: Vec<u64> = s.echoes.iter().map(|e| e.sent_ns).collect();
        assert!(sent.windows(2).all(|w| w[0] < w[1]), "in send order");
    }
}

#[test]
fn the_stop_flag_ends_the_sweep_with_what_it_has() {
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let mut long = plan(&(64..=256).collect::<Vec<_>>(), 50);
    long.interval = Duration::from_millis(5);
    let got = run(&long, "127.0.0.1".parse().unwrap(), &stop, &mut |p| {
        if p.sent == 5 {
            stop.store(true, Ordering::Relaxed);
        }
    })
    .expect("stopped, not failed");
    assert!(got.stopped);
    assert_eq!(got.echoes.len(), 5);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
