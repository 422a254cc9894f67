//! A directory under the system's temporary directory that goes when its guard goes: on
//! success, on an error returned early, and on a panic. Runs inside User-Mode Linux all have
//! the same pid, so a fresh name adds the clock.

use std::path::PathBuf;

/// A directory removed (with everything in it) when this is dropped.
pub struct WorkDir(pub PathBuf);

impl WorkDir {
    /// A fresh, empty `unbloat-TAG-PID-NANOS` directory under the temporary directory.
    pub fn new(tag: &str) -> std::io::Result<WorkDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!("unbloat-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p)?;
        Ok(WorkDir(p))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
