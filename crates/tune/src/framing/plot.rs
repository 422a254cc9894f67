//! The sweep's picture: the lowest round trip of each size as a dot, the fitted model as a
//! line through them (the staircase on ATM; otherwise the model's straight line, its sawtooth
//! left out as the noise it is), and the verdict on top.
//! Drawn with the report crate's SVG helpers, 800x600 like the run's other plots.

use unbloat_report::plot::axis::{color, draw_axes, legend, nice_range, Frame, LegendEntry};
use unbloat_report::plot::svg::{Anchor, Svg};
use unbloat_report::plot::{HEIGHT, WIDTH};

use super::{FramingGuess, SizeMin};

/// A complete SVG document for the sweep `mins` and what [`super::detect_minima`] made of it.
/// Every size is a `<circle>`; the model is the series `data-series="model"`.
/// `assumed`: what the searches used instead when the sweep could not decide (said on top).
pub fn render_svg(mins: &[SizeMin], guess: &FramingGuess, assumed: Option<&str>) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT);
    svg.text(
        WIDTH / 2.0,
        24.0,
        16.0,
        Anchor::Middle,
        "Framing sweep: lowest round trip per packet size",
    );
    let mut said = verdict(guess);
    if let Some(a) = assumed {
        said = format!("{said}; searched with {a}");
    }
    svg.text(WIDTH / 2.0, 42.0, 11.0, Anchor::Middle, &said);
    let frame = Frame {
        x: 80.0,
        y: 60.0,
        w: WIDTH - 80.0 - 170.0,
        h: HEIGHT - 60.0 - 70.0,
    };
    let (x0, x1) = match (mins.first(), mins.last()) {
        (Some(a), Some(b)) => (f64::from(a.ip_bytes), f64::from(b.ip_bytes)),
        _ => (0.0, 1.0),
    };
    let lo = mins.iter().map(|m| m.min_ms).fold(f64::INFINITY, f64::min);
    let hi = mins
        .iter()
        .map(|m| m.min_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    let pad = ((hi - lo) * 0.1).max(0.01);
    let (xs, ys) = draw_axes(
        &mut svg,
        frame,
        nice_range(x0, x1, 8),
        nice_range(lo - pad, hi + pad, 6),
        Some("IP packet size (bytes, header included)"),
        "Lowest round-trip time (ms)",
        true,
    );
    if mins.is_empty() {
        svg.text(
            frame.x + frame.w / 2.0,
            frame.y + frame.h / 2.0,
            13.0,
            Anchor::Middle,
            "no replies",
        );
    }
    for m in mins {
        svg.circle(xs.px(f64::from(m.ip_bytes)), ys.px(m.min_ms), 2.2, color(0));
    }
    let mut entries = Vec::new();
    if let Some(mut model) = guess.model.filter(|_| !mins.is_empty()) {
        if guess.family != super::Family::Atm {
            // Without cells the sawtooth fitted is noise: draw the line it rides on.
            model.saw_ms = 0.0;
        }
        let clip = svg.clip(frame.x, frame.y, frame.w, frame.h);
        // One point per byte and a vertical at each step: the staircase drawn as it is.
        let pts: Vec<Option<(f64, f64)>> = (x0 as u32..=x1 as u32)
            .flat_map(|x| {
                let x = f64::from(x);
                [
                    Some((xs.px(x - 0.5), ys.px(model.rtt_ms(x)))),
                    Some((xs.px(x + 0.5), ys.px(model.rtt_ms(x)))),
                ]
            })
            .collect();
        svg.polyline(&pts, "#000000", 1.4, None, "model", Some(&clip));
        entries.push(LegendEntry {
            label: "fitted model",
            color: "#000000",
            width: 1.4,
            dash: None,
        });
    }
    entries.push(LegendEntry {
        label: "lowest RTT of a size",
        color: color(0),
        width: 3.0,
        dash: None,
    });
    legend(
        &mut svg,
        frame.right() + 12.0,
        frame.y + 8.0,
        None,
        &entries,
    );
    svg.finish()
}

/// The subtitle: family and the evidence ([`FramingGuess::evidence`]).
fn verdict(g: &FramingGuess) -> String {
    let family = match (g.family, g.overhead) {
        (super::Family::Atm, Some(o)) => format!("ATM, overhead {o}"),
        (super::Family::Atm, None) => "ATM".to_string(),
        (super::Family::Straight, _) => "no ATM cells (PTM, DOCSIS or Ethernet)".to_string(),
        (super::Family::Undecided, _) => "undecided".to_string(),
    };
    format!("{family}; {}", g.evidence())
}
