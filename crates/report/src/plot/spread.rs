//! Seed 004's picture: latency spread per second across the run. For every whole second, the
//! probes sent in it give a median (black line), a 25–75 % range (darker band) and a 5–95 %
//! range (lighter band); each probe is also a faint dot, and lost probes are red ticks along the
//! top. The primary probe class is drawn (UDP BE, else the first), as the seed pinged one
//! server. Seconds without any reply leave a gap rather than a made-up value.

use super::axis::{draw_axes, legend, nice_range, Frame, LegendEntry};
use super::svg::Svg;
use super::{no_data, shade_load, title, HEIGHT, WIDTH};
use crate::model::{ProbeSeries, Results};
use crate::stats::Sorted;

/// Quantiles of one second of probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// Start of the second.
    pub t: f64,
    pub p5: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
}

/// One [`Bin`] per whole second that had at least one reply, in time order; `None` for
/// seconds with probes but no reply (so the bands break there).
pub fn bins(probe: &ProbeSeries) -> Vec<Option<Bin>> {
    let mut by_second: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
    for s in probe.samples.iter().filter(|s| s.t.is_finite()) {
        let v = by_second.entry(s.t.floor() as i64).or_default();
        if let Some(r) = s.rtt_ms {
            v.push(r);
        }
    }
    let mut out = Vec::new();
    let mut prev: Option<i64> = None;
    for (sec, rtts) in by_second {
        // A second with no probes at all is also a gap.
        if prev.is_some_and(|p| sec > p + 1) {
            out.push(None);
        }
        prev = Some(sec);
        let s = Sorted::new(&rtts);
        let q = |p| s.percentile(p);
        out.push(match (q(5.0), q(25.0), q(50.0), q(75.0), q(95.0)) {
            (Some(p5), Some(p25), Some(p50), Some(p75), Some(p95)) => Some(Bin {
                t: sec as f64,
                p5,
                p25,
                p50,
                p75,
                p95,
            }),
            _ => None,
        });
    }
    out
}

pub fn render(results: &Results) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT);
    title(&mut svg, "Latency spread per second", results);
    let frame = Frame {
        x: 80.0,
        y: 60.0,
        w: WIDTH - 80.0 - 170.0,
        h: HEIGHT - 60.0 - 60.0,
    };
    let Some(probe) = results.primary_probe() else {
        let axes = ((0.0, 10.0, 2.0), (0.0, 100.0, 20.0));
        draw_axes(
            &mut svg,
            frame,
            axes.0,
            axes.1,
            Some("Time (s)"),
            "Latency (ms)",
            true,
        );
        no_data(&mut svg, frame, "no latency measurements");
        return svg.finish();
    };
    let bins = bins(probe);
    let top = bins.iter().flatten().map(|b| b.p95).fold(0.0, f64::max);
    let last_t = probe
        .samples
        .iter()
        .map(|s| s.t)
        .filter(|t| t.is_finite())
        .fold(results.phases.total(), f64::max);
    let (xs, ys) = draw_axes(
        &mut svg,
        frame,
        nice_range(0.0, last_t.max(1.0), 8),
        nice_range(0.0, (top * 1.1).max(1.0), 6),
        Some("Time (s)"),
        &format!("{} round-trip time (ms)", probe.name),
        true,
    );
    shade_load(&mut svg, frame, &xs, &results.phases, true);
    if top <= 0.0 {
        no_data(&mut svg, frame, "no replies");
    }
    let clip = svg.clip(frame.x, frame.y, frame.w, frame.h);
    // Bin quantiles sit at the middle of their second.
    let mid = |b: &Bin| xs.px(b.t + 0.5);
    for run in bins.split(Option::is_none) {
        let run: Vec<&Bin> = run.iter().flatten().collect();
        if run.is_empty() {
            continue;
        }
        type Edge = fn(&Bin) -> f64;
        let bands: [(Edge, Edge, &str, &str); 2] = [
            (|b| b.p5, |b| b.p95, "#b9d7ee", "5-95 %"),
            (|b| b.p25, |b| b.p75, "#6fa8d6", "25-75 %"),
        ];
        for (lo, hi, fill, name) in bands {
            // A single second would be a zero-width band: give it the width of its second.
            let mut pts: Vec<(f64, f64)> = Vec::new();
            if run.len() == 1 {
                let b = run[0];
                pts.extend([(xs.px(b.t), ys.px(hi(b))), (xs.px(b.t + 1.0), ys.px(hi(b)))]);
                pts.extend([(xs.px(b.t + 1.0), ys.px(lo(b))), (xs.px(b.t), ys.px(lo(b)))]);
            } else {
                pts.extend(run.iter().map(|b| (mid(b), ys.px(hi(b)))));
                pts.extend(run.iter().rev().map(|b| (mid(b), ys.px(lo(b)))));
            }
            svg.polygon(&pts, fill, name, Some(&clip));
        }
    }
    for s in &probe.samples {
        match s.rtt_ms {
            Some(r) if r <= top * 1.1 => svg.circle(xs.px(s.t), ys.px(r), 1.3, "#1f4e79"),
            Some(_) => {}
            None => svg.line(
                xs.px(s.t),
                frame.y,
                xs.px(s.t),
                frame.y + 7.0,
                "#d00000",
                1.5,
            ),
        }
    }
    let median: Vec<_> = bins
        .iter()
        .map(|b| b.as_ref().map(|b| (mid(b), ys.px(b.p50))))
        .collect();
    svg.polyline(&median, "#000000", 2.0, None, "median", Some(&clip));
    legend(
        &mut svg,
        frame.right() + 12.0,
        frame.y + 8.0,
        Some(&probe.name),
        &[
            LegendEntry {
                label: "median",
                color: "#000000",
                width: 2.0,
                dash: None,
            },
            LegendEntry {
                label: "25-75 %",
                color: "#6fa8d6",
                width: 8.0,
                dash: None,
            },
            LegendEntry {
                label: "5-95 %",
                color: "#b9d7ee",
                width: 8.0,
                dash: None,
            },
            LegendEntry {
                label: "lost (top ticks)",
                color: "#d00000",
                width: 1.5,
                dash: None,
            },
        ],
    );
    svg.finish()
}
