//! One lock for every change to shaping, so two unbloat processes (a start and a stop, a
//! `set-rate` and a reload) never interleave their changes, and so that a journal found by the
//! holder of the lock was left by a process that died. It is an advisory `flock(2)` on
//! `<run dir>/transaction.lock`; the kernel releases it when the process exits, even on a crash,
//! so a stale lock file is harmless. It is opened without following a symlink.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot open the lock {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("another unbloat is changing shaping right now (it holds {path}); wait for it to finish and try again")]
    Busy { path: PathBuf },
}

/// Held while this process changes shaping; released on drop.
#[derive(Debug)]
pub struct TxLock {
    _file: File,
    path: PathBuf,
}

impl TxLock {
    /// Takes the lock without waiting: a second concurrent change is refused, not queued, because
    /// a queued start would apply settings that were decided before the first one finished.
    /// `dir` must exist (the caller made it safe first).
    pub fn acquire(dir: &Path) -> Result<TxLock, LockError> {
        let path = dir.join("transaction.lock");
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(LockError::Busy { path });
            }
            return Err(io(err));
        }
        Ok(TxLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("unbloat-lock-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = TxLock::acquire(&dir).expect("first lock");
        // flock locks belong to the open file description, so a second open in the same process
        // conflicts just as another process would.
        match TxLock::acquire(&dir) {
            Err(LockError::Busy { path }) => assert_eq!(path, first.path()),
            other => panic!("expected Busy, got {other:?}"),
        }
        drop(first);
        TxLock::acquire(&dir).expect("free again after drop");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
