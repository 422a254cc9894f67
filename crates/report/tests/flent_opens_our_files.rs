//! The real flent (Debian's, or PyPI's) opens the `.flent.gz` files we write and renders the
//! plots people use: `all_scaled` (rrul) or the test's default, `totals`, and `ping_cdf`.
//! flent is a test dependency: when it is missing this test FAILS and says how to install it.

use std::path::{Path, PathBuf};
use std::process::Command;

use unbloat_report::flent::{write_flent_file, FlentTest};
use unbloat_report::{synthetic, Results};

fn flent() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("flent"))
            .find(|p| p.is_file())
    });
    match found {
        Some(p) => p,
        None => panic!(
            "flent is not installed, and these tests check that flent opens unbloat's files; \
             run scripts/install-deps (Debian: apt-get install flent python3-matplotlib)"
        ),
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "unbloat-report-flent-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Runs `flent -i FILE -p PLOT -o out.svg` and checks it made a real SVG.
fn render(file: &Path, plot: &str, dir: &Path) {
    let out = dir.join(format!("{plot}.svg"));
    let run = Command::new(flent())
        .arg("-i")
        .arg(file)
        .args(["-p", plot, "-o"])
        .arg(&out)
        // Headless: matplotlib must not look for a display.
        .env("MPLBACKEND", "Agg")
        .env_remove("DISPLAY")
        .output()
        .expect("flent runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "flent -p {plot} failed: {stdout}\n{stderr}"
    );
    // flent logs errors (a missing series, a bad plot) but may still exit 0.
    for bad in [
        "ERROR",
        "Traceback",
        "Unable to load",
        "Unable to read",
        "Missing",
    ] {
        assert!(
            !stderr.contains(bad) && !stdout.contains(bad),
            "flent -p {plot}: {stdout}\n{stderr}"
        );
    }
    let svg = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    assert!(
        svg.len() > 5_000 && svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "{plot}"
    );
}

fn check(tag: &str, results: &Results, test: FlentTest, plots: &[&str]) {
    let dir = scratch(tag);
    let file = dir.join(format!("{}.flent.gz", test.name()));
    write_flent_file(results, test, &file).expect("write flent file");
    for plot in plots {
        render(&file, plot, &dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn flent_plots_rrul() {
    check(
        "rrul",
        &synthetic::rrul(5),
        FlentTest::Rrul,
        &["all_scaled", "totals", "ping_cdf"],
    );
}

#[test]
fn flent_plots_rrul_be() {
    let mut r = synthetic::rrul(5);
    r.metadata.profile = "rrul_be".into();
    for s in &mut r.streams {
        s.dscp = 0;
    }
    for p in &mut r.probes {
        p.dscp = 0;
    }
    check(
        "rrul_be",
        &r,
        FlentTest::RrulBe,
        &["all_scaled", "totals", "ping_cdf"],
    );
}

#[test]
fn flent_plots_tcp_nup() {
    check(
        "tcp_nup",
        &synthetic::tcp_nup(4, 5),
        FlentTest::TcpNup,
        &["totals", "upload", "ping_cdf"],
    );
}

#[test]
fn flent_plots_tcp_ndown() {
    check(
        "tcp_ndown",
        &synthetic::tcp_ndown(4, 5),
        FlentTest::TcpNdown,
        &["totals", "download", "ping_cdf"],
    );
}

#[test]
fn flent_plots_ping() {
    check(
        "ping",
        &synthetic::ping(5),
        FlentTest::Ping,
        &["ping", "ping_cdf"],
    );
}

#[test]
fn flent_plots_a_partial_run_with_lost_probes() {
    // The link went away 12 s in: series stop early and the last probes were lost.
    let mut r = synthetic::rrul(6);
    r.metadata.partial = true;
    r.metadata.partial_reason = Some("connection reset".into());
    for s in &mut r.streams {
        s.samples.retain(|x| x.t <= 12.0);
    }
    for p in &mut r.probes {
        for x in p.samples.iter_mut().filter(|x| x.t > 11.0) {
            x.rtt_ms = None;
        }
    }
    check("partial", &r, FlentTest::Rrul, &["all_scaled", "totals"]);
}

#[test]
fn flent_plots_tcp_nup_without_icmp() {
    // ICMP can be unavailable (no unprivileged ICMP sockets and no root); tcp_nup's totals plot
    // names "Ping (ms) ICMP", and flent must still draw it (with that series empty).
    let mut r = synthetic::tcp_nup(2, 5);
    r.probes
        .retain(|p| p.kind != unbloat_report::ProbeKind::Icmp);
    check("nup_no_icmp", &r, FlentTest::TcpNup, &["totals", "upload"]);
}
