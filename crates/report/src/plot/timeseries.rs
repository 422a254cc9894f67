//! The three-panel timeseries (flent's `all_scaled`): download, upload and latency over the run
//! on one time axis, the load phase shaded. Panels without data are left out (a `ping` run has
//! only latency). Throughput is drawn per stream (thin) and in total (black); latency per probe
//! class, with gaps where probes were lost. The latency axis stops at 1.1 times the largest
//! 99th percentile so a single outlier does not flatten the picture (flent's "scaled").

use std::collections::BTreeMap;

use super::axis::{color, draw_axes, legend, nice_range, Frame, LegendEntry};
use super::svg::Svg;
use super::{no_data, shade_load, title, HEIGHT, WIDTH};
use crate::format;
use crate::model::{Direction, Results, StreamSeries};
use crate::stats;

const LEFT: f64 = 80.0;
const RIGHT_LEGEND: f64 = 175.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 50.0;
const GAP: f64 = 16.0;

/// Sum of the streams' samples per sample instant (rounded to the sample interval).
fn total(streams: &[&StreamSeries], interval_s: f64) -> Vec<(f64, f64)> {
    let mut sums: BTreeMap<i64, f64> = BTreeMap::new();
    for s in streams {
        for x in &s.samples {
            if x.t.is_finite() && x.bps.is_finite() {
                *sums.entry((x.t / interval_s).round() as i64).or_insert(0.0) += x.bps;
            }
        }
    }
    sums.into_iter()
        .map(|(k, v)| (k as f64 * interval_s, v))
        .collect()
}

enum Panel<'a> {
    Throughput(Direction, Vec<&'a StreamSeries>),
    Latency,
}

pub fn render(results: &Results) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT);
    title(&mut svg, "Throughput and latency over time", results);
    let interval_s = f64::from(results.metadata.sample_interval_ms.max(1)) / 1000.0;

    let mut panels = Vec::new();
    for dir in [Direction::Down, Direction::Up] {
        let streams: Vec<&StreamSeries> = results
            .streams
            .iter()
            .filter(|s| s.direction == dir)
            .collect();
        if !streams.is_empty() {
            panels.push(Panel::Throughput(dir, streams));
        }
    }
    panels.push(Panel::Latency);

    let last_t = results
        .streams
        .iter()
        .flat_map(|s| s.samples.iter().map(|x| x.t))
        .chain(
            results
                .probes
                .iter()
                .flat_map(|p| p.samples.iter().map(|x| x.t)),
        )
        .filter(|t| t.is_finite())
        .fold(results.phases.total(), f64::max);
    let x_range = nice_range(0.0, last_t.max(1.0), 8);

    let n = panels.len() as f64;
    let h = (HEIGHT - TOP - BOTTOM - GAP * (n - 1.0)) / n;
    let w = WIDTH - LEFT - RIGHT_LEGEND;
    for (i, panel) in panels.iter().enumerate() {
        let frame = Frame {
            x: LEFT,
            y: TOP + i as f64 * (h + GAP),
            w,
            h,
        };
        let last = i + 1 == panels.len();
        let x_title = last.then_some("Time (s)");
        match panel {
            Panel::Throughput(dir, streams) => {
                let word = if *dir == Direction::Down {
                    "Download"
                } else {
                    "Upload"
                };
                let tot = total(streams, interval_s);
                let max = tot.iter().map(|p| p.1).fold(0.0, f64::max);
                let (scale, unit) = format::rate_unit(max);
                let y_range = nice_range(0.0, (max / scale).max(1e-9) * 1.05, 4);
                let (xs, ys) = draw_axes(
                    &mut svg,
                    frame,
                    x_range,
                    y_range,
                    x_title,
                    &format!("{word} ({unit})"),
                    last,
                );
                shade_load(&mut svg, frame, &xs, &results.phases, i == 0);
                let clip = svg.clip(frame.x, frame.y, frame.w, frame.h);
                let mut entries = Vec::new();
                for (k, s) in streams.iter().enumerate() {
                    let pts: Vec<_> = s
                        .samples
                        .iter()
                        .map(|x| Some((xs.px(x.t), ys.px(x.bps / scale))))
                        .collect();
                    svg.polyline(&pts, color(k), 1.2, None, &s.name, Some(&clip));
                    entries.push(LegendEntry {
                        label: &s.name,
                        color: color(k),
                        width: 1.5,
                        dash: None,
                    });
                }
                let pts: Vec<_> = tot
                    .iter()
                    .map(|&(t, v)| Some((xs.px(t), ys.px(v / scale))))
                    .collect();
                let total_name = format!("{word} total");
                svg.polyline(&pts, "#000000", 2.2, None, &total_name, Some(&clip));
                entries.push(LegendEntry {
                    label: &total_name,
                    color: "#000000",
                    width: 2.2,
                    dash: None,
                });
                legend(
                    &mut svg,
                    frame.right() + 12.0,
                    frame.y + 8.0,
                    None,
                    &entries,
                );
            }
            Panel::Latency => {
                let p99 = results
                    .probes
                    .iter()
                    .filter_map(|p| {
                        let v: Vec<f64> = p.samples.iter().filter_map(|x| x.rtt_ms).collect();
                        stats::percentile(&v, 99.0)
                    })
                    .fold(0.0, f64::max);
                let y_range = nice_range(0.0, (p99 * 1.1).max(1.0), 4);
                let (xs, ys) = draw_axes(
                    &mut svg,
                    frame,
                    x_range,
                    y_range,
                    x_title,
                    "Latency (ms)",
                    last,
                );
                shade_load(&mut svg, frame, &xs, &results.phases, i == 0);
                if p99 <= 0.0 {
                    no_data(&mut svg, frame, "no latency measurements");
                }
                let clip = svg.clip(frame.x, frame.y, frame.w, frame.h);
                let mut entries = Vec::new();
                for (k, p) in results.probes.iter().enumerate() {
                    let pts: Vec<_> = p
                        .samples
                        .iter()
                        .map(|x| x.rtt_ms.map(|r| (xs.px(x.t), ys.px(r))))
                        .collect();
                    svg.polyline(&pts, color(k), 1.2, None, &p.name, Some(&clip));
                    entries.push(LegendEntry {
                        label: &p.name,
                        color: color(k),
                        width: 1.5,
                        dash: None,
                    });
                }
                legend(
                    &mut svg,
                    frame.right() + 12.0,
                    frame.y + 8.0,
                    None,
                    &entries,
                );
            }
        }
    }
    svg.finish()
}
