//! The journal of the one transaction in progress: `<run dir>/journal.json`.
//!
//! Before the first change to the kernel, unbloat writes (fsync, atomic rename) what it is about
//! to do: for each interface the snapshot taken before ([`Snapshot`]), the record of what unbloat
//! had there ([`ShapedState`], if anything) and the record it will have after (None for a stop).
//! If the journal cannot be written, nothing is changed. The phases:
//!
//! - [`Phase::Applying`]: the kernel may hold any mix of the old and the new setup. Recovery
//!   undoes it: it removes what differs from the snapshot and is unbloat's to remove, puts the old
//!   setup back, and compares the device with the snapshot. Records are only written after the
//!   commit, so they still describe the old setup.
//! - [`Phase::Committed`]: the new setup was applied and verified. Recovery finishes it: it
//!   writes the new records and removes the journal.
//! - [`Phase::Pending`]: applied, verified and recorded, but on trial (`start --confirm 60s`):
//!   unless `unbloat confirm` removes the journal by its [`Deadline`] (`confirm_by`, on the
//!   boot clock: [`crate::deadline`]), the change is undone as
//!   if it were still applying, and the previous records are written back. Until then other
//!   changes are refused; after it, any command (or the watchdog process) undoes it.
//!
//! The journal is data, never commands: what to remove and re-create is derived from typed plans
//! and snapshots. Only a process holding the transaction lock writes it, so a journal found by a
//! process that holds the lock was left by one that died.

use crate::deadline::{Deadline, Now};
use crate::snapshot::Snapshot;
use crate::state::{
    now_unix, read_file, remove_file, write_atomic, ShapedState, StateDir, StateError,
};
use serde::{Deserialize, Serialize};
use unbloat_units::IfName;

pub const JOURNAL_VERSION: u32 = 1;
const FILE: &str = "journal.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Applying,
    Committed,
    Pending,
}

/// One interface of a transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub iface: IfName,
    pub before: Snapshot,
    pub previous: Option<ShapedState>,
    /// None: the transaction stops shaping this interface.
    pub next: Option<ShapedState>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    pub version: u32,
    /// The process that wrote it, and when: for messages.
    pub pid: u32,
    pub started_unix: u64,
    pub phase: Phase,
    /// For [`Phase::Pending`]: when the change is undone unless confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_by: Option<Deadline>,
    /// The same in wall time (seconds since 1970), as journals written before `confirm_by`
    /// held it: read, never written (a step of the clock moved it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_by_unix: Option<u64>,
    /// Tells one transaction from the next (the watchdog of a pending change checks it).
    pub id: String,
    pub entries: Vec<Entry>,
}

impl Journal {
    pub fn new(entries: Vec<Entry>) -> Journal {
        Journal {
            version: JOURNAL_VERSION,
            pid: std::process::id(),
            started_unix: now_unix(),
            phase: Phase::Applying,
            confirm_by: None,
            confirm_by_unix: None,
            id: format!("{}-{}", std::process::id(), now_unix_nanos()),
            entries,
        }
    }
}

impl Journal {
    /// How long a change on trial has left at `now` (zero once due; zero for a journal with no
    /// deadline, which nothing confirms). `unix_now`: the wall clock, for an old journal only.
    pub fn left(&self, now: &Now, unix_now: u64) -> std::time::Duration {
        match (&self.confirm_by, self.confirm_by_unix) {
            (Some(deadline), _) => deadline.left(now),
            (None, Some(due)) => std::time::Duration::from_secs(due.saturating_sub(unix_now)),
            (None, None) => std::time::Duration::ZERO,
        }
    }

    /// [`Journal::left`] now.
    pub fn left_now(&self) -> std::time::Duration {
        self.left(&Now::read(), now_unix())
    }
}

fn now_unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl StateDir {
    pub fn write_journal(&self, journal: &Journal) -> Result<(), StateError> {
        self.ensure()?;
        let text = serde_json::to_string(journal).expect("a journal is plain data") + "\n";
        write_atomic(self.path(), FILE, &text)
    }

    pub fn read_journal(&self) -> Result<Option<Journal>, StateError> {
        let path = self.path().join(FILE);
        let Some(text) = read_file(&path)? else {
            return Ok(None);
        };
        let corrupt = |reason: String| StateError::Corrupt {
            path: path.clone(),
            reason,
        };
        let journal: Journal = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if journal.version != JOURNAL_VERSION {
            return Err(corrupt(format!(
                "version {} (this unbloat reads {JOURNAL_VERSION})",
                journal.version
            )));
        }
        Ok(Some(journal))
    }

    pub fn remove_journal(&self) -> Result<(), StateError> {
        remove_file(self.path(), FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pending() -> Journal {
        let mut j = Journal::new(vec![]);
        j.phase = Phase::Pending;
        j
    }

    fn now(boot: &str, secs: u64) -> Now {
        Now {
            boot_id: boot.into(),
            since_boot: Duration::from_secs(secs),
        }
    }

    /// Issue 36, item 3: the deadline was wall time, moved by every step of the clock.
    #[test]
    fn a_trial_is_judged_by_the_boot_clock_whatever_the_wall_clock_says() {
        let mut j = pending();
        j.confirm_by = Some(Deadline::after(
            &now("boot-a", 100),
            Duration::from_secs(15),
        ));
        let wall = 1_800_000_000;
        // An hour back or forward on the wall clock changes nothing.
        for unix in [wall - 3600, wall, wall + 3600] {
            assert_eq!(j.left(&now("boot-a", 110), unix), Duration::from_secs(5));
            assert_eq!(j.left(&now("boot-a", 125), unix), Duration::ZERO);
        }
        // Rebooted during the trial: due at once, so the change is undone at recovery.
        assert_eq!(j.left(&now("boot-b", 3), wall), Duration::ZERO);
    }

    #[test]
    fn a_journal_written_before_the_boot_clock_is_read_and_judged_by_the_wall_clock() {
        let mut j = pending();
        j.confirm_by_unix = Some(1_800_000_060);
        let mut text = serde_json::to_value(&j).unwrap();
        text.as_object_mut().unwrap().remove("confirm_by");
        let old: Journal = serde_json::from_value(text).unwrap();
        assert_eq!(old.confirm_by, None);
        let at = now("boot-a", 5);
        assert_eq!(old.left(&at, 1_800_000_000), Duration::from_secs(60));
        assert_eq!(old.left(&at, 1_800_000_060), Duration::ZERO);
        // What this version writes has the boot clock's deadline, and no wall time.
        let mut new = pending();
        new.confirm_by = Some(Deadline::after(&at, Duration::from_secs(15)));
        let written = serde_json::to_string(&new).unwrap();
        assert!(written.contains("\"boot_id\":\"boot-a\""), "{written}");
        assert!(!written.contains("confirm_by_unix"), "{written}");
    }
}
