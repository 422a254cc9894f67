//! The tests' knobs (`UNBLOAT_TC`, `UNBLOAT_IP`, `UNBLOAT_CRASH_AT`) exist only in test builds
//! (issue 36, item 11: a release binary that ran `UNBLOAT_TC=/tmp/evil` ran it as root). This
//! binary is a test build, knobs on: it must fail scripts/check-release-knobs, the check
//! `make build` runs on the product binary with the same planted `tc`. So that check, passing
//! there, proves the product ignores the knobs; it cannot pass by never reaching `tc`.

use std::process::Command;

const UNBLOAT: &str = env!("CARGO_BIN_EXE_unbloat");

#[test]
fn the_release_check_catches_a_binary_that_runs_a_planted_tc() {
    // At compile time: a test build without the knobs does not build at all.
    const {
        assert!(
            unbloat_system::knobs::ENABLED,
            "the binary under test is built with the knobs (the dev-dependency's feature)"
        )
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/check-release-knobs"
    );
    let out = Command::new(script)
        .arg(UNBLOAT)
        .output()
        .expect("the check runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("built with the test knobs"), "{stderr}");
}
