//! The files in packaging/ as the tools that read them see them.

use std::process::Command;

/// `systemd-analyze verify` on the shipped unit (with `ExecStart` pointed at this build, since
/// verify checks the program exists; the man pages come with the package): no complaint about
/// it. systemd-analyze exits 0 even for a value it ignores, so its words are what count.
#[test]
fn systemd_analyze_verifies_the_shipped_unit() {
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/systemd/unbloat.service"
    );
    let text = std::fs::read_to_string(shipped).unwrap();
    assert!(text.contains("ExecStart=/usr/bin/unbloat daemon"), "{text}");
    let unit = unit_path(line!());
    std::fs::write(
        &unit,
        text.replace("/usr/bin/unbloat", env!("CARGO_BIN_EXE_unbloat")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
        .expect("systemd-analyze (scripts/install-deps installs systemd)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let about_ours: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("unbloat.service"))
        .collect();
    assert!(
        out.status.success() && about_ours.is_empty(),
        "systemd-analyze verify:\n{said}"
    );
}

/// The same check catches a wrong value: a broken copy of the unit is complained about.
#[test]
fn systemd_analyze_complains_about_a_broken_unit() {
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/systemd/unbloat.service"
    );
    let text = std::fs::read_to_string(shipped)
        .unwrap()
        .replace("WatchdogSec=30s", "WatchdogSec=soon");
    let unit = unit_path(line!());
    std::fs::write(
        &unit,
        text.replace("/usr/bin/unbloat", env!("CARGO_BIN_EXE_unbloat")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unbloat.service"),
        "no complaint"
    );
}

/// A place for a copy of the unit, named as the unit (verify goes by the name), one per test:
/// cargo's scratch directory for integration tests.
fn unit_path(test: u32) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("unit-{test}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("unbloat.service")
}
