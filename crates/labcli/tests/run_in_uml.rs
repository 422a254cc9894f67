//! `unbloat-lab run` in User-Mode Linux: the binary re-runs itself in the guest with its own
//! arguments forwarded unchanged (plus `--in-kernel`), not a list rebuilt from the parsed flags.
//! Every flag given (`--test`, `--streams`, a relative `--out`) must reach the copy in the guest. It needs root, a User-Mode Linux kernel (`make uml`), and the product
//! `target/release/unbloat` beside the binary under test (`make test` builds both).

use std::path::Path;
use std::process::Command;

use unbloat_testbed::kernel::slot::{self, Share};

const LAB: &str = env!("CARGO_BIN_EXE_unbloat-lab");

#[test]
fn run_forwards_its_own_arguments_into_user_mode_linux() {
    let product = Path::new(LAB).with_file_name("unbloat");
    assert!(
        product.is_file(),
        "{} is missing: `cargo build --release -p unbloat -p unbloat-lab-cli` first",
        product.display()
    );
    // The child boots its guest, and runs a lab in it, beside its own binary's lock files, not
    // this test binary's: the slot is taken here, so no `alone` test runs beside that lab.
    let _slot = slot::take(
        Share::Shared,
        "run_forwards_its_own_arguments_into_user_mode_linux",
    );
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("run-in-uml");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("scratch");
    let out = Command::new(LAB)
        .current_dir(&base)
        // Forced, so the re-run is what is tested even on a host whose kernel has every qdisc.
        .env("UNBLOAT_KERNEL", "uml")
        .args(["run", "--strategies", "none", "--test", "tcp_ndown"])
        .args([
            "--streams",
            "1",
            "--duration",
            "3s",
            "--out",
            "report",
            "--json",
        ])
        .output()
        .expect("unbloat-lab runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    assert!(stderr.contains("running in User-Mode Linux"), "{stderr}");
    // The relative --out meant the same directory in the guest: the outer process read its
    // report from there.
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the report as JSON");
    assert!(
        report["kernel"]
            .as_str()
            .is_some_and(|k| k.contains("User-Mode Linux")),
        "{report}"
    );
    assert!(base.join("report/lab.json").is_file());
    // --test reached the guest: the test it ran is the one asked for.
    let results = std::fs::read_to_string(base.join("report/lab.json")).expect("lab.json");
    assert!(results.contains("tcp_ndown"), "{results}");
    let _ = std::fs::remove_dir_all(&base);
}
