//! The two-host scenario's plot: each host's goodput over time, download above upload.

use unbloat_report::plot::axis::{color, draw_axes, legend, nice_range, Frame, LegendEntry};
use unbloat_report::plot::svg::{Anchor, Svg};

use crate::hosts::{Outcome, B_FLOWS};

/// The two hosts' goodput over time, download above upload, as an SVG document.
pub fn plot(o: &Outcome) -> String {
    let mut svg = Svg::new(800.0, 600.0);
    let title = format!(
        "{} over {}{}: host a (1 stream each way) and host b ({B_FLOWS})",
        o.setup.name(),
        o.scenario.family.name(),
        if o.scenario.nat { ", masquerade" } else { "" }
    );
    svg.text(400.0, 22.0, 14.0, Anchor::Middle, &title);
    let panels = [
        (
            "download",
            &o.a.down,
            &o.b.down,
            o.share_down,
            o.scenario.down,
        ),
        ("upload", &o.a.up, &o.b.up, o.share_up, o.scenario.up),
    ];
    let t_max =
        o.a.up
            .iter()
            .chain(&o.b.up)
            .map(|(t, _)| *t)
            .fold(1.0, f64::max);
    for (i, (name, a, b, share, link)) in panels.into_iter().enumerate() {
        let frame = Frame {
            x: 80.0,
            y: 50.0 + i as f64 * 270.0,
            w: 560.0,
            h: 210.0,
        };
        let y_max = link.bits_per_sec() as f64 / 1e6;
        let (xs, ys) = draw_axes(
            &mut svg,
            frame,
            nice_range(0.0, t_max, 8),
            nice_range(0.0, y_max, 5),
            (i == 1).then_some("time (s)"),
            &format!("{name} (Mbit/s)"),
            true,
        );
        for (j, (host, series)) in [("a", a), ("b", b)].into_iter().enumerate() {
            let pts: Vec<Option<(f64, f64)>> = series
                .iter()
                .map(|(t, bps)| Some((xs.px(*t), ys.px(bps / 1e6))))
                .collect();
            svg.polyline(
                &pts,
                color(j),
                2.0,
                None,
                &format!("{name} host {host}"),
                None,
            );
        }
        let label_a = format!("host a: {:.0} % of the two", share * 100.0);
        let label_b = format!("host b: {:.0} %", (1.0 - share) * 100.0);
        legend(
            &mut svg,
            frame.right() + 12.0,
            frame.y + 10.0,
            Some(name),
            &[
                LegendEntry {
                    label: &label_a,
                    color: color(0),
                    width: 2.0,
                    dash: None,
                },
                LegendEntry {
                    label: &label_b,
                    color: color(1),
                    width: 2.0,
                    dash: None,
                },
            ],
        );
    }
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts::{Family, HostRun, Scenario, Setup, LINK_DOWN, LINK_UP};

    #[test]
    fn the_plot_names_both_hosts_each_way() {
        let h = HostRun {
            up_bps: 1e6,
            down_bps: 2e6,
            up: vec![(0.5, 1e6), (1.0, 1e6)],
            down: vec![(0.5, 2e6), (1.0, 2e6)],
        };
        let o = Outcome {
            setup: Setup::UnbloatDefault,
            scenario: Scenario {
                family: Family::Ipv4,
                nat: true,
                load_s: 10,
                down: LINK_DOWN,
                up: LINK_UP,
            },
            a: h.clone(),
            b: h,
            share_up: 0.5,
            share_down: 0.5,
            ping_idle_ms: None,
            ping_loaded_ms: None,
            ping_loaded_p90_ms: None,
            fairness: None,
        };
        let svg = plot(&o);
        for s in [
            "download host a",
            "download host b",
            "upload host a",
            "upload host b",
        ] {
            assert!(svg.contains(&format!("data-series=\"{s}\"")), "{s}");
        }
    }
}
