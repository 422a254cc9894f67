//! SVG plots of a run, written by hand (no plotting crate): small, dependency-free, and the
//! files open in any browser.
//!
//! - [`timeseries`]: flent's `all_scaled` look: download per stream and total, upload per stream
//!   and total, latency per probe class, stacked on one time axis with the load phase shaded.
//! - [`cdf`]: the distribution of latency per probe class, idle (dashed) against loaded (solid).
//! - [`spread`]: seed 004's picture: per second of the run, the median latency as a line with the
//!   5–95 % and 25–75 % ranges shaded around it and every probe as a dot.
//! - [`compare`]: flent's "compare" view: several runs (one per strategy) on the same axes, the
//!   primary probe's round trip over time and its distribution under load (1000x400).
//! - [`location`]: where the queue stands, per direction, stacked by place; first, and only for
//!   a run that located its delay.
//!
//! What callers can rely on: each render function returns a complete SVG document (800x600)
//! for any [`Results`], including empty or partial ones (the chart then says "no data"); every
//! data series is an element with `data-series="<name>"`, so tests and people can find it.

pub mod axis;
pub mod cdf;
pub mod compare;
pub mod location;
pub mod spread;
pub mod svg;
pub mod timeseries;

use std::path::{Path, PathBuf};

use crate::model::{Phases, Results};
use crate::ReportError;
use axis::{Frame, Scale};
use svg::{Anchor, Svg};

pub const WIDTH: f64 = 800.0;
pub const HEIGHT: f64 = 600.0;

/// The plots every run has, by file name suffix; `location` comes first when the run located
/// its delay.
pub const PLOTS: [&str; 3] = ["timeseries", "latency_cdf", "latency_spread"];

/// Renders every plot of `results`, as (suffix, SVG text).
pub fn render_all(results: &Results) -> Vec<(&'static str, String)> {
    let located =
        crate::locate::located(results).map(|l| ("location", location::render(results, &l)));
    located
        .into_iter()
        .chain([
            ("timeseries", timeseries::render(results)),
            ("latency_cdf", cdf::render(results)),
            ("latency_spread", spread::render(results)),
        ])
        .collect()
}

/// Writes `timeseries.svg`, `latency_cdf.svg` and `latency_spread.svg` into `dir`, and
/// `location.svg` for a run that located its delay.
pub fn write_plots(results: &Results, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    write_plots_with_prefix(results, dir, "")
}

/// Like [`write_plots`], with `prefix` before each file name (`<prefix>timeseries.svg`).
pub fn write_plots_with_prefix(
    results: &Results,
    dir: &Path,
    prefix: &str,
) -> Result<Vec<PathBuf>, ReportError> {
    let mut written = Vec::new();
    for (name, text) in render_all(results) {
        let path = dir.join(format!("{prefix}{name}.svg"));
        unbloat_safefs::write(&path, text, crate::FILE_MODE).map_err(|source| ReportError::Io {
            action: "writing plot",
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// The title block every plot starts with: what, and which run.
fn title(svg: &mut Svg, what: &str, results: &Results) {
    svg.text(WIDTH / 2.0, 24.0, 16.0, Anchor::Middle, what);
    let md = &results.metadata;
    // A field nobody recorded is left out rather than printed: an unset hostname reads
    // "(none)" in /proc (every User-Mode Linux guest of the lab has one).
    let known = |s: &str| {
        let s = s.trim();
        (!s.is_empty() && s != "(none)").then(|| s.to_string())
    };
    let parts = [
        known(&md.profile),
        known(&md.remote).map(|r| format!("to {r}")),
        known(&md.hostname).map(|h| format!("from {h}")),
    ];
    let mut sub = parts.into_iter().flatten().collect::<Vec<_>>().join(" ");
    if md.partial {
        sub.push_str(" (PARTIAL: ");
        sub.push_str(md.partial_reason.as_deref().unwrap_or("ended early"));
        sub.push(')');
    }
    svg.text(WIDTH / 2.0, 42.0, 11.0, Anchor::Middle, &sub);
}

/// Shades the loaded phase of `phases` in `frame`, labelled "load" on the first panel.
fn shade_load(svg: &mut Svg, frame: Frame, xs: &Scale, phases: &Phases, label: bool) {
    let x0 = xs.px(phases.load_start()).clamp(frame.x, frame.right());
    let x1 = xs.px(phases.load_end()).clamp(frame.x, frame.right());
    if x1 > x0 {
        svg.rect(x0, frame.y, x1 - x0, frame.h, "#f4a300", Some(0.10));
        if label {
            svg.text(
                (x0 + x1) / 2.0,
                frame.y + 12.0,
                10.0,
                Anchor::Middle,
                "load",
            );
        }
    }
}

/// "no data" in the middle of a frame.
fn no_data(svg: &mut Svg, frame: Frame, what: &str) {
    svg.text(
        frame.x + frame.w / 2.0,
        frame.y + frame.h / 2.0,
        13.0,
        Anchor::Middle,
        what,
    );
}

#[cfg(test)]
mod tests;
