//! What a tune run leaves: `unbloat.toml` (the format `unbloat start --config` reads), `tune.json`
//! (everything measured) and `index.html` with the trade-off plots (shaped rate against the
//! steady-state p99 and goodput, the chosen rate marked) and the framing sweep's plot.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use unbloat_report::plot::axis::{self, draw_axes, nice_range, Frame, LegendEntry};
use unbloat_report::plot::svg::{escape, Anchor, Svg};
use unbloat_shaper::linklayer::Framing;
use unbloat_shaper::options::ShapeOptions;
use unbloat_units::Rate;

use crate::run::{Missed, Tuned};
use crate::search::Step;

/// The config file text: one `[interface.IFACE]` table with what the run found.
pub fn config_toml(iface: &str, tuned: &Tuned, note: &str) -> Result<String, String> {
    #[derive(Serialize)]
    struct File<'a> {
        interface: BTreeMap<&'a str, &'a ShapeOptions>,
    }
    let file = File {
        interface: BTreeMap::from([(iface, &tuned.options)]),
    };
    let body = toml::to_string(&file).map_err(|e| e.to_string())?;
    let mut text = String::new();
    for line in note.lines() {
        text.push_str(&format!("# {line}\n"));
    }
    if let Some(f) = tuned.framing.as_ref() {
        let g = &f.guess;
        text.push_str(&format!(
            "# The framing sweep: {:?}; {}.\n",
            g.family,
            g.evidence()
        ));
        // What the user said stands over what the sweep fell back to.
        if let Some(preset) = f
            .assumed
            .filter(|_| tuned.link.framing == Some(Framing::Atm))
        {
            text.push_str(&format!(
                "# It could not decide; on a line this slow the link options assume ATM with \
                 {preset}'s overhead. Set them if you know your line.\n"
            ));
        }
    }
    if tuned.down.is_none() || tuned.up.is_none() {
        text.push_str(
            "# A direction without a rate: no step near its capacity gave a latency figure.\n",
        );
    }
    for m in &tuned.missed {
        text.push_str(&format!("# {}\n", missed_line(tuned, m)));
    }
    text.push_str(&body);
    Ok(text)
}

/// A missed bound in words: `The upload's 4750kbit missed its 10.6 ms bound by 29.4 ms (steady
/// p99 +40.0 ms): no rate kept it, and this one came closest.`
pub fn missed_line(t: &Tuned, m: &Missed) -> String {
    let rate = |r: Option<Rate>| r.map_or("-".to_string(), |r| r.to_string());
    let (what, why) = match m.phase.as_str() {
        "download" => (
            format!("The download's {}", rate(t.down)),
            "no rate kept it, and this one came closest",
        ),
        "upload" => (
            format!("The upload's {}", rate(t.up)),
            "no rate kept it, and this one came closest",
        ),
        _ => (
            format!("The pair {} down, {} up", rate(t.down), rate(t.up)),
            "with both directions loaded, and backing off did not bring it within",
        ),
    };
    format!(
        "{what} missed its {:.1} ms bound by {:.1} ms (steady p99 +{:.1} ms): {why}.",
        m.bound_ms,
        m.over_ms(),
        m.steady_p99_ms
    )
}

/// Writes `unbloat.toml`, `tune.json`, the SVGs and `index.html` into `dir`.
pub fn write(dir: &Path, iface: &str, tuned: &Tuned, note: &str) -> Result<Vec<PathBuf>, String> {
    // As root, often into a directory others can write: never through a planted link.
    unbloat_safefs::ensure_dir(dir).map_err(|e| e.to_string())?;
    let mut files = vec![];
    let mut put = |name: &str, text: String| -> Result<(), String> {
        let path = dir.join(name);
        unbloat_safefs::write(&path, text, 0o644).map_err(|e| e.to_string())?;
        files.push(path);
        Ok(())
    };
    put("unbloat.toml", config_toml(iface, tuned, note)?)?;
    put(
        "tune.json",
        serde_json::to_string_pretty(tuned).map_err(|e| e.to_string())? + "\n",
    )?;
    let down = tradeoff_svg(
        "Download",
        &tuned.steps_down,
        tuned.bound_down_ms,
        tuned.down,
    );
    let up = tradeoff_svg("Upload", &tuned.steps_up, tuned.bound_up_ms, tuned.up);
    put("tradeoff-down.svg", down)?;
    put("tradeoff-up.svg", up)?;
    let sweep = tuned
        .framing
        .as_ref()
        .and_then(crate::sweep_phase::plot_svg);
    if let Some(svg) = sweep {
        put("framing.svg", svg)?;
    }
    put("index.html", html(iface, tuned, note))?;
    Ok(files)
}

fn html(iface: &str, t: &Tuned, note: &str) -> String {
    let rate = |r: Option<Rate>| r.map_or("not set".to_string(), |r| r.to_string());
    let framing = t
        .framing
        .as_ref()
        .map_or("not swept (the link options given stand)".into(), |f| {
            crate::sweep_phase::verdict(f)
        });
    let sweep_img = if t.framing.is_some() {
        "<img src=\"framing.svg\" alt=\"framing sweep\">"
    } else {
        ""
    };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>unbloat tune {iface}</title>\
         <style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}td,th{{padding:2px 10px;text-align:right}}</style></head><body>\
         <h1>unbloat tune: {iface}</h1><p>{}</p>\
         <table><tr><th></th><th>download</th><th>upload</th></tr>\
         <tr><td>unshaped goodput</td><td>{}</td><td>{}</td></tr>\
         <tr><td>line rate (under the framing below)</td><td>{}</td><td>{}</td></tr>\
         <tr><td>steady-state p99 bound</td><td>{:.1} ms</td><td>{:.1} ms</td></tr>\
         <tr><td><b>chosen rate</b></td><td><b>{}</b></td><td><b>{}</b></td></tr></table>\
         {}{}<p>Idle round trip: {} ms. Framing: {}. {:.0} s in all ({}); {}.</p>\
         <img src=\"tradeoff-down.svg\" alt=\"download trade-off\"><img src=\"tradeoff-up.svg\" alt=\"upload trade-off\">{sweep_img}\
         </body></html>\n",
        escape(note),
        t.capacity_down.goodput,
        t.capacity_up.goodput,
        t.capacity_down.line,
        t.capacity_up.line,
        t.bound_down_ms,
        t.bound_up_ms,
        rate(t.down),
        rate(t.up),
        both_ways_table(t),
        t.missed
            .iter()
            .map(|m| format!("<p><b>{}</b></p>", escape(&missed_line(t, m))))
            .collect::<String>(),
        t.idle_rtt_ms.map_or("?".into(), |v| format!("{v:.1}")),
        escape(&framing),
        t.seconds,
        escape(&crate::run::laps_line(&t.time)),
        escape(&t.ending),
    )
}

/// The both-ways checks: each pair of rates under rrul, its steady p99 beside its start-up peak.
fn both_ways_table(t: &Tuned) -> String {
    if t.both_ways.is_empty() {
        return String::new();
    }
    let rows: String = t
        .both_ways
        .iter()
        .map(|s| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{:.1} ms{}</td><td>{} ms</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                s.down,
                s.up,
                s.steady_p99_ms,
                // A falling pair is judged on its second half (`search::settled_p99_ms`).
                if s.judged_p99_ms() < s.steady_p99_ms {
                    format!(" (falling; second half {:.1} ms)", s.judged_p99_ms())
                } else {
                    String::new()
                },
                s.startup_peak_ms.map_or("?".into(), |v| format!("{v:.1}")),
                readable(s.goodput_down),
                readable(s.goodput_up),
                match (s.pass, s.chosen) {
                    (true, true) => "within the bound: kept",
                    (true, false) => "within the bound",
                    (false, true) => "over the bound: kept (backing off did not help)",
                    (false, false) => "over the bound",
                }
            )
        })
        .collect();
    format!(
        "<h2>Both ways at once (rrul)</h2><table><tr><th>down</th><th>up</th><th>steady p99</th>\
         <th>start-up peak</th><th>goodput down</th><th>goodput up</th><th></th></tr>{rows}</table>"
    )
}

fn readable(r: Rate) -> String {
    unbloat_report::format::rate(Some(r.bits_per_sec() as f64))
}

/// Shaped rate (x) against the steady p99 (top panel, the bound dashed) and goodput (bottom),
/// each step a dot, failing ones in vermillion, the chosen rate a vertical line.
pub fn tradeoff_svg(title: &str, steps: &[Step], bound_ms: f64, chosen: Option<Rate>) -> String {
    let (w, h) = (480.0, 420.0);
    let mut svg = Svg::new(w, h);
    svg.text(
        w / 2.0,
        18.0,
        14.0,
        Anchor::Middle,
        &format!("{title}: the rate search"),
    );
    if steps.is_empty() {
        svg.text(
            w / 2.0,
            h / 2.0,
            12.0,
            Anchor::Middle,
            "no steps were measured",
        );
        return svg.finish();
    }
    let mbit = |r: Rate| r.mbit_f64();
    let xs: Vec<f64> = steps.iter().map(|s| mbit(s.rate)).collect();
    let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().cloned().fold(0.0, f64::max);
    let x = nice_range(lo * 0.98, hi * 1.02, 5);
    // Latencies far over the bound would flatten the interesting part: the axis stops at 4x it.
    let p99s: Vec<f64> = steps
        .iter()
        .map(|s| s.steady_p99_ms.min(bound_ms * 4.0))
        .collect();
    let ymax = p99s
        .iter()
        .cloned()
        .filter(|v| v.is_finite())
        .fold(bound_ms * 1.2, f64::max);
    let y1 = nice_range(0.0, ymax, 5);
    let top = Frame {
        x: 64.0,
        y: 34.0,
        w: w - 84.0,
        h: 150.0,
    };
    let (sx, sy) = draw_axes(&mut svg, top, x, y1, None, "steady p99 induced (ms)", false);
    svg.polyline(
        &[
            Some((top.x, sy.px(bound_ms))),
            Some((top.right(), sy.px(bound_ms))),
        ],
        axis::AXIS,
        1.0,
        Some("5,4"),
        "bound",
        None,
    );
    for (s, p) in steps.iter().zip(&p99s) {
        let color = if s.pass {
            axis::color(0)
        } else {
            axis::color(5)
        };
        if p.is_finite() {
            svg.circle(sx.px(mbit(s.rate)), sy.px(*p), 4.0, color);
        }
    }
    let goods: Vec<f64> = steps.iter().map(|s| mbit(s.goodput)).collect();
    let y2 = nice_range(0.0, goods.iter().cloned().fold(0.0, f64::max) * 1.1, 5);
    let bottom = Frame {
        x: 64.0,
        y: 214.0,
        w: w - 84.0,
        h: 150.0,
    };
    let (sx2, sy2) = draw_axes(
        &mut svg,
        bottom,
        x,
        y2,
        Some("shaped rate (Mbit/s)"),
        "goodput (Mbit/s)",
        true,
    );
    for (s, g) in steps.iter().zip(&goods) {
        let color = if s.pass {
            axis::color(0)
        } else {
            axis::color(5)
        };
        svg.circle(sx2.px(mbit(s.rate)), sy2.px(*g), 4.0, color);
    }
    if let Some(c) = chosen {
        for f in [top, bottom] {
            let px = sx.px(mbit(c));
            svg.line(px, f.y, px, f.bottom(), "#000000", 1.5);
        }
        svg.text(
            sx.px(mbit(c)) + 4.0,
            top.y + 12.0,
            11.0,
            Anchor::Start,
            &format!("chosen {c}"),
        );
    }
    axis::legend(
        &mut svg,
        70.0,
        h - 22.0,
        None,
        &[LegendEntry {
            label: "within the bound",
            color: axis::color(0),
            width: 4.0,
            dash: None,
        }],
    );
    axis::legend(
        &mut svg,
        230.0,
        h - 22.0,
        None,
        &[LegendEntry {
            label: "over the bound",
            color: axis::color(5),
            width: 4.0,
            dash: None,
        }],
    );
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Capacity;

    fn tuned() -> Tuned {
        let step = |k: u64, p99: f64, pass: bool| Step {
            rate: Rate::from_kbit(k),
            steady_p99_ms: p99,
            startup_peak_ms: Some(40.0),
            growth_ms_per_s: Some(0.1),
            goodput: Rate::from_kbit(k * 9 / 10),
            down_leg: None,
            up_leg: None,
            pass,
        };
        let cap = Capacity {
            goodput: Rate::from_mbit(18),
            line: Rate::from_mbit(20),
        };
        Tuned {
            idle_rtt_ms: Some(20.0),
            capacity_down: cap,
            capacity_up: cap,
            framing: None,
            link: ShapeOptions::default(),
            bound_down_ms: 10.6,
            bound_up_ms: 10.6,
            bound_both_ms: 11.2,
            steps_down: vec![
                step(19_000, 2.0, true),
                step(20_000, 3.0, true),
                step(20_500, 90.0, false),
            ],
            steps_up: vec![],
            both_ways: vec![],
            down: Some(Rate::from_kbit(20_000)),
            up: None,
            options: ShapeOptions {
                down: Some(Rate::from_kbit(20_000)),
                ..Default::default()
            },
            missed: vec![],
            time: vec![],
            seconds: 100.0,
            ending: "put back".into(),
        }
    }

    #[test]
    fn the_config_is_what_start_reads_and_says_what_is_missing() {
        let text = config_toml("eth0", &tuned(), "tuned against x").unwrap();
        assert!(text.starts_with("# tuned against x\n"), "{text}");
        assert!(text.contains("without a rate"), "{text}");
        let back: toml::Value = toml::from_str(&text).unwrap();
        let t = back["interface"]["eth0"].clone();
        let opts: ShapeOptions = t.try_into().unwrap();
        assert_eq!(opts.down, Some(Rate::from_kbit(20_000)));
        assert_eq!(opts.up, None);
    }

    /// Issue 38: a rate chosen as the closest, no step having kept the bound, is said so in
    /// the config beside it.
    #[test]
    fn a_rate_that_missed_its_bound_is_said_so_in_the_config() {
        let mut t = tuned();
        assert!(!config_toml("eth0", &t, "").unwrap().contains("missed"));
        t.steps_up = vec![Step {
            rate: Rate::from_kbit(4_750),
            steady_p99_ms: 40.0,
            startup_peak_ms: None,
            growth_ms_per_s: None,
            goodput: Rate::from_kbit(4_000),
            down_leg: None,
            up_leg: None,
            pass: false,
        }];
        t.up = Some(Rate::from_kbit(4_750));
        t.missed = vec![Missed {
            phase: "upload".into(),
            bound_ms: 10.6,
            steady_p99_ms: 40.0,
        }];
        let text = config_toml("eth0", &t, "").unwrap();
        assert!(
            text.contains("# The upload's 4750kbit missed its 10.6 ms bound by 29.4 ms"),
            "{text}"
        );
        assert!(!text.contains("download's"), "{text}");
        assert!(html("eth0", &t, "").contains("missed its 10.6 ms bound by 29.4 ms"));
    }

    #[test]
    fn the_plot_marks_failures_and_the_choice() {
        let t = tuned();
        let svg = tradeoff_svg("Download", &t.steps_down, t.bound_down_ms, t.down);
        assert!(
            svg.contains(axis::color(5)) && svg.contains("chosen 20mbit"),
            "{svg}"
        );
        assert!(tradeoff_svg("Upload", &[], 10.0, None).contains("no steps"));
    }

    /// Issue 36 item 10: `tune --out` writes as root; a link planted at one of its file names
    /// is refused, named, and the file it points at stays as it was.
    #[test]
    fn a_link_planted_at_a_file_name_is_refused_and_its_target_untouched() {
        let base =
            std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"));
        let dir = base.join(format!("tune-out-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("tune.json")).unwrap();
        let err = write(&dir, "eth0", &tuned(), "note").unwrap_err();
        assert!(
            err.contains("symbolic link") && err.contains("tune.json"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
