use super::*;
use crate::model::{ProbeKind, ProbeSample, ProbeSeries};
use crate::synthetic;

/// Checks that `svg` is well-formed in the sense that matters here: one root `<svg>`, every
/// opened element closed in order, attribute quotes balanced, no raw `&` outside entities.
fn assert_well_formed(svg: &str) {
    let body = svg
        .trim_start_matches(|c| c != '>')
        .get(1..)
        .expect("xml declaration");
    let mut stack: Vec<String> = Vec::new();
    let mut rest = body;
    let mut roots = 0;
    while let Some(start) = rest.find('<') {
        let text = &rest[..start];
        assert!(!text.contains('>'), "stray '>' in text {text:?}");
        for (i, _) in text.match_indices('&') {
            let entity = &text[i..text.len().min(i + 6)];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot", "&apos"]
                    .iter()
                    .any(|e| entity.starts_with(e)),
                "{entity}"
            );
        }
        let end = rest[start..].find('>').expect("unterminated tag") + start;
        let tag = &rest[start + 1..end];
        assert_eq!(
            tag.matches('"').count() % 2,
            0,
            "unbalanced quotes in <{tag}>"
        );
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().expect("tag name").to_string();
            if stack.is_empty() {
                roots += 1;
                assert_eq!(name, "svg");
            }
            stack.push(name);
        } else {
            assert!(!stack.is_empty(), "element outside the root");
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
    assert_eq!(roots, 1);
}

fn series(svg: &str, name: &str) -> bool {
    svg.contains(&format!("data-series=\"{name}\""))
}

#[test]
fn timeseries_has_every_stream_total_and_probe() {
    let r = synthetic::rrul(2);
    let svg = timeseries::render(&r);
    assert_well_formed(&svg);
    for s in &r.streams {
        assert!(series(&svg, &s.name), "{}", s.name);
    }
    for p in &r.probes {
        assert!(series(&svg, &p.name), "{}", p.name);
    }
    assert!(series(&svg, "Download total") && series(&svg, "Upload total"));
    assert!(
        svg.contains("Download (Mbit/s)")
            && svg.contains("Latency (ms)")
            && svg.contains("Time (s)")
    );
    assert!(
        svg.contains(">load<"),
        "the load phase is shaded and labelled"
    );
}

#[test]
fn ping_run_has_only_the_latency_panel() {
    let svg = timeseries::render(&synthetic::ping(1));
    assert_well_formed(&svg);
    assert!(!svg.contains("Download (") && !svg.contains("Upload ("));
    assert!(series(&svg, "ICMP"));
}

#[test]
fn cdf_has_idle_and_loaded_per_class() {
    let r = synthetic::rrul(2);
    let svg = cdf::render(&r);
    assert_well_formed(&svg);
    for p in &r.probes {
        assert!(series(&svg, &format!("{} idle", p.name)), "{}", p.name);
        assert!(series(&svg, &format!("{} loaded", p.name)), "{}", p.name);
    }
}

#[test]
fn cdf_points_rise_to_100_percent() {
    assert_eq!(
        cdf_points_of(&[3.0, 1.0, 2.0, 4.0]),
        vec![(1.0, 25.0), (2.0, 50.0), (3.0, 75.0), (4.0, 100.0)]
    );
    assert!(cdf_points_of(&[]).is_empty());
}

fn cdf_points_of(v: &[f64]) -> Vec<(f64, f64)> {
    cdf::cdf_points(v)
}

#[test]
fn spread_has_bands_median_and_lost_ticks() {
    let mut r = synthetic::rrul(2);
    r.probes[0].samples[10].rtt_ms = None;
    let svg = spread::render(&r);
    assert_well_formed(&svg);
    assert!(series(&svg, "median") && series(&svg, "5-95 %") && series(&svg, "25-75 %"));
    assert!(svg.contains("#d00000"), "a lost probe is marked");
    assert!(svg.contains("UDP BE round-trip time (ms)"));
}

fn probe_at(samples: &[(f64, Option<f64>)]) -> ProbeSeries {
    ProbeSeries {
        name: "UDP BE".into(),
        kind: ProbeKind::Udp,
        dscp: 0,
        interval_ms: 100.0,
        hop: Default::default(),
        samples: samples
            .iter()
            .map(|&(t, rtt_ms)| ProbeSample {
                t,
                rtt_ms,
                owd_up_ms: None,
                owd_down_ms: None,
                send_lag_ms: 0.0,
            })
            .collect(),
    }
}

#[test]
fn spread_bins_per_whole_second_with_gaps() {
    let mut samples: Vec<(f64, Option<f64>)> = (0..10)
        .map(|i| (f64::from(i) * 0.1, Some(f64::from(i + 1))))
        .collect();
    samples.push((1.5, None)); // second 1: probes, no reply
    samples.push((3.2, Some(50.0))); // second 2: nothing at all
    let bins = spread::bins(&probe_at(&samples));
    assert_eq!(bins.len(), 4);
    let b0 = bins[0].expect("second 0");
    assert_eq!(b0.t, 0.0);
    assert_eq!(b0.p50, 5.5); // median of 1..=10
    assert!((b0.p5 - 1.45).abs() < 1e-9 && (b0.p95 - 9.55).abs() < 1e-9);
    assert_eq!(bins[1], None);
    assert_eq!(bins[2], None); // the missing second 2
    assert_eq!(bins[3].expect("second 3").p50, 50.0);
}

#[test]
fn empty_and_all_lost_runs_still_render() {
    let mut r = synthetic::rrul(1);
    r.streams.clear();
    r.probes.clear();
    for (name, svg) in render_all(&r) {
        assert_well_formed(&svg);
        assert!(svg.contains("no latency measurements"), "{name}");
    }
    let mut r = synthetic::rrul(1);
    for p in &mut r.probes {
        for s in &mut p.samples {
            s.rtt_ms = None;
        }
    }
    for (_, svg) in render_all(&r) {
        assert_well_formed(&svg);
    }
}

#[test]
fn names_with_markup_are_escaped() {
    let mut r = synthetic::rrul(1);
    r.probes[0].name = "UDP <BE> & co".into();
    r.metadata.remote = "host\"evil\"".into();
    for (_, svg) in render_all(&r) {
        assert_well_formed(&svg);
        assert!(!svg.contains("<BE>"));
    }
}

#[test]
fn write_plots_writes_three_files() {
    let dir = std::env::temp_dir().join(format!("unbloat-report-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let written = write_plots(&synthetic::rrul(1), &dir).expect("write");
    assert_eq!(written.len(), 3);
    for p in &written {
        let text = std::fs::read_to_string(p).expect("read");
        assert!(text.len() > 1000, "{}", p.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bug: the plots' subtitle said "rrul to host from (none)" for a run in a User-Mode Linux guest
/// (the kernel's name for an unset hostname), and "from " for an empty one. A field that is not
/// known is left out.
#[test]
fn subtitle_leaves_out_what_is_not_known_instead_of_saying_none() {
    let mut r = synthetic::rrul(1);
    r.metadata.remote = "server.example:4420".into();
    for hostname in ["(none)", "", "  "] {
        r.metadata.hostname = hostname.into();
        for (name, svg) in render_all(&r) {
            assert!(!svg.contains("(none)"), "{name} with {hostname:?}");
            assert!(!svg.contains("from"), "{name} with {hostname:?}");
            assert!(svg.contains("rrul to server.example:4420<"), "{name}");
        }
    }
    r.metadata.hostname = "laptop".into();
    r.metadata.remote = String::new();
    let svg = timeseries::render(&r);
    assert!(svg.contains(">rrul from laptop<"), "{svg}");
}

/// Issue 39: a run that probed its gateway draws where the queue stands first, each place a
/// segment of its way's bar; a run that did not (`--no-locate`) draws the three plots alone.
#[test]
fn a_located_run_draws_where_the_queue_stands_first() {
    let mut r = synthetic::rrul(1);
    assert!(render_all(&r).iter().all(|(name, _)| *name != "location"));
    let far = r.primary_probe().expect("a far end").clone();
    let idle = far
        .samples
        .first()
        .and_then(|s| s.rtt_ms)
        .expect("an idle sample");
    let mut gw = far.clone();
    gw.name = "gateway ICMP".into();
    gw.hop = crate::model::Hop::Gateway;
    for s in &mut gw.samples {
        // A third of what the load adds to the far end's trip sits in the first hop.
        s.rtt_ms = s.rtt_ms.map(|v| idle + (v - idle).max(0.0) / 3.0);
        s.owd_up_ms = None;
        s.owd_down_ms = None;
    }
    r.probes.push(gw);
    let plots = render_all(&r);
    assert_eq!(
        plots[0].0,
        "location",
        "{:?}",
        plots.iter().map(|p| p.0).collect::<Vec<_>>()
    );
    let svg = &plots[0].1;
    assert_well_formed(svg);
    let l = crate::locate::locate(&r).expect("located");
    for w in &l.ways {
        for s in w.shares.iter().filter(|s| s.p95_ms > 0.0) {
            let way = w.way.words();
            assert!(
                series(svg, &format!("{way} {}", s.place.words())),
                "{way} {:?}: {svg}",
                s.place
            );
        }
    }
    assert!(l.ways.iter().any(|w| w
        .shares
        .iter()
        .any(|s| s.place == crate::locate::Place::FirstHop && s.p95_ms > 0.0)));
    assert!(svg.contains("Where the queue stands"));
    assert!(svg.contains(&svg::escape(
        l.advice[0].split_whitespace().next().expect("a word")
    )));
}
