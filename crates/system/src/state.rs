//! The run directory (`/run/unbloat`, or `$UNBLOAT_RUN_DIR`): what unbloat shapes, as data.
//!
//! - `shaped/<iface>.json`: one [`ShapedState`] per shaped interface: the typed [`Plan`] of what
//!   unbloat created there. `stop` derives what to remove from the plan's kinds, handles and
//!   device names, and removes only what it still finds as the plan says; a record never holds a
//!   command, so a changed record cannot make unbloat run anything it would not build itself.
//! - `journal.json`: the transaction in progress ([`crate::journal`]).
//! - `transaction.lock`: held by the one process changing shaping ([`crate::lock`]).
//!
//! What callers can rely on:
//! - The directory is root's own (mode 0700, owned by this user; a looser mode on a directory
//!   we own is tightened, anything else is refused), and nothing in it is followed through a
//!   symlink: files are opened with `O_NOFOLLOW`, and the directory itself must not be one.
//! - Every write goes to a fresh temporary file that is fsynced, renamed over the old one, and
//!   followed by an fsync of the directory: after a crash the file is the old or the new version,
//!   never half of one, and a successful return means it is on disk.
//! - Files are read with a size limit ([`MAX_FILE`]).
//!
//! `/run` is a tmpfs: the records disappear at reboot together with the qdiscs they describe.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use unbloat_shaper::options::ShapeOptions;
use unbloat_shaper::plan::Plan;
use unbloat_units::IfName;

/// The record format; bump it when a field changes meaning. Version 1 stored commands; it lived
/// in the top of the run directory, where this version does not look.
pub const STATE_VERSION: u32 = 2;
pub const DEFAULT_RUN_DIR: &str = "/run/unbloat";
/// Where a system without `/run` keeps run-time files: OpenWrt, whose `/var` is a link to its
/// RAM disk `/tmp` (a `/run/unbloat` made there would land on the flash overlay, and its records
/// would outlive a reboot that took the shaping with it).
pub const VAR_RUN_DIR: &str = "/var/run/unbloat";

/// The run directory when `$UNBLOAT_RUN_DIR` is not set: [`DEFAULT_RUN_DIR`] where `/run` is a
/// directory, else [`VAR_RUN_DIR`]. Every unbloat on the machine (the daemon, `reload`,
/// `status`, rpcd's plugin) decides the same way, so they meet in the same place.
pub fn default_run_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<&'static Path> = std::sync::OnceLock::new();
    DIR.get_or_init(|| run_dir_under(Path::new("/")))
}

/// [`default_run_dir`] for a system whose root is `root` (its tests).
fn run_dir_under(root: &Path) -> &'static Path {
    let has_run = std::fs::metadata(root.join("run")).is_ok_and(|m| m.is_dir());
    Path::new(if has_run {
        DEFAULT_RUN_DIR
    } else {
        VAR_RUN_DIR
    })
}

/// No record or journal is anywhere near this; a bigger file is not one of ours.
pub const MAX_FILE: u64 = 1 << 20;

/// What exists on one interface because unbloat created it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapedState {
    pub version: u32,
    pub iface: IfName,
    /// The options as the user gave them (flags merged over the config), for `set-rate`, which
    /// re-plans with new rates and everything else as it was. Written as [`ShapeOptions`]'
    /// own JSON (every key, unset ones null); a record whose options are `null` (written for
    /// a stop by versions before this type) reads as no options said.
    #[serde(deserialize_with = "options_or_none")]
    pub options: ShapeOptions,
    /// What unbloat created, as the kernel must hold it (updated by `set-rate`).
    pub plan: Plan,
    pub applied_at_unix: u64,
    /// The one line on fairness that `status` repeats ("per-host fair (...): masquerade on eth0
    /// (nftables)"), as `start` decided it. Optional, so records written before it read as
    /// they are (no version bump: no field changed meaning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<String>,
}

impl ShapedState {
    pub fn new(plan: Plan, options: ShapeOptions) -> ShapedState {
        ShapedState {
            version: STATE_VERSION,
            iface: plan.wan.clone(),
            options,
            plan,
            applied_at_unix: now_unix(),
            fairness: None,
        }
    }

    /// The same record with the fairness line `status` shows.
    pub fn with_fairness(mut self, line: Option<String>) -> ShapedState {
        self.fairness = line;
        self
    }
}

/// `options`: [`ShapeOptions`], or `null` as none said.
fn options_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ShapeOptions, D::Error> {
    Ok(Option::<ShapeOptions>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a file unbloat can read ({reason}); see `unbloat recover --help`")]
    Corrupt { path: PathBuf, reason: String },
    #[error("refusing to use {path} as unbloat's run directory: {reason}")]
    Unsafe { path: PathBuf, reason: String },
}

/// The run directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    pub fn new(path: impl Into<PathBuf>) -> StateDir {
        StateDir { path: path.into() }
    }

    /// `$UNBLOAT_RUN_DIR` if set (tests, unusual systems), else [`default_run_dir`]
    /// (`/run/unbloat`; `/var/run/unbloat` on OpenWrt).
    pub fn from_env() -> StateDir {
        StateDir::new(
            std::env::var_os("UNBLOAT_RUN_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| default_run_dir().into()),
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn records(&self) -> PathBuf {
        self.path.join("shaped")
    }

    fn record(&self, iface: &IfName) -> PathBuf {
        self.records().join(format!("{iface}.json"))
    }

    /// Creates the directory (and `shaped/`) if needed, and checks that it is safe to use.
    pub fn ensure(&self) -> Result<(), StateError> {
        secure_dir(&self.path)?;
        secure_dir(&self.records())
    }

    pub fn load(&self, iface: &IfName) -> Result<Option<ShapedState>, StateError> {
        let path = self.record(iface);
        let Some(text) = read_file(&path)? else {
            return Ok(None);
        };
        let state: ShapedState = serde_json::from_str(&text).map_err(|e| StateError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if state.version != STATE_VERSION || state.iface != *iface {
            let reason = format!(
                "version {} for {} (this unbloat reads version {STATE_VERSION} records named after their interface)",
                state.version, state.iface
            );
            return Err(StateError::Corrupt { path, reason });
        }
        Ok(Some(state))
    }

    pub fn save(&self, state: &ShapedState) -> Result<(), StateError> {
        self.ensure()?;
        let text = serde_json::to_string_pretty(state).expect("a record is plain data") + "\n";
        write_atomic(&self.records(), &format!("{}.json", state.iface), &text)
    }

    /// [`StateDir::save`] without the syncs, for a rate session's many changes a second
    /// ([`crate::apply::RateSession`]): renamed into place, so a crash of the process leaves
    /// the old record or the new one whole.
    pub fn save_unsynced(&self, state: &ShapedState) -> Result<(), StateError> {
        let text = serde_json::to_string_pretty(state).expect("a record is plain data") + "\n";
        write_file(
            &self.records(),
            &format!("{}.json", state.iface),
            &text,
            false,
        )
    }

    pub fn remove(&self, iface: &IfName) -> Result<(), StateError> {
        remove_file(&self.records(), &format!("{iface}.json"))
    }

    /// Every interface with a record, sorted by name (names may start with a dot). A file whose
    /// name is not an interface's is not a record.
    pub fn list(&self) -> Result<Vec<IfName>, StateError> {
        let dir = self.records();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(source) => {
                return Err(StateError::Io {
                    what: "list",
                    path: dir,
                    source,
                })
            }
        };
        let mut names: Vec<IfName> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .and_then(|n| n.parse::<IfName>().ok())
            })
            .collect();
        names.sort();
        Ok(names)
    }
}

/// Makes `dir` (mode 0700) if it is missing; refuses a symlink, a non-directory, or a directory
/// someone else owns. One we own that others may read is tightened only under
/// [`default_run_dir`] (an older unbloat made it so) or in test builds; anywhere else it is
/// refused, so `UNBLOAT_RUN_DIR=/etc` cannot have root make `/etc` mode 0700.
fn secure_dir(dir: &Path) -> Result<(), StateError> {
    secure_dir_as(
        dir,
        crate::knobs::ENABLED || dir.starts_with(default_run_dir()),
    )
}

/// [`secure_dir`] with the choice to tighten as an argument: the product's path is tested in
/// every build.
fn secure_dir_as(dir: &Path, may_tighten: bool) -> Result<(), StateError> {
    let unsafe_dir = |reason: String| StateError::Unsafe {
        path: dir.to_path_buf(),
        reason,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A missing parent (a fresh $UNBLOAT_RUN_DIR/...): make it, then this one.
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(dir)
                .map_err(|source| io("create", dir, source))?;
        }
        Err(source) => return Err(io("create", dir, source)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|source| io("inspect", dir, source))?;
    if meta.file_type().is_symlink() {
        return Err(unsafe_dir("it is a symbolic link".into()));
    }
    if !meta.is_dir() {
        return Err(unsafe_dir("it is not a directory".into()));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(unsafe_dir(format!(
            "it belongs to user {}, not to this user ({me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 && !may_tighten {
        return Err(unsafe_dir(format!(
            "it has mode {:o}; a run directory must be 0700 (chmod 700 it, or name a new one)",
            meta.mode() & 0o7777
        )));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|source| io("restrict the mode of", dir, source))?;
    }
    Ok(())
}

fn io(what: &'static str, path: &Path, source: std::io::Error) -> StateError {
    StateError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Reads a file of the run directory: `None` if it does not exist; never through a symlink;
/// at most [`MAX_FILE`] bytes.
pub(crate) fn read_file(path: &Path) -> Result<Option<String>, StateError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(StateError::Unsafe {
                path: path.to_path_buf(),
                reason: "it is a symbolic link".into(),
            })
        }
        Err(source) => return Err(io("read", path, source)),
    };
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|source| io("read", path, source))?;
    if text.len() as u64 > MAX_FILE {
        return Err(StateError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("larger than {MAX_FILE} bytes"),
        });
    }
    Ok(Some(text))
}

/// Writes `dir/name` so that a crash leaves the old or the new content: a fresh temporary file
/// (`O_EXCL | O_NOFOLLOW`), fsync, rename, fsync of the directory.
pub(crate) fn write_atomic(dir: &Path, name: &str, text: &str) -> Result<(), StateError> {
    write_file(dir, name, text, true)
}

/// `name` in `dir` replaced whole by `text` (written beside it, then renamed over it); with
/// `sync`, the file and then the directory are synced before and after the rename.
fn write_file(dir: &Path, name: &str, text: &str, sync: bool) -> Result<(), StateError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    // A temporary file left by a crash: remove it (unlink does not follow a symlink).
    let _ = std::fs::remove_file(&tmp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|source| io("write", &tmp, source))?;
    let written =
        file.write_all(text.as_bytes())
            .and_then(|()| if sync { file.sync_all() } else { Ok(()) });
    if let Err(source) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", &tmp, source));
    }
    drop(file);
    if let Err(source) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", &path, source));
    }
    if sync {
        sync_dir(dir).map_err(|source| io("sync", dir, source))?;
    }
    Ok(())
}

pub(crate) fn remove_file(dir: &Path, name: &str) -> Result<(), StateError> {
    let path = dir.join(name);
    match std::fs::remove_file(&path) {
        Ok(()) => sync_dir(dir).map_err(|source| io("sync", dir, source)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(io("remove", &path, source)),
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
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
    use unbloat_shaper::spec::Spec;

    fn sample(iface: &str) -> ShapedState {
        let opts = ShapeOptions {
            up: Some("10mbit".parse().unwrap()),
            ..Default::default()
        };
        let plan = Plan::build(&Spec::new(iface.parse().unwrap(), &opts).unwrap());
        ShapedState::new(plan, opts)
    }

    /// Issue 52: OpenWrt has no `/run` (its `/var` links to the RAM disk `/tmp`): the run
    /// directory is `/var/run/unbloat` there, `/run/unbloat` where `/run` is a directory, and a
    /// `run` that is a file does not count.
    #[test]
    fn the_run_directory_is_var_run_where_there_is_no_run() {
        let root = std::env::temp_dir().join(format!("unbloat-root-{}", std::process::id()));
        std::fs::create_dir_all(root.join("tmp/run")).unwrap();
        std::os::unix::fs::symlink("tmp", root.join("var")).unwrap();
        assert_eq!(run_dir_under(&root), Path::new(VAR_RUN_DIR));
        std::fs::write(root.join("run"), "").unwrap();
        assert_eq!(run_dir_under(&root), Path::new(VAR_RUN_DIR));
        std::fs::remove_file(root.join("run")).unwrap();
        std::fs::create_dir(root.join("run")).unwrap();
        assert_eq!(run_dir_under(&root), Path::new(DEFAULT_RUN_DIR));
        std::fs::remove_dir_all(&root).unwrap();
        // This machine has /run.
        assert_eq!(default_run_dir(), Path::new(DEFAULT_RUN_DIR));
    }

    /// A record as version 2 wrote it before its options were a type (`serde_json::Value` of
    /// [`ShapeOptions`]): it still reads, with the same options and plan, and writes back as
    /// the same JSON.
    #[test]
    fn a_record_written_before_the_options_were_typed_still_reads() {
        let text = include_str!("../tests/fixtures/shaped-v2.json");
        let r: ShapedState = serde_json::from_str(text).unwrap();
        assert_eq!(r.iface.as_str(), "eth0");
        assert_eq!(r.options.down, Some("78mbit".parse().unwrap()));
        assert_eq!(r.options.isolation.map(|i| i.name()), Some("dual-host"));
        assert_eq!(r.options.nat, Some(true));
        let spec = Spec::new(r.iface.clone(), &r.options).unwrap();
        assert_eq!(
            r.plan,
            Plan::build(&spec),
            "the options still plan what was recorded"
        );
        let old: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            old,
            "written back as it was"
        );
        // A stop's record of older versions had `"options": null`.
        let mut null = old.clone();
        null["options"] = serde_json::Value::Null;
        let r: ShapedState = serde_json::from_value(null).unwrap();
        assert_eq!(r.options, ShapeOptions::default());
    }

    fn name(s: &str) -> IfName {
        s.parse().unwrap()
    }

    fn names(list: &[&str]) -> Vec<IfName> {
        list.iter().map(|s| name(s)).collect()
    }

    fn temp(tag: &str) -> StateDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        StateDir::new(std::env::temp_dir().join(format!(
            "unbloat-state-{tag}-{}-{nanos}",
            std::process::id()
        )))
    }

    /// Issue 36, item 11: `UNBLOAT_RUN_DIR=/etc` had root make `/etc` mode 0700. The product
    /// refuses a run directory others can read outside /run/unbloat, and leaves its mode alone.
    #[test]
    fn a_product_build_refuses_a_readable_run_directory_and_does_not_chmod_it() {
        let dir = temp("mode");
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(dir.path())
            .unwrap();
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
        let err = secure_dir_as(dir.path(), false).unwrap_err().to_string();
        assert!(
            err.contains("mode 755") && err.contains("chmod 700"),
            "{err}"
        );
        let mode = std::fs::metadata(dir.path()).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o755, "the directory's mode was changed");
        // A test build, or /run/unbloat, tightens it as before.
        secure_dir_as(dir.path(), true).unwrap();
        assert_eq!(
            std::fs::metadata(dir.path()).unwrap().mode() & 0o7777,
            0o700
        );
        // A missing one is made 0700 either way.
        let fresh = dir.path().join("fresh");
        secure_dir_as(&fresh, false).unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().mode() & 0o7777, 0o700);
        std::fs::remove_dir_all(dir.path()).unwrap();
    }

    #[test]
    fn records_round_trip_and_list_and_remove_including_names_with_a_leading_dot() {
        let dir = temp("rt");
        assert_eq!(dir.load(&name("eth0")).unwrap(), None);
        for name in ["eth0", ".hidden0", "eth1"] {
            dir.save(&sample(name)).unwrap();
        }
        assert_eq!(
            dir.load(&name("eth0")).unwrap(),
            Some(sample_at(&dir, "eth0"))
        );
        assert_eq!(dir.list().unwrap(), names(&[".hidden0", "eth0", "eth1"]));
        dir.remove(&name("eth0")).unwrap();
        dir.remove(&name("eth0")).unwrap(); // removing twice is fine: stop is idempotent too
        assert_eq!(dir.list().unwrap(), names(&[".hidden0", "eth1"]));
        let mode = std::fs::metadata(dir.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let _ = std::fs::remove_dir_all(dir.path());
    }

    fn sample_at(dir: &StateDir, iface: &str) -> ShapedState {
        // The saved time is the clock's: compare everything else.
        let mut s = sample(iface);
        s.applied_at_unix = dir.load(&name(iface)).unwrap().unwrap().applied_at_unix;
        s
    }

    #[test]
    fn a_corrupt_record_is_an_error_that_names_the_file() {
        let dir = temp("bad");
        dir.ensure().unwrap();
        std::fs::write(dir.records().join("eth9.json"), "{not json").unwrap();
        let err = dir.load(&name("eth9")).unwrap_err().to_string();
        assert!(err.contains("eth9.json"), "{err}");
        let _ = std::fs::remove_dir_all(dir.path());
    }

    #[test]
    fn a_record_that_is_a_symlink_is_not_followed() {
        let dir = temp("link");
        dir.ensure().unwrap();
        let target = dir.path().join("elsewhere.json");
        std::fs::write(&target, "{}").unwrap();
        std::os::unix::fs::symlink(&target, dir.records().join("eth0.json")).unwrap();
        let err = dir.load(&name("eth0")).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        // Saving replaces the link itself (rename), never writes through it.
        dir.save(&sample("eth0")).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");
        let _ = std::fs::remove_dir_all(dir.path());
    }

    #[test]
    fn a_run_directory_that_is_a_symlink_is_refused() {
        let real = temp("real");
        real.ensure().unwrap();
        let link = temp("linkdir");
        std::os::unix::fs::symlink(real.path(), link.path()).unwrap();
        let err = link.ensure().unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let _ = std::fs::remove_file(link.path());
        let _ = std::fs::remove_dir_all(real.path());
    }

    #[test]
    fn a_huge_record_is_refused_without_reading_it_whole() {
        let dir = temp("huge");
        dir.ensure().unwrap();
        let f = File::create(dir.records().join("eth0.json")).unwrap();
        f.set_len(MAX_FILE * 4).unwrap();
        let err = dir.load(&name("eth0")).unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
        let _ = std::fs::remove_dir_all(dir.path());
    }
}
