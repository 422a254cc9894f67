//! Writing a run's directory and redrawing plots from it, through the public API only.

use std::path::PathBuf;

use unbloat_report::files::{default_basename, redraw, run_plot, write_results_dir, PlotArgs};
use unbloat_report::{synthetic, ReportError, Results, RESULTS_VERSION};

fn scratch(name: &str) -> PathBuf {
    // Under target/, not /tmp: nothing of a test stays behind there.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("report-files-{}-{name}", std::process::id()));
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

/// The command line's side (RESULTS required, `--out`) is tested with its parser, in the
/// `unbloat` binary's `plot` module.
#[test]
fn plot_args_run() {
    let dir = scratch("cli");
    let w = write_results_dir(&synthetic::ping(3), &dir, "p").expect("write");
    let out = dir.join("out");
    let plot = PlotArgs {
        results: w.results_json.clone(),
        out: Some(out.clone()),
        summary: false,
    };
    run_plot(&plot).expect("run");
    assert!(out.join("p-latency_spread.svg").exists());
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

/// Issue 36 item 10: `unbloat test --out` runs as root, often in a directory others can write
/// (`/tmp`). A link planted at the name of any file of the run (the results, the flent file, a
/// plot) is refused, naming the file, and the file it points at stays as it was.
#[test]
fn a_link_planted_at_any_file_of_the_run_is_refused_and_its_target_untouched() {
    use std::os::unix::fs::symlink;
    let dir = scratch("links");
    std::fs::create_dir_all(&dir).expect("dir");
    let victim = dir.join("victim");
    for planted in ["r.json", "r.flent.gz", "r-timeseries.svg"] {
        std::fs::write(&victim, "precious").expect("victim");
        let out = dir.join(planted.replace('.', "-"));
        std::fs::create_dir_all(&out).expect("out");
        symlink(&victim, out.join(planted)).expect("link");
        let err = write_results_dir(&synthetic::rrul(1), &out, "r").expect_err(planted);
        let text = format!(
            "{err}: {:?}",
            std::error::Error::source(&err).map(|s| s.to_string())
        );
        assert!(text.contains("symbolic link"), "{planted}: {text}");
        assert!(text.contains(planted), "{planted}: {text}");
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "precious",
            "{planted}"
        );
    }
    // The redrawn plots of `unbloat plot` likewise.
    let out = dir.join("redraw");
    let w = write_results_dir(&synthetic::ping(1), &out, "p").expect("write");
    std::fs::remove_file(out.join("p-latency_cdf.svg")).expect("rm");
    symlink(&victim, out.join("p-latency_cdf.svg")).expect("link");
    assert!(redraw(&w.results_json, &out).is_err());
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
