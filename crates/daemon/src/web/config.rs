//! The config on the page: shown as a form per interface, changed only through the validator
//! the CLI and the daemon use, then applied by the daemon's own reload.
//!
//! A change is either a form's values for one `[interface.NAME]` table (edited in place by
//! [`splice`](unbloat_shaper::tomlsplice), so the file keeps its comments, order and every key the form did not touch) or a
//! whole new text from the page's TOML editor. Either way, in this order:
//!
//! 1. the new text is checked with [`ConfigFile::parse`] and [`planned::of_config`], exactly as
//!    `unbloat config check` and the daemon's reload do; an error is mapped to the interface and
//!    key it is about ([`FieldError`]) and NOTHING is written;
//! 2. the file is replaced atomically (a temporary file in the same directory, with the file's
//!    mode, renamed over it: a reader sees the old file or the new one, never half of one);
//! 3. the daemon reloads through its keeper, the one thread that changes the kernel;
//! 4. if the reload is refused (the kernel refused the change), the old text is put back, so
//!    the file keeps saying what the kernel holds.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use unbloat_shaper::config::{ConfigError, ConfigFile, MAX_CONFIG_BYTES};
use unbloat_system::planned::{self, PlanError, Planned};
use unbloat_system::runner::SystemRunner;

pub use super::fields::{fields, Field, Kind};
use crate::keeper::Reloaded;
use unbloat_shaper::tomlsplice::{self as splice, Unsupported};

/// An error placed where the page shows it: beside the key of an interface's card, on the card,
/// or (neither known) above the form; `line` for the TOML editor.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FieldError {
    pub iface: Option<String>,
    pub key: Option<String>,
    pub line: Option<usize>,
    pub message: String,
}

impl FieldError {
    fn general(message: impl Into<String>) -> FieldError {
        FieldError {
            iface: None,
            key: None,
            line: None,
            message: message.into(),
        }
    }
}

/// What `GET /api/config` answers.
#[derive(Debug, Clone, Serialize)]
pub struct View {
    pub path: String,
    pub text: String,
    pub fields: Vec<Field>,
    /// Each `[interface.NAME]` table's keys as written (strings without their quotes).
    pub interfaces: Vec<TableView>,
    pub defaults: BTreeMap<String, String>,
    /// Why the file on disk cannot be used as it is (the form is then read-only).
    pub error: Option<FieldError>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TableView {
    pub name: String,
    pub values: BTreeMap<String, String>,
}

/// What the page sends: the TOML editor's `text`, or one interface's form `values` (a key with
/// an empty value is removed from the table). `check`: validate only.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub text: Option<String>,
    pub interface: Option<String>,
    #[serde(default)]
    pub values: BTreeMap<String, String>,
    #[serde(default)]
    pub check: bool,
}

/// One interface's plan, as `unbloat plan` summarises it.
#[derive(Debug, Clone, Serialize)]
pub struct PlanView {
    pub iface: String,
    pub summary: Vec<String>,
    pub fairness: String,
}

/// The answer to a change.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    pub ok: bool,
    /// The file was written and the daemon reloaded it.
    pub applied: bool,
    pub errors: Vec<FieldError>,
    pub plans: Vec<PlanView>,
    pub reloaded: Option<Reloaded>,
    /// The daemon's reason for refusing the reload.
    pub refused: Option<String>,
    /// The old text was put back after a refused reload.
    pub restored: bool,
}

/// Reads the file as the daemon would (at most [`MAX_CONFIG_BYTES`], UTF-8).
pub fn read(path: &Path) -> Result<String, String> {
    let mut bytes = vec![];
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!("{}: larger than 1 MiB", path.display()));
    }
    String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))
}

/// The page's view of the file at `path`.
pub fn view(path: &Path) -> View {
    let mut v = View {
        path: path.display().to_string(),
        text: String::new(),
        fields: fields(),
        interfaces: vec![],
        defaults: BTreeMap::new(),
        error: None,
    };
    match read(path) {
        Ok(text) => v.text = text,
        Err(e) => {
            v.error = Some(FieldError::general(e));
            return v;
        }
    }
    // OpenWrt's UCI is read as the config, but the form edits TOML's text: say how to change it.
    if unbloat_shaper::uci::is_uci(&v.text) {
        v.error = Some(FieldError::general(format!(
            "{} is OpenWrt's UCI: change it with uci (uci set unbloat.wan.down=70mbit; uci \
             commit unbloat; reload_config) or LuCI; the form here edits TOML files only",
            v.path
        )));
        return v;
    }
    match splice::parse(&v.text) {
        Ok(doc) => {
            if let Some(toml::de::DeValue::Table(t)) = doc.get("defaults").map(|d| d.get_ref()) {
                v.defaults = splice::values(&v.text, t);
            }
            for (name, t) in splice::tables(&doc, "interface") {
                let values = splice::values(&v.text, t);
                v.interfaces.push(TableView { name, values });
            }
        }
        Err(e) => v.error = Some(FieldError::general(format!("not TOML: {e}"))),
    }
    if v.error.is_none() {
        if let Err(e) = ConfigFile::parse(&v.text, path) {
            v.error = Some(field_error(&v.text, &PlanError::from(e)));
        }
    }
    v
}

/// The TOML text to write for `text` typed into `key`'s field.
fn typed(key: &str, text: &str) -> String {
    match (super::fields::kind(key), text) {
        (Kind::Bool | Kind::Choice, "true" | "false") => text.to_string(),
        (Kind::Int, t) => t
            .parse::<i64>()
            .map_or_else(|_| splice::string(t), |i| i.to_string()),
        // Anything else as a string: a wrong type is the validator's to name, in its words.
        (_, t) => splice::string(t),
    }
}

/// `current` with the form's `values` written into `[interface.NAME]` (created if missing).
/// Keys whose text is unchanged are left as they are, comment and all; a key with an empty
/// value is removed.
pub fn edit(
    current: &str,
    iface: &str,
    values: &BTreeMap<String, String>,
) -> Result<String, FieldError> {
    let doc = splice::parse(current).map_err(|e| {
        FieldError::general(format!(
            "the file is not TOML ({e}); fix it in the TOML editor"
        ))
    })?;
    let old = splice::tables(&doc, "interface")
        .into_iter()
        .find(|(name, _)| name == iface)
        .map(|(_, t)| splice::values(current, t))
        .unwrap_or_default();
    // New keys go in the form's order (the example config's), not alphabetically.
    let mut ordered: Vec<(&String, &String)> = values.iter().collect();
    let order = fields();
    ordered.sort_by_key(|(k, _)| {
        order
            .iter()
            .position(|f| f.key == k.as_str())
            .unwrap_or(usize::MAX)
    });
    let mut changes = vec![];
    for (key, text) in ordered {
        let text = text.trim();
        let was = old.get(key.as_str()).map(String::as_str);
        if was == Some(text) || (was.is_none() && text.is_empty()) {
            continue;
        }
        let new = (!text.is_empty()).then(|| typed(key, text));
        changes.push((key.as_str(), new));
    }
    splice::set(current, &doc, "interface", iface, &changes).map_err(|Unsupported| {
        FieldError::general(
            "the file writes its interfaces in a form the page cannot edit; use the TOML editor",
        )
    })
}

/// Checks `text` as the file at `path` with the daemon's own validator.
pub fn validate(text: &str, path: &Path) -> Result<Vec<Planned>, FieldError> {
    let runner = SystemRunner::from_env();
    let result = ConfigFile::parse(text, path)
        .map_err(PlanError::from)
        .and_then(|file| planned::of_config(&runner, &file));
    result.map_err(|e| field_error(text, &e))
}

/// Where the page shows `e`.
pub fn field_error(text: &str, e: &PlanError) -> FieldError {
    match e {
        PlanError::Config(c) => match c.as_ref() {
            ConfigError::Syntax {
                at, key, message, ..
            } => FieldError {
                iface: interface_at(text, at.line),
                key: key.clone(),
                line: Some(at.line),
                message: message.clone(),
            },
            ConfigError::Interface {
                at, name, source, ..
            } => FieldError {
                iface: Some(name.clone()),
                key: source.key().map(str::to_string),
                line: Some(at.line),
                message: source.to_string(),
            },
            other => FieldError::general(other.to_string()),
        },
        PlanError::System { iface, source, .. } => FieldError {
            iface: Some(iface.clone()),
            key: source.key().map(str::to_string),
            line: None,
            message: source.to_string(),
        },
    }
}

/// The interface whose `[interface.NAME]` table holds line `line` (1-based) of `text`.
fn interface_at(text: &str, line: usize) -> Option<String> {
    let mut current = None;
    for l in text.lines().take(line) {
        let l = l.trim();
        if !l.starts_with('[') || l.starts_with("[[") {
            continue;
        }
        let inner = l.trim_start_matches('[').split(']').next().unwrap_or("");
        current = inner
            .trim()
            .strip_prefix("interface.")
            .map(|n| n.trim().trim_matches(|c| c == '"' || c == '\'').to_string());
    }
    current
}

/// Replaces the file at `path` (the file a symbolic link names, not the link) with `text`:
/// written to a temporary file beside it with the old file's mode and owner, flushed, renamed.
pub fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let old = std::fs::metadata(&path).ok();
    let mode = old.as_ref().map_or(0o644, |m| m.mode() & 0o7777);
    let tmp = dir.join(format!(".{name}.web-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let write = || -> io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask may have narrowed the mode; the file keeps the old one.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        if let Some(m) = &old {
            std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()))?;
        }
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        // The rename itself reaches the disk with the directory.
        std::fs::File::open(&dir)?.sync_all()
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Plans as the page lists them.
pub fn plan_views(plans: &[Planned]) -> Vec<PlanView> {
    plans
        .iter()
        .map(|p| PlanView {
            iface: p.plan.wan.to_string(),
            summary: p.plan.summary(),
            fairness: p.fairness.clone(),
        })
        .collect()
}

/// Carries out `change` on the file at `path` (blocking: it validates, writes and waits for the
/// daemon's reload through `reload`): the HTTP status and what the page shows.
pub fn apply(
    path: &Path,
    change: &Change,
    reload: &dyn Fn() -> Option<crate::control::Answer>,
) -> (u16, Outcome) {
    use crate::control::Answer;
    let fail = |status, errors| {
        (
            status,
            Outcome {
                errors,
                ..Outcome::default()
            },
        )
    };
    let old = match read(path) {
        Ok(t) => t,
        Err(e) => return fail(500, vec![FieldError::general(e)]),
    };
    let new = match (&change.text, &change.interface) {
        (Some(text), None) => text.clone(),
        (None, Some(iface)) => match edit(&old, iface, &change.values) {
            Ok(t) => t,
            Err(e) => return fail(422, vec![e]),
        },
        _ => {
            return fail(
                400,
                vec![FieldError::general(
                    "send either the whole `text` or an `interface` with its `values`",
                )],
            )
        }
    };
    let plans = match validate(&new, path) {
        Ok(p) => plan_views(&p),
        Err(e) => return fail(422, vec![e]),
    };
    let mut out = Outcome {
        ok: true,
        plans,
        ..Outcome::default()
    };
    if change.check {
        return (200, out);
    }
    if new != old {
        if let Err(e) = write_atomic(path, &new) {
            let msg = format!("cannot write {}: {e}; nothing changed", path.display());
            return fail(500, vec![FieldError::general(msg)]);
        }
    }
    let (status, refused) = match reload() {
        Some(Answer::Reloaded(r)) => {
            out.applied = true;
            out.reloaded = Some(r);
            return (200, out);
        }
        Some(Answer::Refused(r)) => (409, r.reason),
        Some(Answer::Status(_)) => (500, "the daemon answered something else".to_string()),
        None => (503, "the daemon is ending; nothing was applied".to_string()),
    };
    out.ok = false;
    if new != old {
        match write_atomic(path, &old) {
            Ok(()) => out.restored = true,
            Err(e) => out.errors.push(FieldError::general(format!(
                "the old file could not be put back ({e}); {} holds the refused text",
                path.display()
            ))),
        }
    }
    out.refused = Some(refused);
    (status, out)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
