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
//!   unless `unbloat confirm` removes the journal by `confirm_by_unix`, the change is undone as
//!   if it were still applying, and the previous records are written back. Until then other
//!   changes are refused; after it, any command (or the watchdog process) undoes it.
//!
//! The journal is data, never commands: what to remove and re-create is derived from typed plans
//! and snapshots. Only a process holding the transaction lock writes it, so a journal found by a
//! process that holds the lock was left by one that died.

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
    /// For [`Phase::Pending`]: when the change is undone unless confirmed (seconds since 1970).
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
            confirm_by_unix: None,
            id: format!("{}-{}", std::process::id(), now_unix_nanos()),
            entries,
        }
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
