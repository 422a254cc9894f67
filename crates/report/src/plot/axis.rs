//! Scales and axes shared by every plot: a linear map from data to pixels, "nice" tick values
//! (1, 2, 2.5 or 5 times a power of ten, Heckbert's "Nice numbers for graph labels", Graphics
//! Gems 1990), gridlines, tick labels and axis titles.

use super::svg::{Anchor, Svg};

/// A linear map from the data interval `[d0, d1]` to the pixel interval `[p0, p1]`.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub d0: f64,
    pub d1: f64,
    pub p0: f64,
    pub p1: f64,
}

impl Scale {
    pub fn new(d0: f64, d1: f64, p0: f64, p1: f64) -> Scale {
        // A zero-width domain would divide by zero; widen it around the value.
        let (d0, d1) = if (d1 - d0).abs() < f64::EPSILON {
            (d0 - 0.5, d0 + 0.5)
        } else {
            (d0, d1)
        };
        Scale { d0, d1, p0, p1 }
    }

    pub fn px(&self, v: f64) -> f64 {
        self.p0 + (v - self.d0) / (self.d1 - self.d0) * (self.p1 - self.p0)
    }
}

/// The nice number closest to `x` (> 0): 1, 2, 2.5 or 5 times a power of ten, at least `x`.
fn nice_step(x: f64) -> f64 {
    let exp = x.log10().floor();
    let base = 10f64.powf(exp);
    let f = x / base;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * base
}

/// Ticks covering `[lo, hi]` with about `target` intervals: returns (nice lo, nice hi, step).
/// The returned range contains `[lo, hi]` and starts and ends on a tick.
pub fn nice_range(lo: f64, hi: f64, target: usize) -> (f64, f64, f64) {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
    let step = nice_step((hi - lo) / target.max(1) as f64);
    let nlo = (lo / step).floor() * step;
    let nhi = (hi / step).ceil() * step;
    (nlo, nhi, step)
}

/// The tick values from `lo` to `hi` inclusive, `step` apart (computed by multiplication, so
/// 0.1 * 3 is printed as 0.3, not 0.30000000000000004).
pub fn ticks(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    // NaN steps fail `step > 0.0` too.
    if step.is_nan() || step <= 0.0 || !lo.is_finite() || !hi.is_finite() {
        return Vec::new();
    }
    let n = ((hi - lo) / step + 1e-9).floor() as usize;
    (0..=n.min(1000)).map(|i| lo + i as f64 * step).collect()
}

/// A tick label with just enough decimals for `step`.
pub fn tick_label(v: f64, step: f64) -> String {
    // The fewest decimals that write the step exactly (2.5 needs one, 0.25 two, 50 none).
    let decimals = (0..6)
        .find(|&d| {
            let scaled = step * 10f64.powi(d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.abs().max(1.0)
        })
        .unwrap_or(6) as usize;
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// A rectangle of the canvas holding one chart.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Frame {
    pub fn right(&self) -> f64 {
        self.x + self.w
    }
    pub fn bottom(&self) -> f64 {
        self.y + self.h
    }
}

pub const GRID: &str = "#dddddd";
pub const AXIS: &str = "#444444";

/// Draws the frame, gridlines, ticks and labels of a chart; returns the (x, y) scales.
/// `x_labels` is false for stacked panels that share the x axis of the bottom one.
#[allow(clippy::too_many_arguments)]
pub fn draw_axes(
    svg: &mut Svg,
    frame: Frame,
    x: (f64, f64, f64),
    y: (f64, f64, f64),
    x_title: Option<&str>,
    y_title: &str,
    x_labels: bool,
) -> (Scale, Scale) {
    let xs = Scale::new(x.0, x.1, frame.x, frame.right());
    let ys = Scale::new(y.0, y.1, frame.bottom(), frame.y);
    svg.rect(frame.x, frame.y, frame.w, frame.h, "#fafafa", None);
    for t in ticks(x.0, x.1, x.2) {
        let px = xs.px(t);
        svg.line(px, frame.y, px, frame.bottom(), GRID, 1.0);
        svg.line(px, frame.bottom(), px, frame.bottom() + 4.0, AXIS, 1.0);
        if x_labels {
            svg.text(
                px,
                frame.bottom() + 16.0,
                11.0,
                Anchor::Middle,
                &tick_label(t, x.2),
            );
        }
    }
    for t in ticks(y.0, y.1, y.2) {
        let py = ys.px(t);
        svg.line(frame.x, py, frame.right(), py, GRID, 1.0);
        svg.line(frame.x - 4.0, py, frame.x, py, AXIS, 1.0);
        svg.text(
            frame.x - 7.0,
            py + 4.0,
            11.0,
            Anchor::End,
            &tick_label(t, y.2),
        );
    }
    svg.line(
        frame.x,
        frame.bottom(),
        frame.right(),
        frame.bottom(),
        AXIS,
        1.0,
    );
    svg.line(frame.x, frame.y, frame.x, frame.bottom(), AXIS, 1.0);
    if let Some(title) = x_title {
        svg.text(
            frame.x + frame.w / 2.0,
            frame.bottom() + 34.0,
            12.0,
            Anchor::Middle,
            title,
        );
    }
    svg.vtext(frame.x - 48.0, frame.y + frame.h / 2.0, 12.0, y_title);
    (xs, ys)
}

/// One legend entry.
pub struct LegendEntry<'a> {
    pub label: &'a str,
    pub color: &'a str,
    pub width: f64,
    pub dash: Option<&'a str>,
}

/// A legend in a column starting at (x, y).
pub fn legend(svg: &mut Svg, x: f64, y: f64, title: Option<&str>, entries: &[LegendEntry<'_>]) {
    let mut y = y;
    if let Some(t) = title {
        svg.text(x, y + 4.0, 12.0, Anchor::Start, t);
        y += 16.0;
    }
    for e in entries {
        let pts = [Some((x, y)), Some((x + 22.0, y))];
        svg.polyline(&pts, e.color, e.width, e.dash, "legend", None);
        svg.text(x + 28.0, y + 4.0, 11.0, Anchor::Start, e.label);
        y += 15.0;
    }
}

/// Colours distinguishable with the common colour-vision deficiencies (Okabe & Ito, 2008),
/// black left out: it is reserved for totals and medians.
pub const PALETTE: [&str; 7] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
];

pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nice_ranges() {
        assert_eq!(nice_range(0.0, 47.0, 5), (0.0, 50.0, 10.0));
        assert_eq!(nice_range(0.0, 1.3, 5), (0.0, 1.5, 0.5));
        assert_eq!(nice_range(0.0, 30.0, 6), (0.0, 30.0, 5.0));
        assert_eq!(nice_range(0.0, 0.0, 5).0, 0.0);
        assert_eq!(nice_range(f64::NAN, 1.0, 5), (0.0, 1.0, 0.2));
    }

    #[test]
    fn tick_labels_are_clean() {
        assert_eq!(
            ticks(0.0, 1.0, 0.2)
                .iter()
                .map(|&t| tick_label(t, 0.2))
                .collect::<Vec<_>>(),
            ["0", "0.2", "0.4", "0.6", "0.8", "1"]
        );
        assert_eq!(tick_label(2.5, 2.5), "2.5");
        assert_eq!(tick_label(5.0, 2.5), "5");
        assert_eq!(tick_label(0.25, 0.25), "0.25");
        assert_eq!(tick_label(150.0, 50.0), "150");
    }

    proptest! {
        #[test]
        fn nice_range_covers_the_data(lo in -1e6f64..1e6, span in 1e-3f64..1e6, target in 2usize..10) {
            let hi = lo + span;
            let (a, b, step) = nice_range(lo, hi, target);
            prop_assert!(a <= lo && b >= hi - 1e-9 * hi.abs().max(1.0));
            let n = ((b - a) / step).round();
            prop_assert!(n >= 1.0 && n <= 2.5 * target as f64 + 2.0, "{} ticks", n);
        }
    }
}
