//! One lock for every change to shaping, so two unbloat processes (a start and a stop, a
//! `set-rate` and a reload) never interleave their changes, and so that a journal found by the
//! holder of the lock was left by a process that died. It is an advisory `flock(2)` on
//! `<run dir>/transaction.lock`; the kernel releases it when the process exits, even on a crash,
//! so a stale lock file is harmless. It is opened without following a symlink.
//!
//! A second lock, [`ControllerLock`], one per interface, is held for as long as an autorate
//! controller runs there: two controllers on one interface (`unbloat autorate` by hand beside
//! the daemon's `[autorate]` table) would each undo the other's rates several times a second.

use std::fs::{File, OpenOptions};
use std::io::Write;
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
    #[error("{iface}'s rates are already moved by another autorate controller ({holder}); two would undo each other's changes: stop that one first")]
    Controlled { iface: String, holder: String },
}

/// Opens `path` (made if missing, mode 0600, no symlink followed) and takes its `flock` without
/// waiting; `Ok(None)` when another open file holds it.
fn try_flock(path: &Path) -> Result<Option<File>, LockError> {
    let io = |source| LockError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io)?;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(None);
        }
        return Err(io(err));
    }
    Ok(Some(file))
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
        match try_flock(&path)? {
            Some(file) => Ok(TxLock { _file: file, path }),
            None => Err(LockError::Busy { path }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Held by an interface's one autorate controller for as long as it runs; released on drop, or
/// by the kernel when the process dies.
#[derive(Debug)]
pub struct ControllerLock {
    _file: File,
}

impl ControllerLock {
    /// Takes `<dir>/autorate.<iface>.lock` and writes `who` (with this process's id) into it, for
    /// the refusal a second controller gets. `dir` must exist (the caller made it safe first).
    pub fn acquire(dir: &Path, iface: &str, who: &str) -> Result<ControllerLock, LockError> {
        let path = dir.join(format!("autorate.{iface}.lock"));
        let Some(mut file) = try_flock(&path)? else {
            // The holder writes its name just after it locks: empty for that moment only.
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let holder = match text.trim() {
                "" => "another process".to_string(),
                t => t.to_string(),
            };
            return Err(LockError::Controlled {
                iface: iface.to_string(),
                holder,
            });
        };
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        file.set_len(0).map_err(io)?;
        write!(file, "{who}, pid {}", std::process::id()).map_err(io)?;
        Ok(ControllerLock { _file: file })
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

    #[test]
    fn a_second_controller_on_an_interface_is_told_who_holds_it() {
        let dir = std::env::temp_dir().join(format!("unbloat-ctl-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = ControllerLock::acquire(&dir, "wan0", "unbloatd").expect("first");
        let err = ControllerLock::acquire(&dir, "wan0", "unbloat autorate").unwrap_err();
        let text = err.to_string();
        let pid = format!("unbloatd, pid {}", std::process::id());
        assert!(
            text.contains("wan0's rates") && text.contains(&pid),
            "{text}"
        );
        // Another interface is another lock.
        let other = ControllerLock::acquire(&dir, "wan1", "unbloat autorate").expect("wan1");
        drop((first, other));
        let again = ControllerLock::acquire(&dir, "wan0", "unbloat autorate").expect("free");
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
