//! Writing a run's directory and redrawing plots from it, through the public API only.

use std::path::PathBuf;

use clap::Parser;
use unbloat_report::files::{default_basename, redraw, run_plot, write_results_dir, PlotArgs};
use unbloat_report::{synthetic, ReportError, Results, RESULTS_VERSION};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "unbloat-report-files-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn writes_results_flent_and_plots_and_reads_them_back() {
    let dir = scratch("rrul");
    let results = synthetic::rrul(4);
    let w = write_results_dir(&results, &dir.join("nested"), "run1").expect("write");
    assert_eq!(w.results_json, dir.join("nested/run1.json"));
    assert_eq!(
        w.flent.as_deref(),
        Some(dir.join("nested/run1.flent.gz").as_path())
    );
    assert_eq!(w.plots.len(), 3);
    for p in w.all() {
        assert!(
            std::fs::metadata(p).expect("exists").len() > 500,
            "{}",
            p.display()
        );
    }
    let text = std::fs::read_to_string(&w.results_json).expect("read");
    assert_eq!(Results::from_json(&text).expect("parse"), results);
    // flent files are gzip: magic 1f 8b.
    let gz = std::fs::read(w.flent.as_ref().expect("flent")).expect("read gz");
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn profiles_without_a_flent_test_get_no_flent_file() {
    let dir = scratch("bidir");
    let mut results = synthetic::rrul(4);
    results.metadata.profile = "bidir".into();
    let w = write_results_dir(&results, &dir, "b").expect("write");
    assert_eq!(w.flent, None);
    assert!(!dir.join("b.flent.gz").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redraw_reproduces_the_same_plots() {
    let dir = scratch("redraw");
    let w = write_results_dir(&synthetic::tcp_nup(3, 2), &dir, "nup").expect("write");
    let again = redraw(&w.results_json, &dir.join("again")).expect("redraw");
    assert_eq!(again.len(), 3);
    for (a, b) in w.plots.iter().zip(&again) {
        assert_eq!(a.file_name(), b.file_name());
        assert_eq!(std::fs::read(a).expect("a"), std::fs::read(b).expect("b"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redraw_refuses_a_newer_file_and_names_a_missing_one() {
    let dir = scratch("newer");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut value = serde_json::to_value(synthetic::ping(1)).expect("value");
    value["version"] = serde_json::json!(RESULTS_VERSION + 1);
    let path = dir.join("future.json");
    std::fs::write(&path, value.to_string()).expect("write");
    assert!(matches!(
        redraw(&path, &dir),
        Err(ReportError::NewerVersion { .. })
    ));
    let missing = dir.join("nope.json");
    let err = redraw(&missing, &dir).expect_err("missing");
    assert!(err.to_string().contains("nope.json"), "{err}");
    assert!(!dir.join("future-timeseries.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    plot: PlotArgs,
}

#[test]
fn plot_args_parse_and_run() {
    let dir = scratch("cli");
    let w = write_results_dir(&synthetic::ping(3), &dir, "p").expect("write");
    let out = dir.join("out");
    let cli = Cli::try_parse_from([
        "unbloat-plot",
        w.results_json.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .expect("parse");
    assert_eq!(cli.plot.out.as_deref(), Some(out.as_path()));
    run_plot(&cli.plot).expect("run");
    assert!(out.join("p-latency_spread.svg").exists());
    assert!(
        Cli::try_parse_from(["unbloat-plot"]).is_err(),
        "RESULTS is required"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn default_basename_is_profile_and_utc_time() {
    assert_eq!(
        default_basename(&synthetic::rrul(1)),
        "unbloat-rrul-2023-11-14T221320"
    );
}

#[test]
fn check_writable_creates_the_directory_leaves_nothing_and_refuses_a_path_through_a_file() {
    use unbloat_report::files::check_writable;
    let dir = scratch("writable");
    let nested = dir.join("a/b");
    check_writable(&nested).expect("writable");
    assert!(nested.is_dir());
    assert_eq!(std::fs::read_dir(&nested).expect("list").count(), 0);
    let file = dir.join("file");
    std::fs::write(&file, "x").expect("file");
    let err = check_writable(&file.join("out")).expect_err("a file is no directory");
    assert!(matches!(err, ReportError::Io { .. }), "{err}");
    assert!(err.to_string().contains("file/out"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
