//! Where the queue stands (issue 39): per direction, the steady state's added delay at p95 as a
//! bar stacked by where it sits (this machine, the first hop, beyond the gateway; or past this
//! machine when the gateway cannot be read), p50 as a tick on it, and the advice below. The
//! report's first picture when the run located its delay ([`crate::locate`]).

use super::axis::{legend, nice_range, tick_label, ticks, LegendEntry, AXIS, GRID, PALETTE};
use super::svg::{Anchor, Svg};
use super::{title, HEIGHT, WIDTH};
use crate::locate::{Location, Place};
use crate::model::Results;

/// Each place's colour (the plots' palette, safe for colour-blind readers): this machine grey,
/// the first hop blue, the rest orange.
fn color(place: Place) -> &'static str {
    match place {
        Place::ThisMachine => "#8c8c8c",
        Place::FirstHop => PALETTE[0],
        Place::Beyond => PALETTE[1],
        Place::PastThisMachine => PALETTE[3],
    }
}

/// The chart of `location`, for `results` (its title).
pub fn render(results: &Results, location: &Location) -> String {
    let mut svg = Svg::new(WIDTH, HEIGHT);
    title(
        &mut svg,
        "Where the queue stands (steady state, added delay)",
        results,
    );
    let (x0, y0, w) = (110.0, 80.0, WIDTH - 110.0 - 40.0);
    let bar_h = 46.0;
    let gap = 34.0;
    let ways = &location.ways;
    let h = ways.len() as f64 * (bar_h + gap);
    let top = ways.iter().map(|w| w.total_p95_ms).fold(1.0, f64::max);
    let (lo, hi, step) = nice_range(0.0, top * 1.05, 6);
    let px = |ms: f64| x0 + (ms - lo) / (hi - lo) * w;
    svg.rect(x0, y0, w, h, "#fafafa", None);
    for t in ticks(lo, hi, step) {
        svg.line(px(t), y0, px(t), y0 + h, GRID, 1.0);
        svg.text(
            px(t),
            y0 + h + 16.0,
            11.0,
            Anchor::Middle,
            &tick_label(t, step),
        );
    }
    svg.line(x0, y0 + h, x0 + w, y0 + h, AXIS, 1.0);
    svg.text(
        x0 + w / 2.0,
        y0 + h + 34.0,
        12.0,
        Anchor::Middle,
        "added delay at p95 (ms); the tick: the whole at p50",
    );
    for (i, way) in ways.iter().enumerate() {
        let y = y0 + gap / 2.0 + i as f64 * (bar_h + gap);
        svg.text(
            x0 - 8.0,
            y + bar_h / 2.0 + 4.0,
            13.0,
            Anchor::End,
            way.way.words(),
        );
        let mut at = 0.0;
        for s in way.shares.iter().filter(|s| s.p95_ms > 0.0) {
            let (a, b) = (px(at), px(at + s.p95_ms));
            let name = format!("{} {}", way.way.words(), s.place.words());
            svg.polygon(
                &[(a, y), (b, y), (b, y + bar_h), (a, y + bar_h)],
                color(s.place),
                &name,
                None,
            );
            // A label where it fits inside its segment.
            if px(at + s.p95_ms) - px(at) > 60.0 {
                let mid = (px(at) + px(at + s.p95_ms)) / 2.0;
                svg.text(
                    mid,
                    y + bar_h / 2.0 + 4.0,
                    11.0,
                    Anchor::Middle,
                    &format!("{:.0} ms", s.p95_ms),
                );
            }
            at += s.p95_ms;
        }
        let p50 = px(way.total_p50_ms);
        svg.line(p50, y - 5.0, p50, y + bar_h + 5.0, "#000000", 2.0);
        svg.text(
            px(at) + 6.0,
            y + bar_h / 2.0 + 4.0,
            11.0,
            Anchor::Start,
            &format!("{:.0} ms", way.total_p95_ms),
        );
    }
    let places = [
        Place::ThisMachine,
        Place::FirstHop,
        Place::Beyond,
        Place::PastThisMachine,
    ];
    let shown: Vec<LegendEntry> = places
        .iter()
        .filter(|p| {
            ways.iter()
                .any(|w| w.shares.iter().any(|s| s.place == **p && s.p95_ms > 0.0))
        })
        .map(|p| LegendEntry {
            label: p.words(),
            color: color(*p),
            width: 8.0,
            dash: None,
        })
        .collect();
    legend(&mut svg, x0, y0 + h + 52.0, None, &shown);
    let mut y = y0 + h + 60.0 + 18.0 * shown.len() as f64;
    for advice in &location.advice {
        for (k, line) in wrap(advice, 118).iter().enumerate() {
            if y > HEIGHT - 8.0 {
                break;
            }
            let lead = if k == 0 { "- " } else { "  " };
            svg.text(30.0, y, 11.0, Anchor::Start, &format!("{lead}{line}"));
            y += 14.0;
        }
    }
    svg.finish()
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = vec![];
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}
