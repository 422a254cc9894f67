//! sqm-scripts, the queue manager unbloat imports from (`unbloat config import-sqm`) and is
//! compared with, installed as its ORIGIN.txt says: its scripts copied, `start-sqm` and
//! `stop-sqm` pointed at a `sqm.conf` of ours.
//!
//! The product's part: `unbloat config import-sqm --check` runs its start-sqm in a dry run
//! ([`dry`]), from the copy [`SYSTEM_DIR`] or a directory the user names, in a [`workdir`] that
//! goes when its guard goes. The lab's comparisons install the same way ([`install`]) from the
//! vendored copy, which only the test bench finds (unbloat-testbed's `peer` and `sqm`).

pub mod dry;
pub mod workdir;

use std::path::{Path, PathBuf};

/// Where a distribution installs sqm-scripts' scripts (the `SQM_LIB_DIR` of its
/// platform/{linux,openwrt}/sqm.conf, its systemd unit's `/usr/lib/sqm/start-sqm`): the
/// directory with `start-sqm`, `functions.sh` and the recipes, on OpenWrt and elsewhere.
pub const SYSTEM_DIR: &str = "/usr/lib/sqm";

/// The directory with sqm-scripts' `start-sqm` and what it reads: `dir/src` in its source tree,
/// or `dir` itself where it is installed ([`SYSTEM_DIR`]).
pub fn scripts(dir: &Path) -> Option<PathBuf> {
    [dir.join("src"), dir.to_path_buf()]
        .into_iter()
        .find(|d| d.join("start-sqm").is_file())
}

/// sqm-scripts' scripts ([`scripts`] of `src`) copied to `lib`, pointed at a sqm.conf of ours,
/// with a fresh state directory (a stale one makes start-sqm do nothing).
pub fn install(src: &Path, lib: &Path) -> std::io::Result<()> {
    let from = scripts(src).ok_or_else(|| {
        std::io::Error::other(format!(
            "{}: no start-sqm there or in its src/",
            src.display()
        ))
    })?;
    std::fs::create_dir_all(lib.join("state"))?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        // An installed copy's directory may hold more than the scripts; they are all files.
        if !entry.file_type()?.is_dir() {
            std::fs::copy(entry.path(), lib.join(entry.file_name()))?;
        }
    }
    let conf = lib.join("sqm.conf");
    std::fs::write(
        &conf,
        format!(
            "SQM_LIB_DIR={lib}\nSQM_STATE_DIR={lib}/state\nSQM_QDISC_STATE_DIR={lib}/state/available_qdiscs\nSQM_CHECK_QDISCS=\"fq_codel codel pie sfq cake\"\nSQM_SYSLOG=0\n",
            lib = lib.display()
        ),
    )?;
    for script in ["start-sqm", "stop-sqm"] {
        let path = lib.join(script);
        let text = std::fs::read_to_string(&path)?
            .replace("/etc/sqm/sqm.conf", &conf.display().to_string());
        std::fs::write(&path, text)?;
    }
    Ok(())
}
