//! OpenWrt's own `uci`, built from its source by scripts/openwrt/userland (make test does it
//! first), run on a config directory of the test's own.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where scripts/openwrt/userland puts it ($UNBLOAT_UCI names another); a machine without it
/// fails the test and says how to build it, rather than passing on unbloat's reader alone.
pub fn binary() -> PathBuf {
    let path = std::env::var_os("UNBLOAT_UCI")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/unbloat/openwrt/bin/uci"));
    assert!(
        path.is_file(),
        "{}: OpenWrt's uci is not built here; run scripts/openwrt/userland (make test does)",
        path.display()
    );
    path
}

/// `uci -c DIR -t DIR/.uci ARGS...`: its changes kept under DIR, not in /tmp/.uci.
pub fn output(dir: &Path, args: &[&str]) -> Output {
    Command::new(binary())
        .arg("-c")
        .arg(dir)
        .arg("-t")
        .arg(dir.join(".uci"))
        .args(args)
        .output()
        .unwrap()
}

/// As [`output`], and it must succeed.
pub fn must(dir: &Path, args: &[&str]) {
    let out = output(dir, args);
    assert!(
        out.status.success(),
        "uci {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
