//! The real sqm-scripts as the lab and the benchmarks compare unbloat with it: taken from a
//! directory the user names (`--sqm-scripts DIR`) or the vendored copy ([`crate::peer`]), and
//! installed into a directory of its own for one run ([`Installed`]). Installing itself, and the
//! dry run `unbloat config import-sqm --check` makes, are the product's
//! ([`unbloat_system::sqm`]).

use std::path::{Path, PathBuf};

use unbloat_system::sqm::{install, scripts};

use crate::peer;

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

/// sqm-scripts installed ([`install`]) into a directory of its own, removed when dropped.
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
