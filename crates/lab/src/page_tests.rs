use super::*;
use crate::profile::LinkProfile;
use crate::table::ProbeRow;
use unbloat_report::stats::Grade;
use unbloat_report::synthetic;

/// A row with the numbers the sentence and the cards read, and nothing else.
fn row(strategy: Strategy, p95: f64, p99: f64, shares: Option<(f64, f64)>) -> Row {
    Row {
        strategy,
        idle_ms: Some(20.0),
        probes: vec![ProbeRow {
            name: "UDP BE".into(),
            idle_ms: Some(20.0),
            induced_p50_ms: None,
            induced_p95_ms: None,
            induced_p99_ms: None,
            loaded_loss_ratio: None,
            steady_p95_ms: Some(p95),
            steady_p99_ms: Some(p99),
            startup_peak_ms: Some(41.0),
        }],
        down_bps: Some(18.8e6),
        up_bps: Some(4.6e6),
        down_share: shares.map(|s| s.0),
        up_share: shares.map(|s| s.1),
        grade: Grade::from_induced_ms(p95),
        primary: Some("UDP BE".into()),
        partial: false,
        cpu_busy: None,
        cpu_peak_busy: None,
    }
}

#[test]
fn the_sentence_says_the_rise_without_shaping_and_with_each_strategy_from_the_numbers() {
    let rows = [
        row(Strategy::None, 344.2, 360.0, Some((0.99, 0.98))),
        row(Strategy::Unbloat, 2.04, 3.0, Some((0.941, 0.914))),
        row(Strategy::SqmSimple, 12.6, 20.0, None),
    ];
    assert_eq!(
        headline(&rows).as_deref(),
        Some(
            "Without shaping the round trip rose by 344 ms at p95; with unbloat by 2.0 ms, at 94 % \
             of the line down and 91 % up; with sqm-simple by 13 ms (the load's steady state, after \
             its first 3 s; UDP BE probes)."
        )
    );
    // Without a `none` run the sentence starts with the first strategy.
    assert_eq!(
        headline(&rows[1..2]).as_deref(),
        Some(
            "With unbloat the round trip rose by 2.0 ms at p95, at 94 % of the line down and 91 % \
             up (the load's steady state, after its first 3 s; UDP BE probes)."
        )
    );
    assert_eq!(headline(&[]), None);
}

#[test]
fn plot_titles_are_words_with_the_strategy_and_the_probe() {
    let s = Strategy::Unbloat;
    let t = |stem| plot_title(stem, &s, Some("UDP BE"));
    assert_eq!(
        t("unbloat-rrul-2026-12-01T141003-latency_cdf"),
        "Latency distribution, idle and under load, per probe class: unbloat"
    );
    assert_eq!(
        t("unbloat-rrul-2026-12-01T141003-latency_spread"),
        "UDP BE latency per second: median, 25-75 % and 5-95 %: unbloat"
    );
    assert!(t("x-timeseries").starts_with("Throughput per stream"));
    assert!(t("x-location").contains("Where the queue stands, from UDP BE"));
    assert_eq!(t("x-odd_plot"), "odd plot: unbloat");
}

#[test]
fn the_page_opens_with_the_sentence_cards_and_comparison_then_the_details() {
    let vdsl2 = LinkProfile::shipped("vdsl2").expect("vdsl2");
    let (bloated, cured) = (synthetic::rrul(1), synthetic::rrul_with(2, 2.0, 47e6));
    let rows = [
        Row::from_results(Strategy::None, &bloated, &vdsl2),
        Row::from_results(Strategy::Unbloat, &cured, &vdsl2),
    ];
    let clipped = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg><clipPath id=\"clip1\"/>\
                   <polyline clip-path=\"url(#clip1)\"/></svg>";
    let cmds = vec!["tc qdisc add dev wan0 root cake <x>".to_string()];
    let sections = [HtmlSection {
        strategy: Strategy::Unbloat,
        commands: &cmds,
        plots: vec![("unbloat-rrul-x-latency_cdf".into(), clipped.into())],
        files: vec!["unbloat/run.json".into()],
    }];
    let html = render_html(&Page {
        title: "lab <vdsl2>",
        notes: &["a & b".into()],
        rows: &rows,
        compare: Some(clipped),
        sections: &sections,
        table: "strategy  grade\n",
    });
    assert!(html.contains("<title>lab &lt;vdsl2&gt;</title>"));
    assert!(html.contains("name=\"viewport\""));
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {html}"))
    };
    // First the sentence, a card per strategy with its grade, the comparison; then the rest.
    let sentence = at("<p class=\"headline\">Without shaping the round trip rose by");
    let none = at("<div class=\"card\" data-strategy=\"none\"");
    let unbloat = at("<div class=\"card\" data-strategy=\"unbloat\"");
    let compare = at("<figure id=\"compare\">");
    let details = at("<h2 id=\"unbloat\">");
    let table = at("<h2 id=\"table\">");
    assert!(
        sentence < none
            && none < unbloat
            && unbloat < compare
            && compare < details
            && details < table
    );
    for r in &rows {
        let grade = r.grade.expect("a grade").to_string();
        assert!(
            html.contains(&format!(
                "class=\"grade\" title=\"grade of the induced latency\">{grade}</div>"
            )),
            "{grade}"
        );
    }
    assert!(html.contains("a &amp; b"));
    assert!(html.contains("cake &lt;x&gt;"));
    assert!(html
        .contains("<h3>Latency distribution, idle and under load, per probe class: unbloat</h3>"));
    assert!(!html.contains("<?xml"));
    // Each inlined SVG's clip ids are its own.
    assert!(html.contains("id=\"compare-clip1\"") && html.contains("url(#compare-clip1)"));
    assert!(html.contains("id=\"s0p0-clip1\"") && html.contains("url(#s0p0-clip1)"));
    assert!(!html.contains("\"clip1\"") && !html.contains("#clip1)"));
    assert!(html.contains("<a href=\"unbloat/run.json\">"));
}
