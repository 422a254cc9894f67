//! What `unbloat start` created, recorded under the run directory (`/run/unbloat`, or
//! `$UNBLOAT_RUN_DIR`), so that `stop` removes exactly that and nothing it did not create, and so
//! that `status` can tell unbloat's qdiscs from somebody else's.
//!
//! `/run` is a tmpfs: the record disappears at reboot together with the qdiscs it describes.
//! Files are written to a temporary name and renamed, so a crash never leaves half a record.

use crate::runner::Cmd;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record format; bump it when a field changes meaning, and teach [`StateDir::load`] the old one.
pub const STATE_VERSION: u32 = 1;
pub const DEFAULT_RUN_DIR: &str = "/run/unbloat";

/// What exists on the system because unbloat created it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// A root qdisc on the WAN device (egress shaping).
    pub root_qdisc: bool,
    /// The `ffff:` ingress qdisc on the WAN device, with its redirect filter.
    pub ingress_qdisc: bool,
    /// The IFB device, if unbloat made it (an IFB that already existed is used, never deleted).
    pub ifb_device: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapedState {
    pub version: u32,
    pub iface: String,
    pub created: Created,
    /// The options as the user gave them (flags merged over the config), to rebuild the plan.
    pub options: serde_json::Value,
    /// The exact commands that were applied, as `unbloat plan` prints them; a start whose script
    /// is identical and whose live state still verifies has nothing to do (start is idempotent).
    pub script: String,
    /// The commands that created it, to restore this setup if a later start fails.
    pub apply: Vec<StoredCmd>,
    /// The commands that remove exactly what `apply` created.
    pub teardown: Vec<StoredCmd>,
    pub applied_at_unix: u64,
}

/// A command as recorded in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCmd {
    pub program: String,
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

impl From<&Cmd> for StoredCmd {
    fn from(c: &Cmd) -> StoredCmd {
        StoredCmd {
            program: c.program.clone(),
            args: c.args.clone(),
            stdin: c.stdin.clone(),
        }
    }
}

impl From<&StoredCmd> for Cmd {
    fn from(c: &StoredCmd) -> Cmd {
        Cmd {
            program: c.program.clone(),
            args: c.args.clone(),
            stdin: c.stdin.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a state record unbloat can read ({reason}); remove it if the interface is no longer shaped")]
    Corrupt { path: PathBuf, reason: String },
}

/// The directory of state records, one `<iface>.json` per shaped interface.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    pub fn new(path: impl Into<PathBuf>) -> StateDir {
        StateDir { path: path.into() }
    }

    /// `$UNBLOAT_RUN_DIR` if set (tests, unusual systems), else `/run/unbloat`.
    pub fn from_env() -> StateDir {
        StateDir::new(
            std::env::var_os("UNBLOAT_RUN_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| DEFAULT_RUN_DIR.into()),
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&self, iface: &str) -> PathBuf {
        self.path.join(format!("{iface}.json"))
    }

    pub fn load(&self, iface: &str) -> Result<Option<ShapedState>, StateError> {
        let path = self.file(iface);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StateError::Io {
                    what: "read",
                    path,
                    source,
                })
            }
        };
        let state: ShapedState = serde_json::from_str(&text).map_err(|e| StateError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if state.version != STATE_VERSION {
            let reason = format!(
                "version {} (this unbloat reads {STATE_VERSION})",
                state.version
            );
            return Err(StateError::Corrupt { path, reason });
        }
        Ok(Some(state))
    }

    pub fn save(&self, state: &ShapedState) -> Result<(), StateError> {
        let path = self.file(&state.iface);
        let io = |what, source| StateError::Io {
            what,
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.path).map_err(|e| io("create the directory of", e))?;
        let tmp = self.path.join(format!(".{}.json.tmp", state.iface));
        let text = serde_json::to_string_pretty(state).expect("state is plain data");
        std::fs::write(&tmp, text + "\n").map_err(|e| io("write", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io("write", e))
    }

    pub fn remove(&self, iface: &str) -> Result<(), StateError> {
        let path = self.file(iface);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StateError::Io {
                what: "remove",
                path,
                source,
            }),
        }
    }

    /// Every interface with a record, sorted by name.
    pub fn list(&self) -> Result<Vec<String>, StateError> {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(source) => {
                return Err(StateError::Io {
                    what: "list",
                    path: self.path.clone(),
                    source,
                })
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .map(str::to_string)
            })
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        Ok(names)
    }
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(iface: &str) -> ShapedState {
        ShapedState {
            version: STATE_VERSION,
            iface: iface.into(),
            created: Created {
                root_qdisc: true,
                ingress_qdisc: true,
                ifb_device: Some(format!("ifb4{iface}")),
            },
            options: serde_json::json!({"down": "78mbit"}),
            script: "qdisc add dev eth0 root cake\n".into(),
            apply: vec![StoredCmd::from(&Cmd::tc([
                "qdisc", "add", "dev", iface, "root", "cake",
            ]))],
            teardown: vec![StoredCmd::from(&Cmd::tc([
                "qdisc", "del", "dev", iface, "root",
            ]))],
            applied_at_unix: 1,
        }
    }

    #[test]
    fn records_round_trip_and_list_and_remove() {
        let dir = StateDir::new(
            std::env::temp_dir().join(format!("unbloat-state-test-{}", std::process::id())),
        );
        assert_eq!(dir.load("eth0").unwrap(), None);
        dir.save(&sample("eth0")).unwrap();
        dir.save(&sample("eth1")).unwrap();
        assert_eq!(dir.load("eth0").unwrap(), Some(sample("eth0")));
        assert_eq!(dir.list().unwrap(), vec!["eth0", "eth1"]);
        dir.remove("eth0").unwrap();
        dir.remove("eth0").unwrap(); // removing twice is fine: stop is idempotent too
        assert_eq!(dir.list().unwrap(), vec!["eth1"]);
        let _ = std::fs::remove_dir_all(dir.path());
    }

    #[test]
    fn a_corrupt_record_is_an_error_that_names_the_file() {
        let dir = StateDir::new(
            std::env::temp_dir().join(format!("unbloat-state-bad-{}", std::process::id())),
        );
        std::fs::create_dir_all(dir.path()).unwrap();
        std::fs::write(dir.path().join("eth9.json"), "{not json").unwrap();
        let err = dir.load("eth9").unwrap_err().to_string();
        assert!(err.contains("eth9.json"), "{err}");
        let _ = std::fs::remove_dir_all(dir.path());
    }
}
