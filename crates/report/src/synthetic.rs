//! Deterministic, made-up test runs, for tests and examples (here, in `unbloat-measure` and in
//! the CLI). They look like a bloated link: ~20 ms idle, latency climbing to ~150 ms under load,
//! a little loss under load, and throughput only during the load phase. Same seed, same run.

use crate::model::*;
use crate::qdiscs::EgressQdiscs;

/// A tiny linear congruential generator (Knuth's MMIX constants): enough noise for plots and
/// statistics tests, no dependency, and the same numbers on every machine.
struct Lcg(u64);

impl Lcg {
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The DSCP code points flent's RRUL uses, by the name it shows.
pub const CLASSES: [(&str, u8); 4] = [("BE", 0), ("BK", 8), ("CS5", 40), ("EF", 46)];

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    pub profile: String,
    pub phases: Phases,
    /// (name, direction, dscp) per stream.
    pub streams: Vec<(String, Direction, u8)>,
    /// (name, kind, dscp) per probe class.
    pub probes: Vec<(String, ProbeKind, u8)>,
    /// Total goodput under load, bit/s, per direction.
    pub up_bps: f64,
    pub down_bps: f64,
    pub idle_rtt_ms: f64,
    /// Latency added at full load.
    pub bloat_ms: f64,
    pub seed: u64,
}

/// flent's RRUL: 4 streams each way (BE, BK, CS5, EF), UDP probes BE/EF/BK and ICMP.
pub fn rrul(seed: u64) -> Results {
    rrul_with(seed, base(seed).bloat_ms, base(seed).down_bps)
}

/// RRUL whose load adds `bloat_ms` of latency and moves `down_bps` down (a fifth of it up):
/// a cured link next to [`rrul`]'s bloated one, for comparisons.
pub fn rrul_with(seed: u64, bloat_ms: f64, down_bps: f64) -> Results {
    let mut streams = Vec::new();
    for (dir, word) in [(Direction::Up, "upload"), (Direction::Down, "download")] {
        for (class, dscp) in CLASSES {
            streams.push((format!("TCP {word} {class}"), dir, dscp));
        }
    }
    generate(&Spec {
        profile: "rrul".into(),
        streams,
        probes: rrul_probes(),
        bloat_ms,
        down_bps,
        up_bps: down_bps / 5.0,
        ..base(seed)
    })
}

/// N upload streams, best effort, one ICMP and one UDP BE probe class.
pub fn tcp_nup(n: usize, seed: u64) -> Results {
    generate(&Spec {
        profile: "tcp_nup".into(),
        streams: (1..=n)
            .map(|i| (format!("TCP upload {i}"), Direction::Up, 0))
            .collect(),
        probes: vec![
            ("UDP BE".into(), ProbeKind::Udp, 0),
            ("ICMP".into(), ProbeKind::Icmp, 0),
        ],
        ..base(seed)
    })
}

/// N download streams, best effort, one ICMP and one UDP BE probe class.
pub fn tcp_ndown(n: usize, seed: u64) -> Results {
    generate(&Spec {
        profile: "tcp_ndown".into(),
        streams: (1..=n)
            .map(|i| (format!("TCP download {i}"), Direction::Down, 0))
            .collect(),
        probes: vec![
            ("UDP BE".into(), ProbeKind::Udp, 0),
            ("ICMP".into(), ProbeKind::Icmp, 0),
        ],
        ..base(seed)
    })
}

/// Latency only: no streams, so no bloat either.
pub fn ping(seed: u64) -> Results {
    generate(&Spec {
        profile: "ping".into(),
        streams: Vec::new(),
        probes: rrul_probes(),
        bloat_ms: 0.0,
        ..base(seed)
    })
}

fn rrul_probes() -> Vec<(String, ProbeKind, u8)> {
    vec![
        ("UDP BE".into(), ProbeKind::Udp, 0),
        ("UDP EF".into(), ProbeKind::Udp, 46),
        ("UDP BK".into(), ProbeKind::Udp, 8),
        ("ICMP".into(), ProbeKind::Icmp, 0),
    ]
}

fn base(seed: u64) -> Spec {
    Spec {
        profile: String::new(),
        phases: Phases {
            idle_before_s: 5.0,
            load_s: 20.0,
            idle_after_s: 5.0,
        },
        streams: Vec::new(),
        probes: Vec::new(),
        up_bps: 10e6,
        down_bps: 50e6,
        idle_rtt_ms: 20.0,
        bloat_ms: 130.0,
        seed,
    }
}

/// How loaded the link is at `t`, 0..=1: the queue fills over the first 2 s of load and drains
/// within 0.5 s after it, as a drop-tail buffer does.
fn load_factor(phases: &Phases, t: f64) -> f64 {
    let (start, end) = (phases.load_start(), phases.load_end());
    if t < start {
        0.0
    } else if t < end {
        ((t - start) / 2.0).min(1.0)
    } else {
        (1.0 - (t - end) / 0.5).max(0.0)
    }
}

/// Builds a run from `spec`.
pub fn generate(spec: &Spec) -> Results {
    let mut rng = Lcg(spec
        .seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(1));
    let interval_s = 0.2;
    let total = spec.phases.total();
    let ticks = (total / interval_s).round() as usize;
    let count = |dir| spec.streams.iter().filter(|s| s.1 == dir).count().max(1) as f64;
    let (n_up, n_down) = (count(Direction::Up), count(Direction::Down));

    let streams = spec
        .streams
        .iter()
        .enumerate()
        .map(|(i, (name, direction, dscp))| {
            let (total_bps, n) = match direction {
                Direction::Up => (spec.up_bps, n_up),
                Direction::Down => (spec.down_bps, n_down),
            };
            // Unequal shares (the first stream a little greedier) so fairness is not trivially 1.
            let share = total_bps / n * (1.0 + 0.2 / (i as f64 + 1.0));
            let samples: Vec<ThroughputSample> = (1..=ticks)
                .map(|k| {
                    let t = k as f64 * interval_s;
                    let mid = t - interval_s / 2.0;
                    let loaded = spec.phases.phase_of(mid) == Phase::Loaded;
                    let bps = if loaded {
                        share * (0.85 + 0.3 * rng.next())
                    } else {
                        0.0
                    };
                    ThroughputSample { t, bps }
                })
                .collect();
            let total_bytes = samples
                .iter()
                .map(|s| s.bps * interval_s / 8.0)
                .sum::<f64>() as u64;
            StreamSeries {
                name: name.clone(),
                direction: *direction,
                dscp: *dscp,
                samples,
                total_bytes,
            }
        })
        .collect();

    let probes = spec
        .probes
        .iter()
        .enumerate()
        .map(|(class, (name, kind, dscp))| {
            let samples = (0..ticks)
                .map(|k| {
                    // Stagger classes so they do not all leave at the same instant.
                    let t = k as f64 * interval_s + class as f64 * 0.013;
                    let load = load_factor(&spec.phases, t);
                    // EF probes get a little priority in the synthetic world.
                    let bloat = if *dscp == 46 { 0.5 } else { 1.0 } * spec.bloat_ms * load;
                    let jitter = rng.next() * (1.0 + 0.3 * bloat);
                    let rtt = spec.idle_rtt_ms + bloat + jitter;
                    let lost = load > 0.5 && rng.next() < 0.02;
                    let rtt_ms = if lost { None } else { Some(rtt) };
                    ProbeSample {
                        t,
                        rtt_ms,
                        owd_up_ms: rtt_ms.map(|r| r * 0.6),
                        owd_down_ms: rtt_ms.map(|r| r * 0.4),
                        send_lag_ms: rng.next() * 0.1,
                    }
                })
                .collect();
            ProbeSeries {
                name: name.clone(),
                kind: *kind,
                dscp: *dscp,
                interval_ms: 200.0,
                hop: Default::default(),
                samples,
            }
        })
        .collect();

    Results {
        version: RESULTS_VERSION,
        metadata: Metadata {
            unbloat_version: env!("CARGO_PKG_VERSION").into(),
            kernel: "6.1.0-synthetic".into(),
            hostname: "synthetic".into(),
            command_line: vec!["unbloat".into(), "test".into(), "192.0.2.1".into()],
            started_at_unix: 1_700_000_000.0,
            remote: "192.0.2.1:5201".into(),
            profile: spec.profile.clone(),
            sample_interval_ms: 200,
            qdiscs: EgressQdiscs::from_tc_json(serde_json::json!([
                {"kind": "fq_codel", "handle": "0:", "root": true}
            ]))
            .expect("a qdisc list as tc prints it"),
            egress_iface: Some("eth0".into()),
            partial: false,
            partial_reason: None,
            notes: Vec::new(),
        },
        phases: spec.phases,
        streams,
        probes,
        backlog: Vec::new(),
    }
}
