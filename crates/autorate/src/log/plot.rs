//! The log's plot (`unbloat plot LOG`): rates, achieved rates and delays over time.

use unbloat_report::plot::axis::{color, draw_axes, legend, nice_range, Frame, LegendEntry};
use unbloat_report::plot::svg::{Anchor, Svg};

use super::TickLine;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 720.0;
const LEFT: f64 = 80.0;
const LEGEND: f64 = 170.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 50.0;
const GAP: f64 = 18.0;

/// Three panels on one time axis: the download's shaper rate and what it carried, the same for
/// the upload, and each direction's average delay delta; cuts for bloat marked with dots.
pub fn plot(title: &str, ticks: &[TickLine]) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT);
    svg.text(WIDTH / 2.0, 26.0, 15.0, Anchor::Middle, title);
    let t_end = ticks.last().map_or(1.0, |t| t.t).max(1.0);
    let x = nice_range(0.0, t_end, 10);
    let h = (HEIGHT - TOP - BOTTOM - 2.0 * GAP) / 3.0;
    let w = WIDTH - LEFT - LEGEND;
    let frame = |i: f64| Frame {
        x: LEFT,
        y: TOP + i * (h + GAP),
        w,
        h,
    };
    let mbit = |b: u64| b as f64 / 1e6;
    for (i, (name, side)) in [("download", false), ("upload", true)]
        .into_iter()
        .enumerate()
    {
        let dir = |t: &TickLine| if side { t.up.clone() } else { t.down.clone() };
        let top = ticks
            .iter()
            .map(|t| mbit(dir(t).rate_bps).max(mbit(dir(t).achieved_bps)))
            .fold(1.0, f64::max);
        let f = frame(i as f64);
        let (xs, ys) = draw_axes(
            &mut svg,
            f,
            x,
            nice_range(0.0, top, 5),
            None,
            &format!("{name} Mbit/s"),
            false,
        );
        let series = |v: &dyn Fn(&TickLine) -> f64| -> Vec<Option<(f64, f64)>> {
            ticks
                .iter()
                .map(|t| Some((xs.px(t.t), ys.px(v(t)))))
                .collect()
        };
        svg.polyline(
            &series(&|t| mbit(dir(t).achieved_bps)),
            color(1),
            1.0,
            None,
            "achieved",
            None,
        );
        svg.polyline(
            &series(&|t| mbit(dir(t).rate_bps)),
            color(0),
            1.6,
            None,
            "rate",
            None,
        );
        for t in ticks.iter().filter(|t| dir(t).moved == "bloat") {
            svg.circle(xs.px(t.t), ys.px(mbit(dir(t).rate_bps)), 2.5, color(5));
        }
        let entries = [
            LegendEntry {
                label: "shaper rate",
                color: color(0),
                width: 1.6,
                dash: None,
            },
            LegendEntry {
                label: "achieved",
                color: color(1),
                width: 1.0,
                dash: None,
            },
            LegendEntry {
                label: "cut for bloat",
                color: color(5),
                width: 3.0,
                dash: None,
            },
        ];
        legend(&mut svg, f.right() + 14.0, f.y + 10.0, None, &entries);
    }
    let top = ticks
        .iter()
        .map(|t| t.down.delta_ms.max(t.up.delta_ms))
        .fold(5.0, f64::max);
    let f = frame(2.0);
    let (xs, ys) = draw_axes(
        &mut svg,
        f,
        x,
        nice_range(0.0, top, 5),
        Some("seconds"),
        "delay delta ms",
        true,
    );
    for (i, up) in [false, true].into_iter().enumerate() {
        let pts: Vec<Option<(f64, f64)>> = ticks
            .iter()
            .map(|t| {
                Some((
                    xs.px(t.t),
                    ys.px(if up { t.up.delta_ms } else { t.down.delta_ms }),
                ))
            })
            .collect();
        svg.polyline(
            &pts,
            color(i * 2),
            1.2,
            None,
            if up { "delta-up" } else { "delta-down" },
            None,
        );
    }
    let entries = [
        LegendEntry {
            label: "download",
            color: color(0),
            width: 1.2,
            dash: None,
        },
        LegendEntry {
            label: "upload",
            color: color(2),
            width: 1.2,
            dash: None,
        },
    ];
    legend(&mut svg, f.right() + 14.0, f.y + 10.0, None, &entries);
    svg.finish()
}
