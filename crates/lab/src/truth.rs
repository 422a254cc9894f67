//! What the emulation knows about its own queues (issue 39): each bottleneck's backlog, read
//! from its qdisc's counters ten times a second while a test runs, in milliseconds at the rate
//! that drains it. `unbloat test` attributes the delay it induces to the first hop (the LAN hop,
//! between the host and the router) and the rest of the path (the modem); [`WayTruth`] is what
//! that attribution is held against in `bench locate`.
//!
//! The queues: the modem's (`cpe0` down, `isp0` up, at the line's rate), the LAN hop's where
//! the profile has one (`lan0` down, `ifb4lan0` up, at its rate), and the host's own egress
//! (`eth0`, at the upload's bottleneck rate). Each is read as the root
//! qdisc's backlog in its node's namespace (one rtnetlink dump per sample, by
//! `unbloat_measure::backlog`); a queue of `b` bytes at rate `r` holds a packet arriving now
//! `8 b / r` seconds. The router's shaper is not read: the locate scenarios run unshaped.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use unbloat_measure::backlog::Sampler;
use unbloat_report::locate::{Place, Way, FINDING_MS, FINDING_SHARE};
use unbloat_report::stats::Sorted;
use unbloat_testbed::netns::run_in_named;
use unbloat_units::Rate;

use crate::profile::{Fifo, LinkProfile};
use crate::topology::{byte_queue_ifb, modem_rate, Node, Topology};

/// One emulated queue: where it stands, which way it carries, and how fast it drains.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HopQueue {
    #[serde(skip)]
    pub node: Node,
    pub dev: &'static str,
    pub way: Way,
    pub place: Place,
    pub rate: Rate,
}

/// The queues of `profile`'s emulation, modem first.
pub fn queues(profile: &LinkProfile) -> Vec<HopQueue> {
    let modem = |dev, way, line| HopQueue {
        node: Node::Modem,
        dev,
        way,
        place: Place::Beyond,
        rate: modem_rate(profile, line),
    };
    // A FIFO in bytes waits on an IFB in front of the serialising device (topology::byte_queue).
    let at = |dev: &'static str, traced: bool| match profile.fifo() {
        Fifo::Bytes(_) if !traced => byte_queue_ifb(dev),
        _ => dev,
    };
    let (down, up) = (profile.traces.down.is_some(), profile.traces.up.is_some());
    let mut q = vec![
        modem(at("cpe0", down), Way::Down, profile.down),
        modem(at("isp0", up), Way::Up, profile.up),
    ];
    // The host's own egress queue drains at the upload's bottleneck, whichever hop that is.
    let lan_up = profile.lan.as_ref().and_then(|l| l.up);
    let up_rate = modem_rate(profile, profile.up);
    q.push(HopQueue {
        node: Node::Lan,
        dev: "eth0",
        way: Way::Up,
        place: Place::ThisMachine,
        rate: lan_up.map_or(up_rate, |l| l.min(up_rate)),
    });
    if let Some(lan) = &profile.lan {
        for (dev, way, rate) in [("lan0", Way::Down, lan.down), ("ifb4lan0", Way::Up, lan.up)] {
            if let Some(rate) = rate {
                q.push(HopQueue {
                    node: Node::Router,
                    dev,
                    way,
                    place: Place::FirstHop,
                    rate,
                });
            }
        }
    }
    q
}

/// A queue's delay over time: seconds since the Unix epoch, milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct QueueSeries {
    pub queue: HopQueue,
    pub samples: Vec<(f64, f64)>,
}

/// Samplers running on every queue of a live lab.
pub struct TruthSampler {
    running: Vec<(HopQueue, Sampler)>,
    epoch_unix: f64,
}

impl TruthSampler {
    /// Starts reading every queue of `topo`'s profile; an error in words when one cannot be read.
    pub fn start(topo: &Topology) -> Result<TruthSampler, String> {
        let epoch = Instant::now();
        let epoch_unix = unix_now();
        let mut running = vec![];
        for q in queues(&topo.profile) {
            let dev = q.dev;
            // The sampler's netlink socket is opened on a thread inside the node's namespace
            // and stays bound to it; its own thread reads through that socket.
            let sampler = run_in_named(&topo.ns(q.node), move || Sampler::start(dev, epoch))
                .map_err(|e| e.to_string())?
                .join()
                .map_err(|_| format!("{dev}: the sampler's thread panicked"))??;
            running.push((q, sampler));
        }
        Ok(TruthSampler {
            running,
            epoch_unix,
        })
    }

    /// Stops every sampler: each queue's delays, and the notes of those that ended early.
    pub fn finish(self) -> (Vec<QueueSeries>, Vec<String>) {
        let mut series = vec![];
        let mut notes = vec![];
        for (queue, sampler) in self.running {
            let (samples, note) = sampler.finish();
            notes.extend(note.map(|n| format!("{}: {n}", queue.dev)));
            let bps = queue.rate.bits_per_sec() as f64;
            let samples = samples
                .iter()
                .map(|s| (self.epoch_unix + s.t, s.bytes as f64 * 8.0 / bps * 1000.0))
                .collect();
            series.push(QueueSeries { queue, samples });
        }
        (series, notes)
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A place's queue delay over a window, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PlaceTruth {
    pub place: Place,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

/// One way's truth over a window: each place's queue delay, their sum (what a packet crossing
/// both waits), and the places that hold a finding's share by `unbloat_report::locate`'s rule:
/// clearly, or too close to its threshold to tell ([`close`]), where either verdict is right.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WayTruth {
    pub way: Way,
    pub total_p50_ms: f64,
    pub total_p95_ms: f64,
    pub places: Vec<PlaceTruth>,
    /// The least p95 that makes a place a finding.
    pub threshold_ms: f64,
    pub findings: Vec<Place>,
    pub borderline: Vec<Place>,
}

/// A place's attributed delay may differ from its queue's by this share, or [`WITHIN_MS`].
pub const WITHIN_SHARE: f64 = 0.2;
pub const WITHIN_MS: f64 = 5.0;

/// `measured` within [`WITHIN_SHARE`] of `truth`, or [`WITHIN_MS`].
pub fn close(measured: f64, truth: f64) -> bool {
    (measured - truth).abs() <= (WITHIN_SHARE * truth).max(WITHIN_MS)
}

/// The truth of `way` between the Unix times `from` and `to`; None without a sample there.
pub fn way_truth(series: &[QueueSeries], way: Way, from: f64, to: f64) -> Option<WayTruth> {
    let inside = |s: &QueueSeries| -> Vec<(f64, f64)> {
        let v = s.samples.iter().filter(|(t, _)| *t >= from && *t < to);
        v.copied().collect()
    };
    let mine: Vec<&QueueSeries> = series.iter().filter(|s| s.queue.way == way).collect();
    let mut places = vec![];
    for s in &mine {
        let ms: Vec<f64> = inside(s).iter().map(|(_, ms)| *ms).collect();
        let sorted = Sorted::new(&ms);
        places.push(PlaceTruth {
            place: s.queue.place,
            p50_ms: sorted.percentile(50.0)?,
            p95_ms: sorted.percentile(95.0)?,
        });
    }
    // What a packet crossing every queue of the way waits: at each of the first queue's sample
    // times, the sum of each queue's nearest sample (the samplers read at different instants,
    // and a queue moves little within 100 ms).
    let totals: Vec<f64> = inside(mine.first()?)
        .iter()
        .map(|(t, _)| mine.iter().filter_map(|s| nearest(&s.samples, *t)).sum())
        .collect();
    let sorted = Sorted::new(&totals);
    let total_p95_ms = sorted.percentile(95.0)?;
    let threshold_ms = FINDING_MS.max(FINDING_SHARE * total_p95_ms);
    let (mut findings, mut borderline) = (vec![], vec![]);
    for p in &places {
        if close(p.p95_ms, threshold_ms) {
            borderline.push(p.place);
        } else if p.p95_ms > threshold_ms {
            findings.push(p.place);
        }
    }
    Some(WayTruth {
        way,
        total_p50_ms: sorted.percentile(50.0)?,
        total_p95_ms,
        places,
        threshold_ms,
        findings,
        borderline,
    })
}

fn nearest(samples: &[(f64, f64)], t: f64) -> Option<f64> {
    samples
        .iter()
        .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
        .map(|s| s.1)
}
