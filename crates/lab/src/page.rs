//! The lab's report page, `index.html` (issue 57). A new user's `make lab` leaves it, so its first
//! screen must show the problem and the cure side by side: one sentence computed from the numbers,
//! a card per strategy (grade, steady p95/p99, start-up peak, goodput), and the comparison plot
//! (`unbloat_report::plot::compare`, also written as `compare.svg`). Below: each strategy's
//! commands and plots, titled in words, and the wide text table last, in a box that scrolls on
//! its own so the page never scrolls sideways (at 1300 px or at a phone's 390 px).
//! Pure: the caller reads the files and writes the page.

use unbloat_report::plot::axis::color;
// HTML text and attributes are escaped as the SVGs are.
use unbloat_report::plot::svg::escape as html_escape;

use crate::strategies::Strategy;
use crate::table::{mbit, pct, Row};

/// One strategy's section of the HTML page.
pub struct HtmlSection<'a> {
    pub strategy: Strategy,
    /// The commands the strategy ran on the router, one shell line each.
    pub commands: &'a [String],
    /// (file stem, SVG text) to inline; the title shown is [`plot_title`]'s.
    pub plots: Vec<(String, String)>,
    /// Result files, relative to the page, to link.
    pub files: Vec<String>,
}

/// The whole page.
pub struct Page<'a> {
    pub title: &'a str,
    /// The link, the calibration, and what the reader must know.
    pub notes: &'a [String],
    /// One per strategy, in the order of the comparison plot's colours.
    pub rows: &'a [Row],
    /// The comparison plot (SVG text), when any strategy had probes.
    pub compare: Option<&'a str>,
    pub sections: &'a [HtmlSection<'a>],
    /// The fixed-width table of every number (`table.txt`).
    pub table: &'a str,
}

/// A rise in milliseconds, short: "344 ms", "2.1 ms".
fn rise(ms: f64) -> String {
    if ms.abs() >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn steady(r: &Row) -> Option<&crate::table::ProbeRow> {
    r.primary.as_deref().and_then(|n| r.probe(n))
}

/// What happened, in one sentence from the numbers: the steady state's rise of the primary
/// probe's round trip at p95 without shaping, then with each strategy, and how much of the
/// line each strategy kept ("without shaping the round trip rose by 344 ms at p95; with unbloat
/// by 2.0 ms, at 94 % of the line down and 91 % up"). `None` when no row has that number.
pub fn headline(rows: &[Row]) -> Option<String> {
    let probe = rows.iter().find_map(|r| r.primary.clone())?;
    let p95 = |r: &Row| steady(r).and_then(|p| p.steady_p95_ms);
    let mut parts = vec![];
    if let Some(v) = rows
        .iter()
        .find(|r| r.strategy == Strategy::None)
        .and_then(p95)
    {
        parts.push(format!(
            "without shaping the round trip rose by {} at p95",
            rise(v)
        ));
    }
    for r in rows.iter().filter(|r| r.strategy != Strategy::None) {
        let Some(v) = p95(r) else { continue };
        let mut part = if parts.is_empty() {
            format!(
                "with {} the round trip rose by {} at p95",
                r.strategy,
                rise(v)
            )
        } else {
            format!("with {} by {}", r.strategy, rise(v))
        };
        if let (Some(d), Some(u)) = (r.down_share, r.up_share) {
            part.push_str(&format!(
                ", at {:.0} % of the line down and {:.0} % up",
                d * 100.0,
                u * 100.0
            ));
        }
        parts.push(part);
    }
    let mut s = parts.join("; ");
    if s.is_empty() {
        return None;
    }
    s[..1].make_ascii_uppercase();
    Some(format!(
        "{s} (the load's steady state, after its first {:.0} s; {probe} probes).",
        unbloat_report::summary::STARTUP_S
    ))
}

/// A plot's title in words from its file stem (`unbloat-rrul-2026-12-01T141003-latency_cdf`):
/// what it shows, which strategy, which probe.
pub fn plot_title(stem: &str, strategy: &Strategy, primary: Option<&str>) -> String {
    let probe = primary.unwrap_or("the primary probe");
    let kind = |suffix: &str| stem == suffix || stem.ends_with(&format!("-{suffix}"));
    let what = if kind("timeseries") {
        "Throughput per stream and latency per probe class over time".to_string()
    } else if kind("latency_cdf") {
        "Latency distribution, idle and under load, per probe class".to_string()
    } else if kind("latency_spread") {
        format!("{probe} latency per second: median, 25-75 % and 5-95 %")
    } else if kind("location") {
        format!("Where the queue stands, from {probe} and the first hop")
    } else if kind("controller-rates") {
        "The controller's rates over time".to_string()
    } else {
        stem.rsplit('-').next().unwrap_or(stem).replace('_', " ")
    };
    format!("{what}: {strategy}")
}

const STYLE: &str = "*{box-sizing:border-box}\
body{font-family:sans-serif;max-width:1200px;margin:0 auto;padding:0 12px;line-height:1.35}\
h1{font-size:1.35em;margin:.4em 0 .2em}\
p.headline{font-size:1.05em;margin:.2em 0 .5em}\
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:8px}\
.card{border:1px solid #ccc;border-top:6px solid #999;border-radius:6px;padding:4px 8px;min-width:0}\
.card .name{font-weight:bold;overflow-wrap:anywhere}\
.card .grade{font-size:1.8em;font-weight:bold;line-height:1.1}\
.card dl{display:grid;grid-template-columns:auto auto;gap:0 6px;margin:0;font-size:.82em}\
.card dt{color:#555}.card dd{margin:0;text-align:right}\
figure{margin:.5em 0}svg{max-width:100%;height:auto;display:block}#compare svg{width:100%}\
pre{background:#f4f4f4;padding:8px;overflow-x:auto}\
@media (max-width:600px){body{padding:0 6px}h1{font-size:1.1em}p.headline{font-size:.9em}\
.cards{grid-template-columns:repeat(2,minmax(0,1fr));gap:6px}.card .grade{font-size:1.4em}\
.card dl{font-size:.72em}}";

/// One strategy's card; `k` is its colour's index in the comparison plot.
fn card(k: usize, r: &Row) -> String {
    let p = steady(r);
    let steady =
        |f: fn(&crate::table::ProbeRow) -> Option<f64>| p.and_then(f).map_or("-".into(), rise);
    let grade = r.grade.map_or("-".into(), |g| g.to_string());
    let name = format!(
        "{}{}",
        r.strategy,
        if r.partial { " (partial)" } else { "" }
    );
    format!(
        "<div class=\"card\" data-strategy=\"{s}\" style=\"border-top-color:{c}\">\
         <div class=\"name\">{name}</div><div class=\"grade\" title=\"grade of the induced latency\">{grade}</div><dl>\
         <dt>steady p95</dt><dd>{p95}</dd><dt>steady p99</dt><dd>{p99}</dd>\
         <dt>start-up peak</dt><dd>{peak}</dd>\
         <dt>down</dt><dd>{down} Mbit/s ({ds})</dd><dt>up</dt><dd>{up} Mbit/s ({us})</dd></dl></div>\n",
        s = html_escape(&r.strategy.name()),
        c = color(k),
        name = html_escape(&name),
        p95 = steady(|p| p.steady_p95_ms),
        p99 = steady(|p| p.steady_p99_ms),
        peak = steady(|p| p.startup_peak_ms),
        down = mbit(r.down_bps),
        ds = pct(r.down_share),
        up = mbit(r.up_bps),
        us = pct(r.up_share),
    )
}

/// An SVG of our own plot code, inlined as is (the page stands alone), its ids made unique to
/// the page: every plot names its clip paths clip1, clip2, ..., and in one HTML document
/// `url(#clip1)` would find the first plot's.
fn inline_svg(svg: &str, prefix: &str) -> String {
    svg.trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
        .trim()
        .replace("id=\"clip", &format!("id=\"{prefix}clip"))
        .replace("url(#clip", &format!("url(#{prefix}clip"))
}

/// The page: title, sentence, cards and comparison first; then the details.
pub fn render_html(page: &Page<'_>) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    h.push_str(&html_escape(page.title));
    h.push_str(&format!(
        "</title>\n<style>{STYLE}</style>\n</head><body>\n<h1>"
    ));
    h.push_str(&html_escape(page.title));
    h.push_str("</h1>\n");
    if let Some(s) = headline(page.rows) {
        h.push_str(&format!("<p class=\"headline\">{}</p>\n", html_escape(&s)));
    }
    h.push_str("<div class=\"cards\">\n");
    for (k, r) in page.rows.iter().enumerate() {
        h.push_str(&card(k, r));
    }
    h.push_str("</div>\n");
    if let Some(svg) = page.compare {
        h.push_str("<figure id=\"compare\">");
        h.push_str(&inline_svg(svg, "compare-"));
        h.push_str("</figure>\n");
    }
    for n in page.notes {
        h.push_str(&format!("<p>{}</p>\n", html_escape(n)));
    }
    for (i, s) in page.sections.iter().enumerate() {
        h.push_str(&format!(
            "<h2 id=\"{0}\">{0}</h2>\n",
            html_escape(&s.strategy.name())
        ));
        if s.commands.is_empty() {
            h.push_str("<p>No commands: the router forwards without a queue of its own.</p>\n");
        } else {
            h.push_str("<p>The commands it ran on the router:</p>\n<pre>");
            h.push_str(&html_escape(&s.commands.join("\n")));
            h.push_str("</pre>\n");
        }
        let primary = page
            .rows
            .iter()
            .find(|r| r.strategy == s.strategy)
            .and_then(|r| r.primary.as_deref());
        for (j, (stem, svg)) in s.plots.iter().enumerate() {
            let title = plot_title(stem, &s.strategy, primary);
            h.push_str(&format!("<h3>{}</h3>\n", html_escape(&title)));
            h.push_str(&inline_svg(svg, &format!("s{i}p{j}-")));
            h.push('\n');
        }
        if !s.files.is_empty() {
            h.push_str("<p>Files: ");
            let links: Vec<String> = s
                .files
                .iter()
                .map(|f| format!("<a href=\"{0}\">{0}</a>", html_escape(f)))
                .collect();
            h.push_str(&links.join(", "));
            h.push_str("</p>\n");
        }
    }
    h.push_str("<h2 id=\"table\">Every number</h2>\n<pre>");
    h.push_str(&html_escape(page.table));
    h.push_str("</pre>\n</body></html>\n");
    h
}

#[cfg(test)]
#[path = "page_tests.rs"]
mod tests;
