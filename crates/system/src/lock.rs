//! One lock for every change to shaping, so two unbloat processes (a start and a stop, a
//! `set-rate` and a reload) never interleave their changes, and so that a journal found by the
//! holder of the lock was left by a process that died. It is an advisory `flock(2)` on
//! `<run dir>/transaction.lock`; the kernel releases it when the process exits, even on a crash,
//! so a stale lock file is harmless. It is opened without following a symlink.
//!
//! A second change waits for the first, up to [`TX_WAIT`]: the holders are short (a start, a
//! stop, one rate change of a controller), and a refusal at the first collision knocked the
//! shaping out (a root `unbloat status` beside `unbloat autorate` ended the controller; a
//! re-apply after a PPPoE reconnect stayed unshaped until the next periodic check). The holder
//! writes its pid, when it took the lock and its command line into the file, so a wait that
//! runs out names who holds it and for how long.
//!
//! A second lock, [`ControllerLock`], one per interface, is held for as long as an autorate
//! controller runs there: two controllers on one interface (`unbloat autorate` by hand beside
//! the daemon's `[autorate]` table) would each undo the other's rates several times a second.
//! `unbloat tune` holds it too (it moves the rates for minutes), and the daemon leaves an
//! interface whose lock another process holds to that process ([`ControllerLock::held_by`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a change waits for another to finish: a start in User-Mode Linux on a loaded
/// machine takes a few seconds; a holder past this is stuck, or is a long job of its own.
pub const TX_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot open the lock {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("another unbloat is changing shaping: {holder} has held {path} for {held}; waited {} s for it to finish. Try again once it is done", .waited.as_secs())]
    Busy {
        path: PathBuf,
        /// `pid 123 (`unbloat autorate wan0`)`, or `another process` when it did not say.
        holder: String,
        /// How long the holder has held it (`12 s`), or `a while` when it did not say.
        held: String,
        waited: Duration,
    },
    #[error("{iface}'s rates are already moved by another autorate controller ({holder}); two would undo each other's changes: stop that one first")]
    Controlled { iface: String, holder: String },
}

/// Opens a lock file: made if missing (mode 0600), never through a symlink, for `flock`. Public
/// for the test bench's guest slots (unbloat-testbed), whose lock files follow the same rules.
pub fn open_lock_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens `path` ([`open_lock_file`]) and takes its `flock` without waiting; `Ok(None)` when
/// another open file holds it.
fn try_flock(path: &Path) -> Result<Option<File>, LockError> {
    let io = |source| LockError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = open_lock_file(path).map_err(io)?;
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
    /// Takes the lock, waiting up to [`TX_WAIT`] for another holder. `dir` must exist (the
    /// caller made it safe first).
    pub fn acquire(dir: &Path) -> Result<TxLock, LockError> {
        TxLock::acquire_within(dir, TX_WAIT)
    }

    /// [`TxLock::acquire`] waiting up to `limit` (zero: not at all). Polled: flock(2) has no
    /// timeout, and a blocking flock in a thread could not be taken back once we gave up.
    pub fn acquire_within(dir: &Path, limit: Duration) -> Result<TxLock, LockError> {
        let path = dir.join("transaction.lock");
        let t0 = Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            if let Some(file) = try_flock(&path)? {
                // Who holds it is for a waiter's message only: on a full run directory the lock
                // still holds, and the journal's write that follows fails with the clear "nothing
                // was changed" (a waiter then reads "another process").
                let _ = write_holder(&file, &path);
                return Ok(TxLock { _file: file, path });
            }
            let waited = t0.elapsed();
            if waited >= limit {
                let (holder, held) = read_holder(&path);
                return Err(LockError::Busy {
                    path,
                    holder,
                    held,
                    waited,
                });
            }
            std::thread::sleep(pause.min(limit - waited));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes `pid N\nsince MS\nCOMMAND LINE` into the lock file just taken (MS: the boot clock, so
/// a step of the wall clock does not change how long it has been held).
fn write_holder(file: &File, path: &Path) -> Result<(), LockError> {
    let args: Vec<String> = std::env::args().collect();
    let mut line = args.join(" ");
    if let Some(base) = args.first().and_then(|a| a.rsplit('/').next()) {
        line = std::iter::once(base.to_string())
            .chain(args.iter().skip(1).cloned())
            .collect::<Vec<_>>()
            .join(" ");
    }
    let line: String = line.chars().filter(|c| !c.is_control()).take(120).collect();
    let since = crate::deadline::Now::read().since_boot.as_millis();
    let text = format!("pid {}\nsince {since}\n{line}\n", std::process::id());
    let io = |source| LockError::Io {
        path: path.to_path_buf(),
        source,
    };
    file.set_len(0).map_err(io)?;
    file.write_all_at(text.as_bytes(), 0).map_err(io)
}

/// Who holds the lock and for how long, as [`write_holder`] left it.
fn read_holder(path: &Path) -> (String, String) {
    let text = crate::state::read_file(path)
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut lines = text.lines();
    let pid = lines.next().and_then(|l| l.strip_prefix("pid "));
    let since = lines
        .next()
        .and_then(|l| l.strip_prefix("since "))
        .and_then(|ms| ms.parse::<u64>().ok());
    let command = lines.next().unwrap_or("").trim();
    let holder = match (pid, command) {
        (Some(pid), "") => format!("pid {pid}"),
        (Some(pid), command) => format!("pid {pid} (`{command}`)"),
        (None, _) => "another process".to_string(),
    };
    let held = match since {
        Some(ms) => {
            let now = crate::deadline::Now::read().since_boot;
            format!(
                "{} s",
                now.saturating_sub(Duration::from_millis(ms)).as_secs()
            )
        }
        None => "a while".to_string(),
    };
    (holder, held)
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
            return Err(LockError::Controlled {
                iface: iface.to_string(),
                holder: holder(&path),
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

    /// Who holds `<dir>/autorate.<iface>.lock` (its `who, pid N`), while an open file other than
    /// one of the caller's own holds it: this process's own controller counts as another, so the
    /// caller asks only about interfaces it runs none on. No lock file, or one that cannot be
    /// opened: `None` (nothing is made). Looking takes the lock for a moment when it is free; a
    /// controller that starts in that moment is refused as if one ran, and can be started again.
    pub fn held_by(dir: &Path, iface: &str) -> Option<String> {
        let path = dir.join(format!("autorate.{iface}.lock"));
        std::fs::symlink_metadata(&path).ok()?;
        match try_flock(&path) {
            Ok(None) => Some(holder(&path)),
            // Free (the file is closed here, and with it the lock), or not to be opened.
            Ok(Some(_)) | Err(_) => None,
        }
    }

    /// Whether `holder` (as [`ControllerLock::held_by`] or a refusal names it) is this process.
    pub fn is_this_process(holder: &str) -> bool {
        holder.ends_with(&format!(", pid {}", std::process::id()))
    }
}

/// Who holds a controller lock, as its holder wrote it (`who, pid N`): read without following a
/// link, control characters left out, at most 120 of them. The holder writes its name just after
/// it locks: for that moment the file is empty, and the holder is "another process".
fn holder(path: &Path) -> String {
    let text = crate::state::read_file(path)
        .ok()
        .flatten()
        .unwrap_or_default();
    match text.trim() {
        "" => "another process".to_string(),
        t => t.chars().filter(|c| !c.is_control()).take(120).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/tmp"))
            .join(format!("lock-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_dropped() {
        let dir = temp("tx");
        let first = TxLock::acquire(&dir).expect("first lock");
        // flock locks belong to the open file description, so a second open in the same process
        // conflicts just as another process would.
        match TxLock::acquire_within(&dir, Duration::ZERO) {
            Err(LockError::Busy { path, .. }) => assert_eq!(path, first.path()),
            other => panic!("expected Busy, got {other:?}"),
        }
        drop(first);
        TxLock::acquire_within(&dir, Duration::ZERO).expect("free again after drop");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 36, item 5: a change that met the lock was refused at once, so a root `status`
    /// beside `unbloat autorate` ended the controller.
    #[test]
    fn a_second_change_waits_for_the_first_and_one_past_the_bound_is_told_who_holds_it() {
        let dir = temp("wait");
        let first = TxLock::acquire(&dir).expect("first lock");
        let held = Instant::now();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            drop(first);
        });
        let second = TxLock::acquire(&dir).expect("the second waits for the first, not fails");
        let waited = held.elapsed();
        assert!(waited >= Duration::from_millis(1400), "{waited:?}");
        assert!(waited < Duration::from_millis(2500), "{waited:?}");
        releaser.join().unwrap();

        // Held beyond the bound: refused, naming the holder (this process) and the time.
        std::thread::sleep(Duration::from_millis(1100));
        let t0 = Instant::now();
        let err = TxLock::acquire_within(&dir, Duration::from_millis(300)).unwrap_err();
        assert!(t0.elapsed() >= Duration::from_millis(300));
        let text = err.to_string();
        let pid = format!("pid {} (`", std::process::id());
        assert!(text.contains(&pid), "{text}");
        assert!(text.contains("for 1 s;"), "{text}");
        assert!(text.contains("transaction.lock"), "{text}");
        drop(second);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_second_controller_on_an_interface_is_told_who_holds_it() {
        let dir = temp("ctl");
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

    #[test]
    fn held_by_names_the_holder_and_makes_nothing_where_none_is() {
        let dir = temp("held");
        assert_eq!(ControllerLock::held_by(&dir, "wan0"), None);
        assert!(
            !dir.join("autorate.wan0.lock").exists(),
            "looking made a lock file"
        );
        let tune = ControllerLock::acquire(&dir, "wan0", "unbloat tune").expect("first");
        let pid = format!("unbloat tune, pid {}", std::process::id());
        assert_eq!(
            ControllerLock::held_by(&dir, "wan0").as_deref(),
            Some(pid.as_str())
        );
        assert_eq!(ControllerLock::held_by(&dir, "wan1"), None);
        drop(tune);
        // Free again: not held, and looking left it free.
        assert_eq!(ControllerLock::held_by(&dir, "wan0"), None);
        drop(ControllerLock::acquire(&dir, "wan0", "unbloat autorate").expect("free"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
