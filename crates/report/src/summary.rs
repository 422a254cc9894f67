//! The numbers a person asks for after a test, computed from a [`Results`].
//!
//! Definitions (what callers can rely on):
//! - **Phases.** A probe belongs to the phase its send time falls in; a throughput sample to
//!   the phase of its interval's midpoint (`t - interval/2`), so the interval that straddles
//!   the start of the load is not counted as idle. See [`Phases::phase_of`].
//! - **Idle latency** of a probe class: the median RTT of its probes in the idle phase BEFORE
//!   the load (the tail is excluded: a queue may still be draining). The overall idle latency
//!   is that of the primary class ([`Results::primary_probe`]: UDP BE, else the first class).
//! - **Latency under load**: p50/p90/p99 of the RTTs of probes sent during the load; **induced
//!   latency** is each of those minus the class's idle median ([`stats::induced_latency`]).
//! - **Loss**: lost / sent over the whole run, and separately under load.
//! - **Goodput** of a stream: the mean of its samples in the loaded phase (bit/s); of a
//!   direction: the sum of its streams' goodputs, which equals the mean of the total when the
//!   streams share sample instants. **Fairness**: Jain's index over the goodputs of one
//!   direction's streams, only with two streams or more (one stream is trivially "fair").
//! - **Grade**: DSLReports' table ([`Grade`]) applied to the primary class's induced latency at
//!   the MEDIAN (loaded p50 minus idle p50). DSLReports grades the increase of the average
//!   latency during load over the idle latency; we use the median instead of the mean so that
//!   a few lost-then-late outliers do not decide the grade, and the primary (best-effort)
//!   class because that is the queue ordinary traffic shares with the load. The p90 and p99
//!   are shown beside it for anyone who cares about the tail.
//! - **RPM**: [`stats::rpm`] of the primary class's loaded median RTT.
//! - Anything that cannot be computed (no probes, all lost, no idle phase, a partial run) is
//!   `None`; nothing here panics on empty or truncated data.

use serde::{Deserialize, Serialize};

use crate::format;
use crate::model::{
    Direction, Phase, Phases, ProbeKind, ProbeSample, ProbeSeries, Results, StreamSeries,
};
use crate::stats::{self, Grade, Sorted};

/// The summary of one run. Serialised as-is for `unbloat test --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub profile: String,
    pub remote: String,
    pub phases: Phases,
    pub partial: bool,
    pub partial_reason: Option<String>,
    /// Name of the probe class the headline numbers come from.
    pub primary_probe: Option<String>,
    /// Idle median RTT of the primary class.
    pub idle_latency_ms: Option<f64>,
    /// Primary class: loaded median minus idle median, the number that is graded.
    pub induced_latency_ms: Option<f64>,
    pub grade: Option<Grade>,
    /// Round trips per minute under load (primary class).
    pub rpm: Option<f64>,
    /// The IETF responsiveness draft's RPM, when the far end was a web server ([`crate::rpm`]).
    #[serde(default)]
    pub responsiveness: Option<Responsiveness>,
    pub probes: Vec<ProbeSummary>,
    pub download: DirectionSummary,
    pub upload: DirectionSummary,
    /// Where the queue stands ([`crate::locate`]): absent from a run without the gateway's
    /// probes and this machine's backlog, where it would only repeat the far end's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::locate::Location>,
}

/// The responsiveness draft's figure and its two halves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Responsiveness {
    pub rpm: f64,
    /// The foreign probes' half (new connections: TCP, TLS, HTTP), ms.
    pub foreign_ms: Option<f64>,
    /// The self probes' half (small GETs on loaded HTTP/2 connections), ms.
    pub self_ms: Option<f64>,
    /// All four kinds of probe the draft combines were there (no self probes over HTTP/1.1).
    pub complete: bool,
}

/// Latency figures of one probe class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSummary {
    pub name: String,
    pub kind: ProbeKind,
    pub dscp: u8,
    pub sent: usize,
    pub lost: usize,
    /// Over the whole run.
    pub loss_ratio: Option<f64>,
    /// Among probes sent during the load.
    pub loaded_loss_ratio: Option<f64>,
    pub idle_median_ms: Option<f64>,
    pub loaded_p50_ms: Option<f64>,
    pub loaded_p90_ms: Option<f64>,
    pub loaded_p99_ms: Option<f64>,
    pub induced_p50_ms: Option<f64>,
    pub induced_p90_ms: Option<f64>,
    pub induced_p99_ms: Option<f64>,
    /// 99th percentile of how late probes left (send jitter).
    pub send_lag_p99_ms: Option<f64>,
    /// Induced latency of the steady state: the load without its first [`STARTUP_S`], where
    /// a shaper's bound is judged.
    #[serde(default)]
    pub steady_induced_p50_ms: Option<f64>,
    #[serde(default)]
    pub steady_induced_p95_ms: Option<f64>,
    /// What `unbloat tune` judges its bound on.
    #[serde(default)]
    pub steady_induced_p99_ms: Option<f64>,
    /// The worst induced latency of the load's first [`STARTUP_S`] (slow start's overshoot,
    /// queues upstream of the shaper draining): shown beside the steady state, never hidden.
    #[serde(default)]
    pub startup_peak_induced_ms: Option<f64>,
    /// How fast the steady state's round trip rises, ms per second (least squares): a shaper set
    /// above the line lets the modem's queue grow for as long as the load lasts, by 10 ms/s per
    /// 1 % over, while one at or below it keeps the trend flat. `unbloat tune` fails a step on it.
    #[serde(default)]
    pub steady_growth_ms_per_s: Option<f64>,
    /// The steady state's second half, p99: where a short load's steady state still drains the
    /// start-up queue at its beginning, what the load settles at (`unbloat tune`'s both-ways
    /// check judges a falling pair on it).
    #[serde(default)]
    pub steady_late_induced_p99_ms: Option<f64>,
    /// The steady state of each way the probe crossed, from its one-way delays (when the far
    /// end stamps them): which direction a queue stands or grows in. The clocks' offset is
    /// constant within a run, so it cancels out of these induced figures.
    #[serde(default)]
    pub steady_up: Option<Leg>,
    #[serde(default)]
    pub steady_down: Option<Leg>,
}

/// The steady state of one way of a probe's trip: induced one-way delay and its trend.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Leg {
    /// Loaded one-way delay, p99, minus its idle median, ms.
    pub induced_p99_ms: f64,
    /// ms per second, as `steady_growth_ms_per_s`.
    pub growth_ms_per_s: Option<f64>,
}

/// Where the steady state starts (defined with the phases, which [`crate::locate`] reads too).
pub use crate::model::STARTUP_S;

/// Throughput of one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    /// Sum of the streams' mean goodputs under load, bit/s; `None` without streams.
    pub goodput_bps: Option<f64>,
    /// The same over the steady state (the load after its first [`STARTUP_S`]): without slow
    /// start's ramp, what the link carries once the flows fill it (a capacity estimate).
    #[serde(default)]
    pub steady_goodput_bps: Option<f64>,
    /// Jain's index over the streams' goodputs; `None` below two streams.
    pub fairness: Option<f64>,
    pub streams: Vec<StreamSummary>,
}

/// Throughput of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    pub name: String,
    pub dscp: u8,
    /// Mean goodput under load, bit/s.
    pub goodput_bps: Option<f64>,
    pub total_bytes: u64,
}

impl Summary {
    /// The primary probe's figures (the one the grade is judged on).
    pub fn primary(&self) -> Option<&ProbeSummary> {
        let name = self.primary_probe.as_ref()?;
        self.probes.iter().find(|p| &p.name == name)
    }

    pub fn from_results(results: &Results) -> Summary {
        let phases = results.phases;
        let probes: Vec<ProbeSummary> = results
            .probes
            .iter()
            .map(|p| summarise_probe(p, &phases))
            .collect();
        let interval_s = f64::from(results.metadata.sample_interval_ms.max(1)) / 1000.0;
        let primary = results.primary_probe().and_then(|p| {
            // primary_probe returns a reference into results.probes; find its summary by index.
            results
                .probes
                .iter()
                .position(|q| std::ptr::eq(q, p))
                .map(|i| &probes[i])
        });
        let induced = primary.and_then(|p| p.induced_p50_ms);
        Summary {
            profile: results.metadata.profile.clone(),
            remote: results.metadata.remote.clone(),
            phases,
            partial: results.metadata.partial,
            partial_reason: results.metadata.partial_reason.clone(),
            primary_probe: primary.map(|p| p.name.clone()),
            idle_latency_ms: primary.and_then(|p| p.idle_median_ms),
            induced_latency_ms: induced,
            grade: induced.and_then(Grade::from_induced_ms),
            rpm: primary.and_then(|p| p.loaded_p50_ms).and_then(stats::rpm),
            responsiveness: crate::rpm::responsiveness(results).map(|r| Responsiveness {
                rpm: r.rpm,
                foreign_ms: r.foreign_ms,
                self_ms: r.self_ms,
                complete: r.complete,
            }),
            download: summarise_direction(&results.streams, Direction::Down, &phases, interval_s),
            upload: summarise_direction(&results.streams, Direction::Up, &phases, interval_s),
            probes,
            location: crate::locate::located(results),
        }
    }
}

fn summarise_probe(series: &ProbeSeries, phases: &Phases) -> ProbeSummary {
    let rtts_in = |phase: Phase| -> Vec<f64> {
        series
            .samples
            .iter()
            .filter(|s| phases.phase_of(s.t) == phase)
            .filter_map(|s| s.rtt_ms)
            .collect()
    };
    let idle_median = stats::median(&rtts_in(Phase::IdleBefore));
    let loaded = Sorted::new(&rtts_in(Phase::Loaded));
    let sent = series.samples.len();
    let lost = series.samples.iter().filter(|s| s.rtt_ms.is_none()).count();
    let loaded_sent: Vec<_> = series
        .samples
        .iter()
        .filter(|s| phases.phase_of(s.t) == Phase::Loaded)
        .collect();
    let loaded_lost = loaded_sent.iter().filter(|s| s.rtt_ms.is_none()).count();
    let induced = |p: Option<f64>| match (p, idle_median) {
        (Some(l), Some(i)) => stats::induced_latency(l, i),
        _ => None,
    };
    let lags: Vec<f64> = series.samples.iter().map(|s| s.send_lag_ms).collect();
    let steady_from = phases.load_start() + STARTUP_S;
    let (startup, steady): (Vec<_>, Vec<_>) = loaded_sent
        .iter()
        .filter_map(|s| s.rtt_ms.map(|r| (s.t, r)))
        .partition(|(t, _)| *t < steady_from);
    let growth = stats::slope(&steady);
    let late_from = (steady_from + phases.load_end()) / 2.0;
    let late: Vec<f64> = steady
        .iter()
        .filter(|(t, _)| *t >= late_from)
        .map(|(_, r)| *r)
        .collect();
    let steady: Vec<f64> = steady.into_iter().map(|(_, r)| r).collect();
    let startup_peak = startup.into_iter().map(|(_, r)| r).reduce(f64::max);
    let (p50, p90, p99) = (
        loaded.percentile(50.0),
        loaded.percentile(90.0),
        loaded.percentile(99.0),
    );
    ProbeSummary {
        name: series.name.clone(),
        kind: series.kind,
        dscp: series.dscp,
        sent,
        lost,
        loss_ratio: stats::loss_ratio(lost, sent),
        loaded_loss_ratio: stats::loss_ratio(loaded_lost, loaded_sent.len()),
        idle_median_ms: idle_median,
        loaded_p50_ms: p50,
        loaded_p90_ms: p90,
        loaded_p99_ms: p99,
        induced_p50_ms: induced(p50),
        induced_p90_ms: induced(p90),
        induced_p99_ms: induced(p99),
        send_lag_p99_ms: stats::percentile(&lags, 99.0),
        steady_induced_p50_ms: induced(stats::percentile(&steady, 50.0)),
        steady_induced_p95_ms: induced(stats::percentile(&steady, 95.0)),
        steady_induced_p99_ms: induced(stats::percentile(&steady, 99.0)),
        startup_peak_induced_ms: induced(startup_peak),
        steady_growth_ms_per_s: growth,
        steady_late_induced_p99_ms: induced(stats::percentile(&late, 99.0)),
        steady_up: leg(series, phases, |s| s.owd_up_ms),
        steady_down: leg(series, phases, |s| s.owd_down_ms),
    }
}

/// One way's steady state ([`Leg`]), from the delays `way` picks; `None` without an idle
/// median or steady samples of it.
fn leg(series: &ProbeSeries, phases: &Phases, way: fn(&ProbeSample) -> Option<f64>) -> Option<Leg> {
    let idle: Vec<f64> = series
        .samples
        .iter()
        .filter(|s| phases.phase_of(s.t) == Phase::IdleBefore)
        .filter_map(way)
        .collect();
    let steady_from = phases.load_start() + STARTUP_S;
    let steady: Vec<(f64, f64)> = series
        .samples
        .iter()
        .filter(|s| phases.phase_of(s.t) == Phase::Loaded && s.t >= steady_from)
        .filter_map(|s| way(s).map(|d| (s.t, d)))
        .collect();
    let delays: Vec<f64> = steady.iter().map(|(_, d)| *d).collect();
    let p99 = stats::percentile(&delays, 99.0)?;
    Some(Leg {
        induced_p99_ms: stats::induced_latency(p99, stats::median(&idle)?)?,
        growth_ms_per_s: stats::slope(&steady),
    })
}

/// Mean goodput of `stream` over the samples whose interval midpoint is in the loaded phase.
pub fn stream_goodput(stream: &StreamSeries, phases: &Phases, interval_s: f64) -> Option<f64> {
    goodput_from(stream, phases, interval_s, phases.load_start())
}

/// The mean goodput of the load's intervals (by their middle) from `from_s` on.
fn goodput_from(
    stream: &StreamSeries,
    phases: &Phases,
    interval_s: f64,
    from_s: f64,
) -> Option<f64> {
    let loaded: Vec<f64> = stream
        .samples
        .iter()
        .map(|s| (s.t - interval_s / 2.0, s.bps))
        .filter(|&(t, _)| phases.phase_of(t) == Phase::Loaded && t >= from_s)
        .map(|(_, bps)| bps)
        .collect();
    stats::mean(&loaded)
}

fn summarise_direction(
    all: &[StreamSeries],
    direction: Direction,
    phases: &Phases,
    interval_s: f64,
) -> DirectionSummary {
    let streams: Vec<StreamSummary> = all
        .iter()
        .filter(|s| s.direction == direction)
        .map(|s| StreamSummary {
            name: s.name.clone(),
            dscp: s.dscp,
            goodput_bps: stream_goodput(s, phases, interval_s),
            total_bytes: s.total_bytes,
        })
        .collect();
    let goodputs: Vec<f64> = streams.iter().filter_map(|s| s.goodput_bps).collect();
    let steady_from = phases.load_start() + STARTUP_S;
    let steady: Vec<f64> = all
        .iter()
        .filter(|s| s.direction == direction)
        .filter_map(|s| goodput_from(s, phases, interval_s, steady_from))
        .collect();
    DirectionSummary {
        goodput_bps: (!goodputs.is_empty()).then(|| goodputs.iter().sum()),
        steady_goodput_bps: (!steady.is_empty()).then(|| steady.iter().sum()),
        fairness: if goodputs.len() >= 2 {
            stats::jain_fairness(&goodputs)
        } else {
            None
        },
        streams,
    }
}

/// A readable terminal summary: a header, the latency table, the throughput table, the grade.
pub fn render_text(summary: &Summary) -> String {
    let mut out = String::new();
    let p = &summary.phases;
    out.push_str(&format!(
        "unbloat test: {} to {} ({:.0} s idle, {:.0} s load, {:.0} s idle)\n",
        summary.profile, summary.remote, p.idle_before_s, p.load_s, p.idle_after_s
    ));
    if summary.partial {
        let why = summary
            .partial_reason
            .as_deref()
            .unwrap_or("reason unknown");
        out.push_str(&format!("PARTIAL RESULTS: the run ended early: {why}\n"));
    }

    if !summary.probes.is_empty() {
        out.push('\n');
        let mut rows = vec![vec![
            "Latency".to_string(),
            "idle".into(),
            "load p50".into(),
            "p90".into(),
            "p99".into(),
            "induced p50".into(),
            "p90".into(),
            "steady p95".into(),
            "start-up peak".into(),
            "loss".into(),
        ]];
        for pr in &summary.probes {
            rows.push(vec![
                pr.name.clone(),
                format::ms(pr.idle_median_ms),
                format::ms(pr.loaded_p50_ms),
                format::ms(pr.loaded_p90_ms),
                format::ms(pr.loaded_p99_ms),
                format::ms(pr.induced_p50_ms),
                format::ms(pr.induced_p90_ms),
                format::ms(pr.steady_induced_p95_ms),
                format::ms(pr.startup_peak_induced_ms),
                format::percent(pr.loss_ratio),
            ]);
        }
        out.push_str(&table(&rows));
    }

    let dirs = [("Download", &summary.download), ("Upload", &summary.upload)];
    if dirs.iter().any(|(_, d)| !d.streams.is_empty()) {
        out.push('\n');
        let mut rows = vec![vec![
            "Throughput".to_string(),
            "goodput".into(),
            "fairness".into(),
        ]];
        for (label, d) in dirs.iter().filter(|(_, d)| !d.streams.is_empty()) {
            rows.push(vec![
                format!("{label} ({} streams)", d.streams.len()),
                format::rate(d.goodput_bps),
                format::number(d.fairness, 2),
            ]);
            for s in &d.streams {
                rows.push(vec![
                    format!("  {}", s.name),
                    format::rate(s.goodput_bps),
                    String::new(),
                ]);
            }
        }
        out.push_str(&table(&rows));
    }

    out.push('\n');
    match (summary.grade, &summary.primary_probe) {
        (Some(g), Some(probe)) => out.push_str(&format!(
            "Bufferbloat grade: {g}  (latency added by the load: {} on {probe}, median)\n",
            format::ms(summary.induced_latency_ms)
        )),
        _ => out.push_str("Bufferbloat grade: -  (not enough latency measurements)\n"),
    }
    let primary = summary
        .primary_probe
        .as_ref()
        .and_then(|name| summary.probes.iter().find(|p| &p.name == name));
    if let Some(p) = primary.filter(|p| p.steady_induced_p95_ms.is_some()) {
        out.push_str(&format!(
            "Steady state (the load after its first {STARTUP_S:.0} s): {} added at p95; start-up peak {}\n",
            format::ms(p.steady_induced_p95_ms),
            format::ms(p.startup_peak_induced_ms)
        ));
    }
    if let Some(l) = &summary.location {
        out.push_str(&crate::locate::render_text(l));
    }
    if let Some(r) = &summary.responsiveness {
        out.push_str(&format!(
            "Responsiveness: {:.0} RPM (IETF responsiveness draft{}: new connections {}, loaded connections {})\n",
            r.rpm,
            if r.complete { "" } else { ", partial: not every probe kind" },
            format::ms(r.foreign_ms),
            format::ms(r.self_ms),
        ));
    } else if let Some(rpm) = summary.rpm {
        out.push_str(&format!(
            "Responsiveness: {rpm:.0} RPM (round trips per minute under load)\n"
        ));
    }
    out
}

/// Left-aligns the first column and right-aligns the others, two spaces apart.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .map(|s| s.chars().count())
            .max()
    };
    let widths: Vec<usize> = (0..cols).map(|c| width(c).unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c == 0 {
                line.push_str(&format!("{cell:<w$}", w = widths[0]));
            } else {
                line.push_str(&format!("  {cell:>w$}", w = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
