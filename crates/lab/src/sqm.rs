//! The real sqm-scripts (../shared/peers/sqm-scripts), run as its ORIGIN.txt says: found above a
//! directory, its `src/` copied, `start-sqm` and `stop-sqm` pointed at a `sqm.conf` of ours. For
//! `unbloat bench start`, the two-host lab and the lab's `sqm-scripts:RECIPE` strategies
//! ([`crate::script`]), which compare against it.

use std::path::{Path, PathBuf};

/// Where sqm-scripts' source is: `shared/peers/sqm-scripts` above `from`.
pub fn find(from: &Path) -> Option<PathBuf> {
    from.ancestors()
        .map(|d| d.join("shared/peers/sqm-scripts"))
        .find(|c| c.join("src/start-sqm").is_file())
}

/// sqm-scripts' `src/` copied to `lib`, pointed at a sqm.conf of ours, with a fresh state
/// directory (a stale one makes start-sqm do nothing).
pub fn install(src: &Path, lib: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(lib.join("state"))?;
    for entry in std::fs::read_dir(src.join("src"))? {
        let entry = entry?;
        std::fs::copy(entry.path(), lib.join(entry.file_name()))?;
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

/// Where sqm-scripts' source is: `given` when it holds `src/start-sqm`, else (when `given` is
/// `None`) `shared/peers/sqm-scripts` above the current directory or above this program.
pub fn locate(given: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = given {
        return dir
            .join("src/start-sqm")
            .is_file()
            .then(|| dir.to_path_buf());
    }
    [std::env::current_dir().ok(), std::env::current_exe().ok()]
        .into_iter()
        .flatten()
        .find_map(|start| find(&start))
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
