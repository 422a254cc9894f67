//! The side-by-side comparison: one row per strategy, computed from its results file, shown as
//! a text table and as JSON (the HTML page, [`crate::page`], shows the same rows). Pure: nothing
//! here runs.
//!
//! The numbers (issue 4 §5): idle latency (median RTT of the primary probe, UDP BE, before the
//! load); induced latency p50/p95/p99 per probe class (loaded RTT percentile minus that class's
//! idle median, from the report crate's summary); goodput up and down (every stream's bytes over
//! the load) and that goodput as a share of the link's theoretical TCP goodput (the shaper's
//! goodput model at the LINK's rate, not the shaper's, so that what shaping costs shows as a lower
//! share; less the test's probes and the other direction's ACKs, see [`crate::theory`]); and the
//! grade of the primary probe's induced latency.

use serde::{Deserialize, Serialize};
use unbloat_report::model::{Direction, Phase, Results};
use unbloat_report::stats::{self, Grade};
use unbloat_report::summary::Summary;

use crate::profile::LinkProfile;
use crate::strategies::Strategy;
use crate::theory;

/// Latency of one probe class under one strategy, milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRow {
    pub name: String,
    pub idle_ms: Option<f64>,
    pub induced_p50_ms: Option<f64>,
    pub induced_p95_ms: Option<f64>,
    pub induced_p99_ms: Option<f64>,
    pub loaded_loss_ratio: Option<f64>,
    /// Induced p95 of the steady state (the load after its first 3 s): where a bound is judged.
    #[serde(default)]
    pub steady_p95_ms: Option<f64>,
    /// Induced p99 of the steady state: what tune's bound and the benchmarks' comparisons judge.
    #[serde(default)]
    pub steady_p99_ms: Option<f64>,
    /// The worst induced latency of the load's first 3 s, reported beside the steady state.
    #[serde(default)]
    pub startup_peak_ms: Option<f64>,
}

/// One strategy's line of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub strategy: Strategy,
    pub idle_ms: Option<f64>,
    pub probes: Vec<ProbeRow>,
    pub down_bps: Option<f64>,
    pub up_bps: Option<f64>,
    /// Goodput as a share (0..1) of the link's theoretical TCP goodput in that direction.
    pub down_share: Option<f64>,
    pub up_share: Option<f64>,
    pub grade: Option<Grade>,
    /// The primary probe class (UDP BE, or a web server's TCP connect): the steady state and
    /// start-up columns are its.
    #[serde(default)]
    pub primary: Option<String>,
    /// The test ended early; its numbers cover less than the planned run.
    pub partial: bool,
    /// The share of time the CPU was busy during the load (see [`crate::cpu`]).
    #[serde(default)]
    pub cpu_busy: Option<f64>,
    /// The busy share of the load's busiest second; above 1 - [`crate::cpu::IDLE_MIN`] the run
    /// is CPU-bound ([`Row::cpu_bound`]).
    #[serde(default)]
    pub cpu_peak_busy: Option<f64>,
}

impl Row {
    /// The row for `strategy` from its run's results on `profile`.
    pub fn from_results(strategy: Strategy, results: &Results, profile: &LinkProfile) -> Row {
        let summary = Summary::from_results(results);
        let probes = summary
            .probes
            .iter()
            .map(|p| ProbeRow {
                name: p.name.clone(),
                idle_ms: p.idle_median_ms,
                induced_p50_ms: p.induced_p50_ms,
                induced_p95_ms: induced_percentile(results, &p.name, 95.0, p.idle_median_ms),
                induced_p99_ms: p.induced_p99_ms,
                loaded_loss_ratio: p.loaded_loss_ratio,
                steady_p95_ms: p.steady_induced_p95_ms,
                steady_p99_ms: p.steady_induced_p99_ms,
                startup_peak_ms: p.startup_peak_induced_ms,
            })
            .collect();
        let (down_bps, up_bps) = (
            load_goodput(results, Direction::Down),
            load_goodput(results, Direction::Up),
        );
        let share = |bps: Option<f64>, dir, reverse| {
            let best = theory::theoretical_in_test(profile, results, dir, reverse);
            let best = best.bits_per_sec() as f64;
            bps.filter(|_| best > 0.0).map(|b| b / best)
        };
        Row {
            strategy,
            idle_ms: summary.idle_latency_ms,
            probes,
            down_bps,
            up_bps,
            down_share: share(down_bps, Direction::Down, up_bps),
            up_share: share(up_bps, Direction::Up, down_bps),
            grade: summary.grade,
            primary: summary.primary_probe.clone(),
            partial: summary.partial,
            cpu_busy: None,
            cpu_peak_busy: None,
        }
    }

    /// Seed 001's sign of a CPU limit in this run's load (see [`crate::cpu`]); unknown is not.
    pub fn cpu_bound(&self) -> bool {
        self.cpu_peak_busy.is_some_and(crate::cpu::is_bound)
    }

    /// The probe class named `name` ("UDP BE", "ICMP", ...).
    pub fn probe(&self, name: &str) -> Option<&ProbeRow> {
        self.probes.iter().find(|p| p.name == name)
    }
}

/// Goodput of one direction over the load phase: every stream's payload bytes over the load's
/// length. Streams move data only during the load (they are reset at its end), so the totals are
/// the load's bytes; this is steadier than a mean of 200 ms samples, whose first interval can
/// carry start-up artefacts.
pub fn load_goodput(results: &Results, direction: Direction) -> Option<f64> {
    let streams: Vec<_> = results
        .streams
        .iter()
        .filter(|s| s.direction == direction)
        .collect();
    if streams.is_empty() || results.phases.load_s <= 0.0 {
        return None;
    }
    let bytes: u64 = streams.iter().map(|s| s.total_bytes).sum();
    Some(bytes as f64 * 8.0 / results.phases.load_s)
}

/// The `p`th percentile of the loaded RTTs of probe class `name`, minus `idle` (the summary has
/// p50/p90/p99; issue 4 states its short-lab bound as a p95).
fn induced_percentile(results: &Results, name: &str, p: f64, idle: Option<f64>) -> Option<f64> {
    let loaded = loaded_rtts(results, name, 0.0)?;
    stats::induced_latency(stats::percentile(&loaded, p)?, idle?)
}

/// The RTTs (ms) of probe class `name`'s answered probes sent during the load, leaving out its
/// first `skip_s` seconds; `None` when the results have no such class.
pub fn loaded_rtts(results: &Results, name: &str, skip_s: f64) -> Option<Vec<f64>> {
    let series = results.probes.iter().find(|s| s.name == name)?;
    let from = results.phases.load_start() + skip_s;
    Some(
        series
            .samples
            .iter()
            .filter(|s| results.phases.phase_of(s.t) == Phase::Loaded && s.t >= from)
            .filter_map(|s| s.rtt_ms)
            .collect(),
    )
}

pub(crate) fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| {
        if v.abs() >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    })
}

pub(crate) fn mbit(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| {
        if v >= 10e6 {
            format!("{:.1}", v / 1e6)
        } else {
            format!("{:.3}", v / 1e6)
        }
    })
}

pub(crate) fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0}%", v * 100.0))
}

/// The probe classes any row has, in first-seen order.
fn probe_names(rows: &[Row]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in rows.iter().flat_map(|r| &r.probes) {
        if !names.contains(&p.name) {
            names.push(p.name.clone());
        }
    }
    names
}

/// The comparison as a fixed-width text table: idle latency, induced p50/p99 per probe class,
/// goodput each way with its share of the theoretical, grade.
pub fn render_text(rows: &[Row]) -> String {
    let names = probe_names(rows);
    let mut header = vec!["strategy".to_string(), "idle ms".into()];
    header.extend(names.iter().map(|n| format!("{n} p50/p99")));
    header.push("steady p95/start-up peak".into());
    header.extend([
        "down Mbit/s".to_string(),
        "up Mbit/s".into(),
        "grade".into(),
    ]);
    let mut table = vec![header];
    for r in rows {
        let mut line = vec![
            format!(
                "{}{}",
                r.strategy,
                if r.partial { " (partial)" } else { "" }
            ),
            ms(r.idle_ms),
        ];
        for n in &names {
            line.push(match r.probe(n) {
                Some(p) => format!("{} / {}", ms(p.induced_p50_ms), ms(p.induced_p99_ms)),
                None => "-".into(),
            });
        }
        line.push(match r.primary.as_deref().and_then(|n| r.probe(n)) {
            Some(p) => format!("{} / {}", ms(p.steady_p95_ms), ms(p.startup_peak_ms)),
            None => "-".into(),
        });
        line.push(format!("{} ({})", mbit(r.down_bps), pct(r.down_share)));
        line.push(format!("{} ({})", mbit(r.up_bps), pct(r.up_share)));
        line.push(r.grade.map_or("-".into(), |g| g.to_string()));
        table.push(line);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|i| {
            table
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in &table {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str("(latency: induced = loaded minus idle, ms; steady = the load after its first 3 s, start-up = those 3 s, of the primary probe; goodput: % of the link's theoretical TCP goodput, less the probes and the other direction's ACKs)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_report::synthetic;

    fn row(strategy: Strategy) -> Row {
        Row::from_results(
            strategy,
            &synthetic::rrul(3),
            &LinkProfile::shipped("vdsl2").expect("vdsl2"),
        )
    }

    #[test]
    fn a_row_carries_the_summary_numbers_and_shares_of_the_link() {
        let results = synthetic::rrul(3);
        let summary = Summary::from_results(&results);
        let r = row(Strategy::Unbloat);
        assert_eq!(r.idle_ms, summary.idle_latency_ms);
        assert_eq!(r.grade, summary.grade);
        assert_eq!(r.probes.len(), summary.probes.len());
        let vdsl2 = LinkProfile::shipped("vdsl2").expect("vdsl2");
        let plain = vdsl2.theoretical_goodput(unbloat_units::Rate::from_mbit(80));
        let load = |dir| {
            let bytes: u64 = results
                .streams
                .iter()
                .filter(|s| s.direction == dir)
                .map(|s| s.total_bytes)
                .sum();
            bytes as f64 * 8.0 / results.phases.load_s
        };
        let (down, up) = (load(Direction::Down), load(Direction::Up));
        assert_eq!(r.down_bps, Some(down));
        let best = theory::theoretical_in_test(&vdsl2, &results, Direction::Down, Some(up));
        assert_eq!(r.down_share, Some(down / best.bits_per_sec() as f64));
        // The upload's ACKs and the probes leave less than the plain formula's figure.
        assert!(best < plain, "{best} vs {plain}");
        // p95 lies between p50 and p99 for every class that has all three.
        for p in &r.probes {
            if let (Some(a), Some(b), Some(c)) =
                (p.induced_p50_ms, p.induced_p95_ms, p.induced_p99_ms)
            {
                assert!(a <= b && b <= c, "{p:?}");
            }
        }
    }

    #[test]
    fn loaded_rtts_can_leave_out_the_start_of_the_load() {
        let results = synthetic::rrul(3);
        let all = loaded_rtts(&results, "UDP BE", 0.0).expect("UDP BE");
        let later = loaded_rtts(&results, "UDP BE", 1.0).expect("UDP BE");
        let series = results.probes.iter().find(|s| s.name == "UDP BE").unwrap();
        let (start, end) = (results.phases.load_start(), results.phases.load_end());
        let count = |from: f64| {
            series
                .samples
                .iter()
                .filter(|s| s.t >= from && s.t < end && s.rtt_ms.is_some())
                .count()
        };
        assert_eq!(all.len(), count(start));
        assert_eq!(later.len(), count(start + 1.0));
        assert!(later.len() < all.len());
        assert_eq!(loaded_rtts(&results, "nosuch", 0.0), None);
    }

    #[test]
    fn the_text_table_has_a_line_per_strategy_and_a_column_per_probe_class() {
        let rows = [row(Strategy::None), row(Strategy::Unbloat)];
        let text = render_text(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("strategy"));
        assert!(lines[0].contains("UDP BE p50/p99"), "{}", lines[0]);
        assert!(lines[1].starts_with("none "));
        assert!(lines[2].starts_with("unbloat "));
        assert!(lines[2].contains('%'));
    }
}
