//! A change on trial (`--confirm`) lasts its time whatever the wall clock does: an NTP step back
//! must not extend it (every other change is refused meanwhile) and a step forward must not cut
//! it short (a router without a real-time clock steps by hours at boot). Issue 36, item 3: a
//! 15 s trial was still in place 25 s after `date -s "-1 hour"`.
//!
//! The body steps the clock with `date -s`, so it runs only in a User-Mode Linux guest, whose
//! clock is its own: never on the host's.

mod common;

use common::{text, Netns};
use std::time::{Duration, Instant};

const NEEDS: &[&str] = &["cake", "fq_codel", "htb", "ingress"];

fn ok(ns: &Netns, args: &[&str]) -> String {
    let out = ns.unbloat(args);
    assert!(
        out.status.success(),
        "unbloat {args:?} failed:\n{}",
        text(&out)
    );
    text(&out)
}

/// Sleeps until `secs` after `t0` (a monotonic instant: `date -s` does not move it).
fn until(t0: Instant, secs: u64) {
    std::thread::sleep(Duration::from_secs(secs).saturating_sub(t0.elapsed()));
}

#[test]
fn a_trial_lasts_its_time_when_the_wall_clock_steps() {
    if !unbloat_testbed::kernel::in_guest() {
        let ran_here = unbloat_testbed::kernel::run_test_in_uml(
            concat!(
                module_path!(),
                "::a_trial_lasts_its_time_when_the_wall_clock_steps"
            ),
            NEEDS,
        );
        assert!(
            !ran_here,
            "forced to User-Mode Linux, the body runs in the guest"
        );
        return;
    }
    let ns = Netns::new();
    ok(&ns, &["start", "eth0", "--down", "20mbit", "--up", "5mbit"]);
    let old = ns.snapshot();
    let trial = |secs: &'static str| {
        [
            "start",
            "eth0",
            "--down",
            "50mbit",
            "--up",
            "10mbit",
            "--qdisc",
            "fq_codel",
            "--confirm",
            secs,
        ]
    };

    // A step back an hour: the watchdog still undoes the change after its 6 s.
    let t0 = Instant::now();
    ok(&ns, &trial("6"));
    assert_ne!(ns.snapshot(), old, "the change on trial was not made");
    common::must("date -s '-1 hour' >/dev/null");
    until(t0, 12);
    let back = ns.snapshot();
    common::must("date -s '+1 hour' >/dev/null");
    assert_eq!(
        back, old,
        "a step of the clock back extended the trial past its 6 s (12 s later still on trial)"
    );

    // A step forward an hour: the change stays on trial, and `confirm` keeps it.
    let t0 = Instant::now();
    ok(&ns, &trial("20"));
    let new = ns.snapshot();
    assert_ne!(new, old, "the change on trial was not made");
    common::must("date -s '+1 hour' >/dev/null");
    std::thread::sleep(Duration::from_secs(2));
    let after_step = ns.snapshot();
    let confirmed = ns.unbloat(&["confirm"]);
    common::must("date -s '-1 hour' >/dev/null");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "too slow to confirm within the trial: {:?}",
        t0.elapsed()
    );
    assert_eq!(
        after_step, new,
        "a step of the clock forward cut the trial short"
    );
    assert!(
        confirmed.status.success() && text(&confirmed).contains("confirmed"),
        "confirm after a step forward: {}",
        text(&confirmed)
    );
    until(t0, 23);
    assert_eq!(ns.snapshot(), new, "a confirmed change was undone");
    ok(&ns, &["stop", "eth0"]);
}
