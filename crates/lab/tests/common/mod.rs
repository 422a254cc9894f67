//! What the lab's real-kernel tests share.

use std::path::PathBuf;

/// The profile the real-kernel lab tests run: vdsl2's framing at 20/5 Mbit/s (the file says why
/// not vdsl2's own rates).
#[allow(dead_code)] // not every test binary runs a lab
pub const TEST_PROFILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/profiles/vdsl2-20.toml"
);

/// The `unbloat` binary the lab runs in its namespaces (`unbloat serve`, `unbloat test`,
/// `unbloat start`): `UNBLOAT_EXE` when set, else `target/<profile>/unbloat` beside this test
/// binary (`target/<profile>/deps/NAME-HASH`), which a workspace build (`cargo build --release`,
/// `make test`) puts there. Missing, the test fails and says how to build it (never a skip).
pub fn unbloat_exe() -> PathBuf {
    if let Some(p) = std::env::var_os("UNBLOAT_EXE") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("this test binary");
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("unbloat"))
        .expect("target dir");
    assert!(
        path.exists(),
        "{} is missing: build it first (`cargo build --release -p unbloat`, or `make test`), or set UNBLOAT_EXE",
        path.display()
    );
    path
}
