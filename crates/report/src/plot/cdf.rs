//! Cumulative distribution of latency per probe class: idle (before the load, dashed) against
//! loaded (solid), same colour per class. The further right the solid line sits from the dashed
//! one, the more latency the load added; a long flat tail is the bufferbloat. The x axis stops
//! at 1.1 times the largest 99th percentile; lines run off the right edge beyond that.

use super::axis::{color, draw_axes, legend, nice_range, Frame, LegendEntry};
use super::svg::Svg;
use super::{no_data, title, HEIGHT, WIDTH};
use crate::model::{Phase, Results};
use crate::stats::{self, Sorted};

/// Points of the empirical CDF of `values`: (value, percent of samples at or below it).
pub fn cdf_points(values: &[f64]) -> Vec<(f64, f64)> {
    let s = Sorted::new(values);
    let n = s.len() as f64;
    s.values()
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, 100.0 * (i as f64 + 1.0) / n))
        .collect()
}

pub fn render(results: &Results) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT);
    title(
        &mut svg,
        "Latency distribution: idle vs under load",
        results,
    );
    let frame = Frame {
        x: 80.0,
        y: 60.0,
        w: WIDTH - 80.0 - 190.0,
        h: HEIGHT - 60.0 - 60.0,
    };
    let phases = results.phases;
    let classes: Vec<(&str, Vec<f64>, Vec<f64>)> = results
        .probes
        .iter()
        .map(|p| {
            let in_phase = |ph: Phase| -> Vec<f64> {
                p.samples
                    .iter()
                    .filter(|x| phases.phase_of(x.t) == ph)
                    .filter_map(|x| x.rtt_ms)
                    .collect()
            };
            (
                p.name.as_str(),
                in_phase(Phase::IdleBefore),
                in_phase(Phase::Loaded),
            )
        })
        .collect();
    let top = classes
        .iter()
        .flat_map(|(_, idle, loaded)| {
            [
                stats::percentile(idle, 99.0),
                stats::percentile(loaded, 99.0),
            ]
        })
        .flatten()
        .fold(0.0, f64::max);
    let (xs, ys) = draw_axes(
        &mut svg,
        frame,
        nice_range(0.0, (top * 1.1).max(1.0), 8),
        (0.0, 100.0, 20.0),
        Some("Round-trip time (ms)"),
        "Probes at or below (%)",
        true,
    );
    if top <= 0.0 {
        no_data(&mut svg, frame, "no latency measurements");
    }
    let clip = svg.clip(frame.x, frame.y, frame.w, frame.h);
    let labels: Vec<(String, String)> = classes
        .iter()
        .map(|(n, _, _)| (format!("{n} idle"), format!("{n} loaded")))
        .collect();
    let mut entries = Vec::new();
    for (k, ((_, idle, loaded), (idle_label, loaded_label))) in
        classes.iter().zip(&labels).enumerate()
    {
        for (values, label, dash) in [
            (idle, idle_label, Some("5 4")),
            (loaded, loaded_label, None),
        ] {
            if values.is_empty() {
                continue;
            }
            let pts: Vec<_> = cdf_points(values)
                .iter()
                .map(|&(v, p)| Some((xs.px(v), ys.px(p))))
                .collect();
            svg.polyline(&pts, color(k), 1.8, dash, label, Some(&clip));
            entries.push(LegendEntry {
                label,
                color: color(k),
                width: 1.8,
                dash,
            });
        }
    }
    legend(
        &mut svg,
        frame.right() + 12.0,
        frame.y + 8.0,
        Some("Probe class"),
        &entries,
    );
    svg.finish()
}
