//! sqm-scripts (third_party/sqm-scripts), the queue manager unbloat is compared with and imports
//! from: found ([`locate`], [`peer`]: only where root may run what it holds), and installed as its
//! ORIGIN.txt says: its scripts copied, `start-sqm` and `stop-sqm` pointed at a `sqm.conf` of ours.
//!
//! It lives here, beside the other things that run programs, because the product needs it too:
//! `unbloat config import-sqm --check` runs its start-sqm in a dry run ([`dry`]), in a
//! [`workdir`] that goes when its guard goes. The lab (its `sqm-scripts:RECIPE` strategies and
//! the two-host lab) and the benchmarks (`unbloat-lab bench start`) use the same functions.

pub mod dry;
pub mod peer;
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

/// Where the lab and the benchmarks take sqm-scripts from: `given` (`--sqm-scripts DIR`) when it
/// holds `src/start-sqm` (or an installed `start-sqm`), else the vendored copy
/// ([`peer::peer_dir`]); else why not.
pub fn locate(given: Option<&Path>) -> Result<PathBuf, String> {
    let dir = match given {
        Some(dir) => dir.to_path_buf(),
        None => peer::peer_dir(peer::SQM_SCRIPTS)?,
    };
    match scripts(&dir) {
        Some(_) => Ok(dir),
        None => Err(format!("{}: no src/start-sqm there", dir.display())),
    }
}

/// sqm-scripts installed (see [`install`]) into a directory of its own, removed when dropped.
pub struct Installed {
    pub lib: PathBuf,
}

impl Installed {
    /// Installs `src` into a fresh `lib` (anything already there is removed first: a stale
    /// state directory would make start-sqm do nothing).
    pub fn new(src: &Path, lib: PathBuf) -> std::io::Result<Installed> {
        if lib.exists() {
            std::fs::remove_dir_all(&lib)?;
        }
        // Owned before it is filled, so a failure half way removes what was copied.
        let installed = Installed { lib };
        install(src, &installed.lib)?;
        Ok(installed)
    }

    /// The state file start-sqm writes for `iface` once its recipe succeeded.
    pub fn state_file(&self, iface: &str) -> PathBuf {
        self.lib.join("state").join(format!("{iface}.state"))
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.lib);
    }
}
