use super::*;
use crate::model::{Metadata, ProbeSample, ThroughputSample, RESULTS_VERSION};
use crate::synthetic;
use proptest::prelude::*;

fn probe(name: &str, kind: ProbeKind, dscp: u8, samples: &[(f64, Option<f64>)]) -> ProbeSeries {
    ProbeSeries {
        name: name.into(),
        kind,
        dscp,
        interval_ms: 200.0,
        hop: Default::default(),
        samples: samples
            .iter()
            .map(|&(t, rtt_ms)| ProbeSample {
                t,
                rtt_ms,
                owd_up_ms: None,
                owd_down_ms: None,
                send_lag_ms: t / 100.0,
            })
            .collect(),
    }
}

/// A stream at `bps` during the load of `phases` and 0 outside, 200 ms samples.
fn stream(name: &str, direction: Direction, bps: f64, phases: &Phases) -> StreamSeries {
    let n = (phases.total() / 0.2).round() as usize;
    let samples = (1..=n)
        .map(|k| {
            let t = k as f64 * 0.2;
            let on = phases.phase_of(t - 0.1) == Phase::Loaded;
            ThroughputSample {
                t,
                bps: if on { bps } else { 0.0 },
            }
        })
        .collect();
    StreamSeries {
        name: name.into(),
        direction,
        dscp: 0,
        samples,
        total_bytes: 0,
    }
}

fn results(phases: Phases, streams: Vec<StreamSeries>, probes: Vec<ProbeSeries>) -> Results {
    let mut r = synthetic::rrul(0);
    r.version = RESULTS_VERSION;
    r.phases = phases;
    r.streams = streams;
    r.probes = probes;
    r
}

const PH: Phases = Phases {
    idle_before_s: 2.0,
    load_s: 4.0,
    idle_after_s: 2.0,
};

fn hand_made() -> Results {
    let be = probe(
        "UDP BE",
        ProbeKind::Udp,
        0,
        &[
            (0.0, Some(10.0)),
            (0.5, Some(12.0)),
            (1.0, Some(11.0)),
            (2.0, Some(50.0)), // first loaded probe: boundary belongs to the load
            (2.5, Some(90.0)),
            (3.0, None),
            (3.5, Some(60.0)),
            (4.0, Some(80.0)),
            (4.5, Some(70.0)),
            (6.5, Some(500.0)), // idle tail: neither idle baseline nor load
        ],
    );
    let icmp = probe(
        "ICMP",
        ProbeKind::Icmp,
        0,
        &[(0.0, Some(5.0)), (3.0, Some(5.0))],
    );
    results(
        PH,
        vec![
            stream("TCP upload 1", Direction::Up, 4e6, &PH),
            stream("TCP upload 2", Direction::Up, 6e6, &PH),
            stream("TCP download 1", Direction::Down, 30e6, &PH),
        ],
        vec![icmp, be],
    )
}

#[test]
fn latency_figures_of_a_hand_made_run() {
    let s = Summary::from_results(&hand_made());
    // UDP BE is the primary class even though ICMP comes first.
    assert_eq!(s.primary_probe.as_deref(), Some("UDP BE"));
    let be = &s.probes[1];
    assert_eq!(be.idle_median_ms, Some(11.0));
    // Loaded RTTs: 50, 60, 70, 80, 90 (the lost one and the tail excluded).
    assert_eq!(be.loaded_p50_ms, Some(70.0));
    assert_eq!(be.loaded_p90_ms, Some(86.0));
    assert_eq!(be.induced_p50_ms, Some(59.0));
    assert_eq!((be.sent, be.lost), (10, 1));
    assert_eq!(be.loss_ratio, Some(0.1));
    assert_eq!(be.loaded_loss_ratio, Some(1.0 / 6.0));
    assert_eq!(s.idle_latency_ms, Some(11.0));
    assert_eq!(s.induced_latency_ms, Some(59.0));
    assert_eq!(s.grade, Some(Grade::B));
    assert_eq!(s.rpm, Some(60_000.0 / 70.0));
    // ICMP: idle 5, loaded 5, no induced latency.
    assert_eq!(s.probes[0].induced_p50_ms, Some(0.0));
}

#[test]
fn throughput_figures_of_a_hand_made_run() {
    let s = Summary::from_results(&hand_made());
    let up = s.upload.goodput_bps.expect("upload goodput");
    assert!((up - 10e6).abs() < 1.0, "{up}");
    // (4 + 6)^2 / (2 * (16 + 36)) = 100 / 104
    assert!((s.upload.fairness.expect("fairness") - 100.0 / 104.0).abs() < 1e-12);
    assert!((s.download.goodput_bps.expect("download") - 30e6).abs() < 1.0);
    // One stream: fairness is not reported.
    assert_eq!(s.download.fairness, None);
    assert_eq!(s.upload.streams.len(), 2);
}

#[test]
fn goodput_counts_intervals_by_their_midpoint() {
    // Load [2, 6): the interval ending at 2.2 (midpoint 2.1) is loaded, the one ending at 2.0 is
    // not. A stream that only moved data in the interval ending at 2.0 has zero goodput.
    let mut st = stream("s", Direction::Up, 0.0, &PH);
    for sample in &mut st.samples {
        if (sample.t - 2.0).abs() < 1e-9 {
            sample.bps = 1e9;
        }
    }
    assert_eq!(stream_goodput(&st, &PH, 0.2), Some(0.0));
}

#[test]
fn empty_results_give_nones_not_panics() {
    let r = results(PH, Vec::new(), Vec::new());
    let s = Summary::from_results(&r);
    assert_eq!(s.primary_probe, None);
    assert_eq!(
        (s.idle_latency_ms, s.induced_latency_ms, s.grade, s.rpm),
        (None, None, None, None)
    );
    assert_eq!(s.upload.goodput_bps, None);
    assert_eq!(s.download.fairness, None);
    let text = render_text(&s);
    assert!(text.contains("Bufferbloat grade: -"), "{text}");
}

#[test]
fn every_probe_lost_means_full_loss_and_no_grade() {
    let lost: Vec<(f64, Option<f64>)> = (0..40).map(|i| (f64::from(i) * 0.2, None)).collect();
    let r = results(
        PH,
        Vec::new(),
        vec![probe("UDP BE", ProbeKind::Udp, 0, &lost)],
    );
    let s = Summary::from_results(&r);
    assert_eq!(s.probes[0].loss_ratio, Some(1.0));
    assert_eq!(s.grade, None);
    assert_eq!(s.rpm, None);
}

#[test]
fn run_cut_short_during_the_load_still_summarises() {
    // No idle baseline at all (the idle phase was lost), load data only: latency under load is
    // known, induced latency and grade are not.
    let phases = Phases {
        idle_before_s: 0.0,
        load_s: 10.0,
        idle_after_s: 0.0,
    };
    let r = results(
        phases,
        Vec::new(),
        vec![probe("UDP BE", ProbeKind::Udp, 0, &[(1.0, Some(40.0))])],
    );
    let s = Summary::from_results(&r);
    assert_eq!(s.probes[0].loaded_p50_ms, Some(40.0));
    assert_eq!(s.induced_latency_ms, None);
    assert_eq!(s.grade, None);
    assert_eq!(s.rpm, Some(1500.0));
}

#[test]
fn synthetic_bloated_run_grades_c() {
    // The synthetic link adds ~130 ms at full load on 20 ms idle.
    let s = Summary::from_results(&synthetic::rrul(3));
    assert_eq!(s.grade, Some(Grade::C), "{s:?}");
    let idle = s.idle_latency_ms.expect("idle");
    assert!((20.0..22.0).contains(&idle), "{idle}");
    let up = s.upload.goodput_bps.expect("up");
    let down = s.download.goodput_bps.expect("down");
    assert!((up / 10e6 - 1.0).abs() < 0.15, "{up}");
    assert!((down / 50e6 - 1.0).abs() < 0.15, "{down}");
    assert!(s.upload.fairness.expect("fairness") > 0.9);
}

#[test]
fn text_summary_is_readable() {
    let mut r = synthetic::rrul(3);
    r.metadata.partial = true;
    r.metadata.partial_reason = Some("connection reset by peer".into());
    let text = render_text(&Summary::from_results(&r));
    for needle in [
        "rrul to 192.0.2.1:5201",
        "PARTIAL RESULTS",
        "connection reset by peer",
        "UDP BE",
        "UDP EF",
        "ICMP",
        " ms",
        "Mbit/s",
        "Download (4 streams)",
        "  TCP upload CS5",
        "Bufferbloat grade: C",
        "RPM",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // Columns line up: every row of the latency table has the loss column ending at the same
    // place as the header.
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Latency"))
        .take(5)
        .collect();
    let width = lines[0].len();
    assert!(lines.iter().all(|l| l.len() == width), "{lines:#?}");
}

#[test]
fn summary_serialises() {
    let s = Summary::from_results(&synthetic::rrul(1));
    let json = serde_json::to_string(&s).expect("json");
    assert!(json.contains("\"grade\":\"C\""), "{json}");
    let back: Summary = serde_json::from_str(&json).expect("back");
    assert_eq!(back, s);
}

fn arb_metadata() -> Metadata {
    synthetic::rrul(0).metadata
}

proptest! {
    #[test]
    fn never_panics_on_odd_data(
        before in -5.0f64..10.0,
        load in -5.0f64..10.0,
        after in -5.0f64..10.0,
        probes in prop::collection::vec(
            prop::collection::vec((-20.0f64..40.0, prop::option::of(-10.0f64..1e4)), 0..30), 0..4),
        streams in prop::collection::vec(
            (any::<bool>(), prop::collection::vec((-20.0f64..40.0, -1e3f64..1e9), 0..30)), 0..5),
        interval in 0u32..400,
    ) {
        let mut metadata = arb_metadata();
        metadata.sample_interval_ms = interval;
        let r = Results {
            version: RESULTS_VERSION,
            metadata,
            phases: Phases { idle_before_s: before, load_s: load, idle_after_s: after },
            streams: streams.iter().enumerate().map(|(i, (up, samples))| StreamSeries {
                name: format!("s{i}"),
                direction: if *up { Direction::Up } else { Direction::Down },
                dscp: 0,
                samples: samples.iter().map(|&(t, bps)| ThroughputSample { t, bps }).collect(),
                total_bytes: 0,
            }).collect(),
            probes: probes.iter().enumerate()
                .map(|(i, s)| probe(&format!("p{i}"), ProbeKind::Udp, 0, s)).collect(),
            backlog: Vec::new(),
        };
        let s = Summary::from_results(&r);
        let _ = render_text(&s);
        for p in &s.probes {
            if let Some(l) = p.loss_ratio { prop_assert!((0.0..=1.0).contains(&l)); }
            if let (Some(a), Some(b)) = (p.loaded_p50_ms, p.loaded_p99_ms) { prop_assert!(a <= b); }
        }
    }
}

/// The task's rule for every latency figure: a bound is judged on the steady state (the load
/// without its first 3 s) and the start-up's peak is reported beside it, never hidden.
#[test]
fn the_steady_state_leaves_out_the_loads_first_3_s_and_its_peak_is_reported() {
    let phases = Phases {
        idle_before_s: 2.0,
        load_s: 8.0,
        idle_after_s: 2.0,
    };
    // Idle 10 ms; a 400 ms burst at the load's start (t 2.0-4.9), then 12-20 ms.
    let mut samples = vec![(0.0, Some(10.0)), (1.0, Some(10.0))];
    samples.extend([(2.0, Some(400.0)), (3.0, Some(250.0)), (4.9, None)]);
    samples.extend((0..10).map(|k| (5.0 + k as f64 * 0.5, Some(12.0 + k as f64 * 8.0 / 9.0))));
    samples.push((11.0, Some(900.0))); // the idle tail counts for neither
    let r = results(
        phases,
        vec![],
        vec![probe("UDP BE", ProbeKind::Udp, 0, &samples)],
    );
    let s = Summary::from_results(&r);
    let be = &s.probes[0];
    assert_eq!(be.startup_peak_induced_ms, Some(390.0));
    let p95 = be.steady_induced_p95_ms.expect("steady p95");
    assert!((9.0..=10.0).contains(&p95), "steady p95 {p95}");
    assert!(
        be.induced_p99_ms.expect("whole-load p99") > 200.0,
        "the burst is in the whole load"
    );
    let text = render_text(&s);
    assert!(
        text.contains("Steady state") && text.contains("start-up peak"),
        "{text}"
    );
}

/// A short load whose steady state begins with the start-up queue still draining: the steady
/// p99 holds the drain, its second half what the load settled at, and the trend falls.
#[test]
fn the_steady_states_second_half_says_what_a_draining_load_settled_at() {
    let phases = Phases {
        idle_before_s: 1.0,
        load_s: 12.0,
        idle_after_s: 1.0,
    };
    // Idle 20 ms; from 4 s (the steady state's start) a queue of 60 ms draining by 20 ms/s,
    // then 25 ms from 7 s to the end (13 s); the second half starts at 8.5 s.
    let mut samples = vec![(0.0, Some(20.0)), (0.5, Some(20.0))];
    samples.extend((0..18).map(|k| {
        let t = 4.0 + k as f64 * 0.5;
        (
            t,
            Some(if t < 7.0 {
                80.0 - 20.0 * (t - 4.0)
            } else {
                25.0
            }),
        )
    }));
    let r = results(
        phases,
        vec![],
        vec![probe("UDP BE", ProbeKind::Udp, 0, &samples)],
    );
    let be = &Summary::from_results(&r).probes[0];
    assert!(be.steady_induced_p99_ms.unwrap() > 55.0, "{be:?}");
    assert_eq!(be.steady_late_induced_p99_ms, Some(5.0));
    assert!(be.steady_growth_ms_per_s.unwrap() < 0.0);
}

/// A web server's run: no UDP, so the primary class is the best-effort TCP connect, and the
/// summary carries the draft's RPM from the four kinds (1/6 of the foreign sum + 1/2 of self).
#[test]
fn a_web_servers_run_is_graded_on_tcp_connect_and_carries_the_drafts_rpm() {
    let kinds = [
        ("TLS handshake", ProbeKind::TlsHandshake, 30.0),
        ("TCP connect", ProbeKind::TcpConnect, 20.0),
        ("HTTP GET new", ProbeKind::HttpNew, 40.0),
        ("HTTP GET loaded", ProbeKind::HttpLoaded, 100.0),
    ];
    let probes = kinds
        .iter()
        .map(|&(name, kind, loaded)| {
            probe(
                name,
                kind,
                0,
                &[(0.5, Some(5.0)), (1.0, Some(5.0)), (3.0, Some(loaded))],
            )
        })
        .collect();
    let s = Summary::from_results(&results(PH, vec![], probes));
    assert_eq!(s.primary_probe.as_deref(), Some("TCP connect"));
    assert_eq!(s.induced_latency_ms, Some(15.0));
    let r = s.responsiveness.clone().expect("the draft's RPM");
    assert!(r.complete);
    // 60000 / (1/6 * (20 + 30 + 40) + 1/2 * 100) = 60000 / 65
    assert!((r.rpm - 60_000.0 / 65.0).abs() < 1e-9, "{}", r.rpm);
    assert!(render_text(&s).contains("IETF responsiveness draft"));
}

#[test]
fn steady_goodput_leaves_slow_starts_ramp_out() {
    // 10 s of load; a download that ramps over its first 2 s to 30 Mbit/s, then holds it.
    let ph = Phases {
        idle_before_s: 1.0,
        load_s: 10.0,
        idle_after_s: 1.0,
    };
    let mut s = stream("down", Direction::Down, 30e6, &ph);
    for sample in &mut s.samples {
        let into_load = sample.t - 0.1 - ph.load_start();
        if (0.0..2.0).contains(&into_load) {
            sample.bps = 30e6 * into_load / 2.0;
        }
    }
    let summary = Summary::from_results(&results(ph, vec![s], vec![]));
    let whole = summary.download.goodput_bps.expect("goodput");
    let steady = summary.download.steady_goodput_bps.expect("steady goodput");
    assert!((steady - 30e6).abs() < 1.0, "{steady}");
    assert!(whole < 28e6, "{whole}");
    assert_eq!(summary.upload.steady_goodput_bps, None);
}

/// A queue standing in the download shows in the down leg only; without stamps there are no legs.
#[test]
fn one_way_legs_say_which_direction_a_queue_stands_in() {
    let phases = Phases {
        idle_before_s: 2.0,
        load_s: 8.0,
        idle_after_s: 1.0,
    };
    // Idle: 15 ms up, 5 ms down (an offset between the clocks); loaded: the down leg grows
    // from +20 ms by 2 ms/s, the up leg stays put.
    let sample = |t: f64, up: f64, down: f64| ProbeSample {
        t,
        rtt_ms: Some(up + down),
        owd_up_ms: Some(up),
        owd_down_ms: Some(down),
        send_lag_ms: 0.0,
    };
    let mut samples: Vec<ProbeSample> = (0..4).map(|k| sample(k as f64 * 0.5, 15.0, 5.0)).collect();
    samples.extend((0..16).map(|k| {
        let t = 2.0 + k as f64 * 0.5;
        sample(t, 15.0, 25.0 + 2.0 * (t - 2.0))
    }));
    let mut be = probe("UDP BE", ProbeKind::Udp, 0, &[]);
    be.samples = samples;
    let s = Summary::from_results(&results(phases, vec![], vec![be]));
    let (up, down) = (
        s.probes[0].steady_up.expect("up"),
        s.probes[0].steady_down.expect("down"),
    );
    assert!(up.induced_p99_ms.abs() < 1e-9, "{up:?}");
    assert!(up.growth_ms_per_s.expect("trend").abs() < 1e-9, "{up:?}");
    // The last steady sample: 25 + 2 * 7.5 = 40 ms, 35 over the idle 5 ms.
    assert!((down.induced_p99_ms - 35.0).abs() < 0.5, "{down:?}");
    assert!(
        (down.growth_ms_per_s.expect("trend") - 2.0).abs() < 1e-9,
        "{down:?}"
    );
    let plain = Summary::from_results(&hand_made());
    assert_eq!(
        (plain.probes[0].steady_up, plain.probes[0].steady_down),
        (None, None)
    );
}
