//! Issue 36 item 10, through the built binary: a link planted at the name of a file unbloat
//! writes (here a plot `unbloat plot` redraws) ends the command with an error that names the
//! file and says why, and the file the link points at stays as it was.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::Command;

const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

#[test]
fn a_planted_link_at_a_plot_is_refused_with_a_clear_error_and_its_target_untouched() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("planted-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let results = dir.join("run.json");
    let text = unbloat_report::synthetic::ping(1)
        .to_json_pretty()
        .expect("json");
    std::fs::write(&results, text).expect("results");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").expect("victim");
    symlink(&victim, dir.join("run-latency_cdf.svg")).expect("link");
    let out = Command::new(UNBLOAT)
        .arg("plot")
        .arg(&results)
        .output()
        .expect("unbloat runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("run-latency_cdf.svg") && stderr.contains("symbolic link"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
