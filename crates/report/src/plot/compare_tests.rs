use super::*;
use crate::synthetic;

/// The document parsed by a real XML parser: a mistake in our hand-written SVG fails here.
fn parse(svg: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"))
}

/// The polylines of series `label`, as parsed.
fn lines<'a>(doc: &'a roxmltree::Document<'a>, label: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("data-series") == Some(label))
        .collect()
}

#[test]
fn every_strategy_is_one_series_in_each_panel_of_a_parsed_svg() {
    let (bloated, cured, third) = (
        synthetic::rrul(1),
        synthetic::rrul_with(2, 2.0, 47e6),
        synthetic::rrul_with(3, 8.0, 45e6),
    );
    let runs = [
        Run {
            label: "none",
            results: &bloated,
        },
        Run {
            label: "unbloat",
            results: &cured,
        },
        Run {
            label: "sqm <simple> & co",
            results: &third,
        },
    ];
    let svg = render("Round trip under load", "vdsl2, rrul", &runs);
    let doc = parse(&svg);
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(doc.root_element().attribute("width"), Some("1000"));
    for run in &runs {
        // One line over time and one CDF (the over-time line may break at a lost probe, so at
        // least one piece there), plus the legend's sample.
        let found = lines(&doc, run.label);
        assert!(found.len() >= 2, "{}: {} lines", run.label, found.len());
        let legend = doc
            .descendants()
            .filter(|n| n.has_tag_name("text") && n.text() == Some(run.label))
            .count();
        assert_eq!(legend, 1, "{} in the legend", run.label);
    }
    // The two panels, the steady state marked, and the same colour for a run in both panels.
    for words in [
        "Time since the load started (s)",
        "Round trip under load (ms)",
        "steady state (judged)",
    ] {
        assert!(
            doc.descendants().any(|n| n.text() == Some(words)),
            "{words}"
        );
    }
    assert_eq!(lines(&doc, "steady-start").len(), 1);
    for run in &runs {
        let colours: std::collections::BTreeSet<_> = lines(&doc, run.label)
            .iter()
            .filter_map(|n| n.attribute("stroke"))
            .collect();
        assert_eq!(colours.len(), 1, "{}: {colours:?}", run.label);
    }
}

#[test]
fn the_bloated_run_reaches_further_right_in_the_cdf_than_the_cured_one() {
    let (bloated, cured) = (synthetic::rrul(1), synthetic::rrul_with(2, 2.0, 47e6));
    let runs = [
        Run {
            label: "none",
            results: &bloated,
        },
        Run {
            label: "unbloat",
            results: &cured,
        },
    ];
    let svg = render("t", "s", &runs);
    let doc = parse(&svg);
    // The CDF is the last line of each series; its median point's x is the median RTT.
    let median_x = |label| {
        let cdf = *lines(&doc, label).last().expect("a CDF");
        let pts: Vec<f64> = cdf
            .attribute("points")
            .expect("points")
            .split_whitespace()
            .map(|p| p.split(',').next().unwrap().parse().unwrap())
            .collect();
        pts[pts.len() / 2]
    };
    assert!(median_x("none") > median_x("unbloat") + 100.0);
}

#[test]
fn no_runs_or_runs_without_probes_still_make_a_document() {
    let svg = render("t", "s", &[]);
    parse(&svg);
    assert!(svg.contains("no latency measurements"));
    let mut r = synthetic::rrul(1);
    r.probes.clear();
    parse(&render(
        "t",
        "s",
        &[Run {
            label: "x",
            results: &r,
        }],
    ));
}
