//! The attribution on made-up runs whose every queue is known: 2 s idle, 10 s of load, 1 s idle,
//! a probe of each hop every 50 ms.

use super::*;
use crate::model::Phase;
use crate::model::{BacklogSample, Direction, Phases, ProbeKind, StreamSeries};

const PHASES: Phases = Phases {
    idle_before_s: 2.0,
    load_s: 10.0,
    idle_after_s: 1.0,
};

/// Added one-way delays under load (up, down), ms, and whether probes are answered then.
#[derive(Clone, Copy)]
struct Queue {
    up: f64,
    down: f64,
    answered: bool,
}

const NONE: Queue = Queue {
    up: 0.0,
    down: 0.0,
    answered: true,
};

fn q(up: f64, down: f64) -> Queue {
    Queue {
        up,
        down,
        answered: true,
    }
}

/// A series with a 10 ms idle trip each way (a little jitter), and `loaded` during the load;
/// without one-way delays when `one_way` is false.
fn series(name: &str, kind: ProbeKind, hop: Hop, loaded: Queue, one_way: bool) -> ProbeSeries {
    let samples = (0..260)
        .map(|i| {
            let t = f64::from(i) * 0.05;
            let jitter = f64::from(i % 7) * 0.1;
            let under = PHASES.phase_of(t) == Phase::Loaded;
            let (up, down) = if under {
                (10.0 + loaded.up + jitter, 10.0 + loaded.down + jitter)
            } else {
                (10.0 + jitter, 10.0 + jitter)
            };
            let answered = !under || loaded.answered;
            ProbeSample {
                t,
                rtt_ms: answered.then_some(up + down),
                owd_up_ms: (answered && one_way).then_some(up),
                owd_down_ms: (answered && one_way).then_some(down),
                send_lag_ms: 0.0,
            }
        })
        .collect();
    ProbeSeries {
        name: name.into(),
        kind,
        dscp: 0,
        interval_ms: 50.0,
        samples,
        hop,
    }
}

/// A run whose far end sees `far` and whose gateway sees `gateway` (`None`: not probed).
fn run(far: Queue, gateway: Option<Queue>, one_way: bool) -> Results {
    let mut r = crate::synthetic::rrul(0);
    r.phases = PHASES;
    r.probes = vec![series("UDP BE", ProbeKind::Udp, Hop::FarEnd, far, one_way)];
    if let Some(g) = gateway {
        r.probes.push(series(
            "gateway ICMP",
            ProbeKind::Icmp,
            Hop::Gateway,
            g,
            one_way,
        ));
    }
    r
}

fn findings(l: &Location, way: Way) -> Vec<Place> {
    l.ways
        .iter()
        .find(|w| w.way == way)
        .map(|w| w.findings.clone())
        .unwrap_or_default()
}

fn share(l: &Location, way: Way, place: Place) -> f64 {
    let w = l.ways.iter().find(|w| w.way == way).expect("the way");
    w.shares
        .iter()
        .find(|s| s.place == place)
        .expect("the place")
        .p95_ms
}

#[test]
fn a_bloated_modem_is_behind_the_gateway() {
    let l = locate(&run(q(0.0, 120.0), Some(NONE), true)).expect("located");
    assert_eq!(l.gateway, Gateway::Answered);
    assert_eq!(findings(&l, Way::Down), [Place::Beyond]);
    assert!(findings(&l, Way::Up).is_empty());
    assert!((share(&l, Way::Down, Place::Beyond) - 120.0).abs() < 1.0);
    assert!(
        l.advice
            .iter()
            .any(|a| a.contains("behind your gateway, in the download")),
        "{:?}",
        l.advice
    );
    assert!(l.ways[0].sureness > 0.9, "{:?}", l.ways);
}

#[test]
fn a_bloated_access_point_is_the_first_hop_and_the_wan_is_not_blamed() {
    // The far end's probes cross the access point's queue too: they see it and a little more.
    let l = locate(&run(q(82.0, 0.0), Some(q(80.0, 0.0)), true)).expect("located");
    assert_eq!(findings(&l, Way::Up), [Place::FirstHop]);
    assert!(findings(&l, Way::Down).is_empty());
    assert!(
        l.advice
            .iter()
            .any(|a| a.contains("shaping the WAN will not help")),
        "{:?}",
        l.advice
    );
    assert!(
        !l.advice.iter().any(|a| a.contains("behind your gateway")),
        "{:?}",
        l.advice
    );
}

#[test]
fn queues_on_both_hops_in_opposite_directions_are_each_found() {
    // The first hop holds 50 ms of download; the access link 100 ms of upload.
    let l = locate(&run(q(100.0, 50.0), Some(q(0.0, 50.0)), true)).expect("located");
    assert_eq!(findings(&l, Way::Down), [Place::FirstHop]);
    assert_eq!(findings(&l, Way::Up), [Place::Beyond]);
    // Both hops in the same direction: both found, the larger first.
    let l = locate(&run(q(0.0, 150.0), Some(q(0.0, 40.0)), true)).expect("located");
    assert_eq!(findings(&l, Way::Down), [Place::Beyond, Place::FirstHop]);
}

#[test]
fn a_gateway_that_drops_icmp_or_none_probed_cannot_tell_the_first_hop_and_blames_no_hop() {
    let silent = Queue {
        answered: false,
        ..NONE
    };
    for gateway in [Some(silent), None] {
        let l = locate(&run(q(0.0, 120.0), gateway, true)).expect("located");
        match gateway {
            Some(_) => assert!(
                matches!(l.gateway, Gateway::Silent { .. }),
                "{:?}",
                l.gateway
            ),
            None => assert_eq!(l.gateway, Gateway::NotProbed),
        }
        assert_eq!(findings(&l, Way::Down), [Place::PastThisMachine]);
        assert!(
            l.advice[0].starts_with("cannot tell the first hop"),
            "{:?}",
            l.advice
        );
        assert!(!l.advice.iter().any(|a| a.contains("behind your gateway")
            || a.contains("between this machine and its gateway")));
    }
}

#[test]
fn a_gateway_slow_to_answer_is_its_cpu_not_a_queue() {
    // The gateway's own answers take 60 ms more; the far end's probes, which cross it, do not.
    let l = locate(&run(q(2.0, 2.0), Some(q(30.0, 30.0)), true)).expect("located");
    assert!(
        matches!(l.gateway, Gateway::SlowToAnswer { excess_ms } if excess_ms > 50.0),
        "{:?}",
        l.gateway
    );
    assert!(
        !l.ways.iter().any(|w| w.findings.contains(&Place::FirstHop)),
        "{:?}",
        l.ways
    );
    assert!(l.advice[0].contains("CPU"), "{:?}", l.advice);
}

#[test]
fn a_late_gateway_is_found_in_the_way_it_is_late_even_when_the_round_trip_hides_it() {
    // The modem holds 200 ms down and 550 up; the gateway answers 400 ms late, after its stamp
    // (in its download). Its round trip (400) is below the far end's (750): only the way tells.
    let l = locate(&run(q(550.0, 200.0), Some(q(0.0, 400.0)), true)).expect("located");
    assert!(
        matches!(l.gateway, Gateway::SlowToAnswer { excess_ms } if (excess_ms - 200.0).abs() < 5.0),
        "{:?}",
        l.gateway
    );
    assert!(
        l.ways
            .iter()
            .all(|w| !w.findings.contains(&Place::FirstHop)),
        "{:?}",
        l.ways
    );
    // Without one-way delays the round trip cannot tell, and the gateway is read as it is.
    let rt = locate(&run(q(550.0, 200.0), Some(q(0.0, 400.0)), false)).expect("located");
    assert_eq!(rt.gateway, Gateway::Answered);
}

#[test]
fn this_machines_own_backlog_is_its_share_of_the_upload() {
    let mut r = run(q(45.0, 0.0), Some(q(42.0, 0.0)), true);
    // 10 Mbit/s of upload over the 10 s load, and 25,000 bytes in the qdisc: 20 ms.
    r.streams = vec![StreamSeries {
        name: "TCP upload".into(),
        direction: Direction::Up,
        dscp: 0,
        samples: vec![],
        total_bytes: 12_500_000,
    }];
    r.backlog = (0..130)
        .map(|i| BacklogSample {
            t: f64::from(i) * 0.1,
            bytes: if PHASES.phase_of(f64::from(i) * 0.1) == Phase::Loaded {
                25_000
            } else {
                0
            },
        })
        .collect();
    let l = locate(&r).expect("located");
    assert!(
        (share(&l, Way::Up, Place::ThisMachine) - 20.0).abs() < 0.5,
        "{:?}",
        l.ways
    );
    assert!(
        (share(&l, Way::Up, Place::FirstHop) - 22.0).abs() < 1.0,
        "{:?}",
        l.ways
    );
    assert_eq!(findings(&l, Way::Up), [Place::FirstHop, Place::ThisMachine]);
    assert!(
        l.advice
            .iter()
            .any(|a| a.contains("this machine's own egress")),
        "{:?}",
        l.advice
    );
}

#[test]
fn without_one_way_delays_the_round_trip_is_attributed() {
    let l = locate(&run(q(0.0, 120.0), Some(NONE), false)).expect("located");
    assert_eq!(l.ways.len(), 1);
    assert_eq!(findings(&l, Way::RoundTrip), [Place::Beyond]);
}

#[test]
fn a_quiet_run_has_no_finding() {
    let l = locate(&run(q(1.0, 1.0), Some(q(1.0, 1.0)), true)).expect("located");
    assert!(l.ways.iter().all(|w| w.findings.is_empty()), "{:?}", l.ways);
    assert!(l.advice.is_empty(), "{:?}", l.advice);
}

#[test]
fn the_summary_carries_the_location_only_when_the_run_measured_it() {
    let with = crate::Summary::from_results(&run(q(0.0, 120.0), Some(NONE), true));
    let l = with
        .location
        .as_ref()
        .expect("a run with the gateway's probes is located");
    assert_eq!(findings(l, Way::Down), [Place::Beyond]);
    let text = crate::render_text(&with);
    assert!(text.contains("Where the queue stands"), "{text}");
    assert!(
        text.contains("behind your gateway, in the download"),
        "{text}"
    );
    let json = serde_json::to_value(&with).expect("json");
    assert_eq!(
        json["location"]["ways"][0]["findings"][0], "beyond",
        "{json}"
    );
    // Without the gateway's probes and the backlog, nothing is claimed (nor printed).
    let without = crate::Summary::from_results(&run(q(0.0, 120.0), None, true));
    assert!(without.location.is_none());
    assert!(!crate::render_text(&without).contains("Where the queue stands"));
}
