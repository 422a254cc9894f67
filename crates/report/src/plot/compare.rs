//! flent's "compare" view: several runs of the same test (one per strategy: no shaping, unbloat,
//! sqm-scripts, ...) on the same axes, so the problem and its cure are seen side by side. Two
//! panels of the primary probe class ([`Results::primary_probe`], UDP BE in rrul):
//!
//! - left, its round trip over time, every run's clock set to 0 where its load starts (runs start
//!   their loads at slightly different instants); the load is shaded and its steady state, the
//!   load after its first [`STARTUP_S`], marked, since that is where the lab judges a cure;
//! - right, the distribution (CDF) of its round trips under load.
//!
//! One colour per run, the same in both panels; each run's line is an element with
//! `data-series="<label>"` in each panel. The latency axes stop at 1.1 times the largest
//! loaded 99th percentile of any run, so one outlier does not flatten the others.

use super::axis::{color, draw_axes, legend, nice_range, Frame, LegendEntry};
use super::cdf::cdf_points;
use super::no_data;
use super::svg::{Anchor, Svg};
use crate::model::{Phase, Results, STARTUP_S};
use crate::stats;

pub const WIDTH: f64 = 1000.0;
pub const HEIGHT: f64 = 400.0;
const TOP: f64 = 64.0;
const BOTTOM: f64 = 84.0;

/// One run of the comparison: its label (the strategy's name) and its results.
pub struct Run<'a> {
    pub label: &'a str,
    pub results: &'a Results,
}

/// The primary probe's answered samples as (seconds since the load started, RTT ms), and its
/// loaded RTTs, of one run.
fn primary(results: &Results) -> (Vec<Option<(f64, f64)>>, Vec<f64>) {
    let Some(p) = results.primary_probe() else {
        return (vec![], vec![]);
    };
    let start = results.phases.load_start();
    let over_time = p
        .samples
        .iter()
        .filter(|s| s.t.is_finite())
        .map(|s| s.rtt_ms.map(|r| (s.t - start, r)))
        .collect();
    let loaded = p
        .samples
        .iter()
        .filter(|s| results.phases.phase_of(s.t) == Phase::Loaded)
        .filter_map(|s| s.rtt_ms)
        .collect();
    (over_time, loaded)
}

/// The comparison of `runs` as one SVG document: `title` and `subtitle` on top, the two panels,
/// and a legend of the runs below them.
pub fn render(title: &str, subtitle: &str, runs: &[Run<'_>]) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT);
    svg.text(WIDTH / 2.0, 24.0, 17.0, Anchor::Middle, title);
    svg.text(WIDTH / 2.0, 43.0, 12.0, Anchor::Middle, subtitle);
    let data: Vec<_> = runs.iter().map(|r| primary(r.results)).collect();
    let probe = runs
        .iter()
        .find_map(|r| r.results.primary_probe())
        .map_or("probe".to_string(), |p| p.name.clone());

    let top = data
        .iter()
        .filter_map(|(_, loaded)| stats::percentile(loaded, 99.0))
        .fold(0.0, f64::max);
    let latency = nice_range(0.0, (top * 1.1).max(1.0), 5);
    let before = runs
        .iter()
        .map(|r| r.results.phases.idle_before_s)
        .fold(0.0, f64::max);
    let after = runs
        .iter()
        .map(|r| r.results.phases.load_s + r.results.phases.idle_after_s)
        .fold(1.0, f64::max);
    let load = runs
        .iter()
        .map(|r| r.results.phases.load_s)
        .fold(0.0, f64::max);

    // Left: the round trip over time.
    let h = HEIGHT - TOP - BOTTOM;
    let left = Frame {
        x: 70.0,
        y: TOP,
        w: 520.0,
        h,
    };
    let (xs, ys) = draw_axes(
        &mut svg,
        left,
        nice_range(-before, after, 8),
        latency,
        Some("Time since the load started (s)"),
        &format!("{probe} round trip (ms)"),
        true,
    );
    let x_of = |t: f64| xs.px(t).clamp(left.x, left.right());
    let (l0, s0, l1) = (x_of(0.0), x_of(STARTUP_S.min(load)), x_of(load));
    svg.rect(l0, left.y, s0 - l0, left.h, "#f4a300", Some(0.08));
    svg.rect(s0, left.y, l1 - s0, left.h, "#f4a300", Some(0.18));
    svg.text(
        (l0 + s0) / 2.0,
        left.y + 13.0,
        10.0,
        Anchor::Middle,
        "start-up",
    );
    svg.text(
        (s0 + l1) / 2.0,
        left.y + 13.0,
        10.0,
        Anchor::Middle,
        "steady state (judged)",
    );
    let dash = [Some((s0, left.y)), Some((s0, left.bottom()))];
    svg.polyline(&dash, "#8a5a00", 1.0, Some("4 3"), "steady-start", None);
    if top <= 0.0 {
        no_data(&mut svg, left, "no latency measurements");
    }
    let clip = svg.clip(left.x, left.y, left.w, left.h);
    for (k, (run, (over_time, _))) in runs.iter().zip(&data).enumerate() {
        let pts: Vec<_> = over_time
            .iter()
            .map(|p| p.map(|(t, r)| (xs.px(t), ys.px(r))))
            .collect();
        svg.polyline(&pts, color(k), 1.6, None, run.label, Some(&clip));
    }

    // Right: the distribution under load.
    let right = Frame {
        x: left.right() + 90.0,
        y: TOP,
        w: WIDTH - left.right() - 90.0 - 20.0,
        h,
    };
    let (cx, cy) = draw_axes(
        &mut svg,
        right,
        latency,
        (0.0, 100.0, 25.0),
        Some("Round trip under load (ms)"),
        "Probes at or below (%)",
        true,
    );
    let clip = svg.clip(right.x, right.y, right.w, right.h);
    for (k, (run, (_, loaded))) in runs.iter().zip(&data).enumerate() {
        let pts: Vec<_> = cdf_points(loaded)
            .iter()
            .map(|&(v, p)| Some((cx.px(v), cy.px(p))))
            .collect();
        svg.polyline(&pts, color(k), 2.0, None, run.label, Some(&clip));
    }

    // The legend, in a row under both panels: one entry per run.
    let entries: Vec<_> = runs
        .iter()
        .enumerate()
        .map(|(k, r)| LegendEntry {
            label: r.label,
            color: color(k),
            width: 3.0,
            dash: None,
        })
        .collect();
    let per_row = 5;
    let rows = entries.len().div_ceil(per_row);
    for (row, chunk) in entries.chunks(per_row).enumerate() {
        let y = HEIGHT - 16.0 - 16.0 * (rows - 1 - row) as f64;
        for (i, e) in chunk.iter().enumerate() {
            let x = 70.0 + i as f64 * (WIDTH - 90.0) / per_row as f64;
            legend(&mut svg, x, y, None, std::slice::from_ref(e));
        }
    }
    svg.finish()
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
