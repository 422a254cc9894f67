//! The files in packaging/ as the tools that read them see them.

use std::process::Command;

const UNIT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../packaging/systemd/unbloat.service"
);

/// `systemd-analyze verify` on the shipped unit, changed by `edit` (with `ExecStart` pointed at
/// this build, since verify checks the program exists; the man pages come with the package): its
/// lines about the unit. systemd-analyze exits 0 even for a value it ignores, so its words are
/// what count. `n` names the copy's directory (verify goes by the file's name, so each test has
/// its own directory in cargo's scratch space).
fn complaints(n: u32, edit: impl Fn(String) -> String) -> Vec<String> {
    let text = std::fs::read_to_string(UNIT).unwrap();
    assert!(text.contains("ExecStart=/usr/bin/unbloat daemon"), "{text}");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("unit-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let unit = dir.join("unbloat.service");
    let text = edit(text).replace("/usr/bin/unbloat", env!("CARGO_BIN_EXE_unbloat"));
    std::fs::write(&unit, text).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
        .expect("systemd-analyze (scripts/install-deps installs systemd)");
    assert!(out.status.success(), "{out:?}");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    said.lines()
        .filter(|l| l.contains("unbloat.service"))
        .map(String::from)
        .collect()
}

#[test]
fn systemd_analyze_verifies_the_shipped_unit() {
    let said = complaints(1, |t| t);
    assert!(said.is_empty(), "systemd-analyze verify: {said:?}");
}

/// The same check catches a wrong value: a broken copy of the unit is complained about.
#[test]
fn systemd_analyze_complains_about_a_broken_unit() {
    let said = complaints(2, |t| t.replace("WatchdogSec=30s", "WatchdogSec=soon"));
    assert!(said.iter().any(|l| l.contains("soon")), "{said:?}");
}

/// The most `systemd-analyze security` may score the shipped unit (0 is locked down, 10 is
/// "UNSAFE"; 9.0 before issue 36's hardening). The rest is what a root daemon that changes qdiscs
/// must keep: root itself, the host's network, netlink and IP sockets, CAP_NET_ADMIN.
const MAX_EXPOSURE: f64 = 3.0;

#[test]
fn the_shipped_unit_is_hardened() {
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(UNIT)
        .output()
        .expect("systemd-analyze (scripts/install-deps installs systemd)");
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said
        .lines()
        .find(|l| l.contains("Overall exposure level for unbloat.service:"))
        .unwrap_or_else(|| panic!("no overall exposure in: {said}{out:?}"));
    let score: f64 = line
        .rsplit(':')
        .next()
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"));
    assert!(score <= MAX_EXPOSURE, "{line}\n{said}");
}
