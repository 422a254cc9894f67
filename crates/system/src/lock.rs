//! One lock per interface, so two `unbloat start`s (or a start and a stop) never interleave their
//! `tc` commands on the same device. The lock is an advisory `flock(2)` on
//! `<run dir>/<iface>.lock`; the kernel releases it when the process exits, even on a crash, so a
//! stale lock file is harmless.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot create the lock {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("another unbloat is changing {iface} right now (it holds {path}); wait for it to finish and try again")]
    Busy { iface: String, path: PathBuf },
}

/// Held while this process changes one interface; released on drop.
#[derive(Debug)]
pub struct IfaceLock {
    _file: File,
    path: PathBuf,
}

impl IfaceLock {
    /// Takes the lock without waiting: a second concurrent change is refused, not queued, because
    /// a queued start would apply settings that were decided before the first one finished.
    pub fn acquire(dir: &Path, iface: &str) -> Result<IfaceLock, LockError> {
        let path = dir.join(format!("{iface}.lock"));
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(LockError::Busy {
                    iface: iface.to_string(),
                    path,
                });
            }
            return Err(io(err));
        }
        Ok(IfaceLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_interface_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("unbloat-lock-test-{}", std::process::id()));
        let first = IfaceLock::acquire(&dir, "eth0").expect("first lock");
        // flock locks belong to the open file description, so a second open in the same process
        // conflicts just as another process would.
        match IfaceLock::acquire(&dir, "eth0") {
            Err(LockError::Busy { iface, .. }) => assert_eq!(iface, "eth0"),
            other => panic!("expected Busy, got {other:?}"),
        }
        let other_iface =
            IfaceLock::acquire(&dir, "eth1").expect("other interfaces are independent");
        drop(first);
        IfaceLock::acquire(&dir, "eth0").expect("lock is free again after drop");
        drop(other_iface);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
