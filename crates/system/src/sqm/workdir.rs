//! A directory under the system's temporary directory that goes when its guard goes: on
//! success, on an error returned early, and on a panic. It is made new, mode 0700, with a
//! random name ([`unbloat_safefs::private_dir`]): root works in it, and a directory someone
//! planted in `/tmp` at a name they guessed is never taken for ours.

use std::path::PathBuf;

/// A directory removed (with everything in it) when this is dropped.
pub struct WorkDir(pub PathBuf);

impl WorkDir {
    /// A fresh, empty `unbloat-TAG-RANDOM` directory under the temporary directory.
    pub fn new(tag: &str) -> std::io::Result<WorkDir> {
        let prefix = format!("unbloat-{tag}");
        unbloat_safefs::private_dir(&std::env::temp_dir(), &prefix).map(WorkDir)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// Issue 36 item 10: the name was predictable (tag, pid, clock) and `create_dir_all` took
    /// a directory someone had made there, with their files and mode. Now each is new, ours
    /// alone (0700), and never one that was there before.
    #[test]
    fn a_work_dir_is_fresh_and_private() {
        let a = WorkDir::new("workdir-test").expect("a");
        let b = WorkDir::new("workdir-test").expect("b");
        assert_ne!(a.0, b.0);
        for w in [&a, &b] {
            let meta = std::fs::symlink_metadata(&w.0).expect("meta");
            assert!(meta.is_dir());
            assert_eq!(meta.mode() & 0o777, 0o700, "{}", w.0.display());
            assert_eq!(std::fs::read_dir(&w.0).expect("list").count(), 0);
        }
        let gone = a.0.clone();
        drop(a);
        assert!(!gone.exists());
    }
}
