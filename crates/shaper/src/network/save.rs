//! `unbloat tune --save-as NAME`: what a tune run found, written into the config file as a
//! `[network.NAME]` table recognised by the gateway the machine is behind. Pure: the text of
//! the file and the gateway's MAC in, the new text out; the caller reads the file (without
//! following a link), reads the gateway as the daemon does, and replaces the file atomically.
//!
//! What callers can rely on: [`save`] returns text that [`ConfigFile::parse`] accepts and in
//! which the interface's gateway is recognised as `NAME`, or an error and no text. The file's
//! other tables, its comments and its order stay byte for byte ([`crate::tomlsplice`]). A table
//! `NAME` that is there already is re-tuned in place: its rates and link keys are the run's,
//! its own other keys stay, and the gateway joins its list if it is not on it.

use std::fmt;
use std::path::Path;

use unbloat_units::IfName;

use super::{recognise, Mac, Sighting};
use crate::clip::clip;
use crate::config::{ConfigError, ConfigFile};
use crate::options::value::toml_string;
use crate::options::{ShapeOptions, OPTIONS};
use crate::tomlsplice::{self, Unsupported};

/// The keys a tune run decides: the rates, and the link options it searched them under. A key
/// of these that the run left unset is taken out of a re-tuned table (an old `link = "adsl"`
/// must not stand beside a new `framing`); a table's other keys are the user's.
pub const TUNED_KEYS: &[&str] = &["down", "up", "link", "overhead", "mpu", "framing"];

/// The longest network name: it is a TOML key, a label of the metric
/// `unbloat_daemon_network_info` and a word in `unbloat status`.
pub const MAX_NAME: usize = 32;

/// Why the file was not changed.
#[derive(Debug)]
pub enum SaveError {
    /// The name is not one `[network.NAME]` can carry as written.
    Name(String),
    /// The file does not read as a config now; nothing is added to a broken file.
    Broken(Box<ConfigError>),
    /// The file has no table for the interface the run tuned.
    NoInterface { path: String, iface: IfName },
    /// Another network for this interface is recognised by this gateway already.
    Taken { other: String, gateway: Mac },
    /// A network of this name is for another interface.
    OtherInterface { name: String, iface: IfName },
    /// The run found no rate either way: nothing to save.
    NoRates,
    /// The file writes `[network]` in a form that cannot be edited in place.
    Unsupported { name: String },
    /// The result did not read back as asked (a bug): the file stays as it was.
    Refused(String),
}

impl fmt::Display for SaveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SaveError::Name(n) => write!(
                f,
                "--save-as {:?}: a network's name is 1 to {MAX_NAME} letters, digits, `-` or `_` (home, office-5g)",
                clip(n)
            ),
            SaveError::Broken(e) => write!(
                f,
                "{e}; the file must read as a config before a network is added to it (`unbloat config check`)"
            ),
            SaveError::NoInterface { path, iface } => write!(
                f,
                "{path} has no [interface.{iface}] table: a network's keys are merged over its \
                 interface's, which is also what an unknown network gets. Add one (for example \
                 [interface.{iface}] with unknown_network = \"none\", or the table tune wrote in \
                 its DIR/unbloat.toml) and save again"
            ),
            SaveError::Taken { other, gateway } => write!(
                f,
                "the gateway {gateway} is [network.{}]'s already; re-tune it with --save-as {}, or remove it from that table first",
                clip(other),
                clip(other)
            ),
            SaveError::OtherInterface { name, iface } => write!(
                f,
                "[network.{}] is for {iface}; name this interface's network otherwise",
                clip(name)
            ),
            SaveError::NoRates => write!(
                f,
                "the run found no rate either way; nothing to save as a network"
            ),
            SaveError::Unsupported { name } => write!(
                f,
                "the file writes its networks in a form that cannot be edited in place (an inline \
                 table or dotted keys); add [network.{}] by hand",
                clip(name)
            ),
            SaveError::Refused(m) => write!(f, "the edited file does not read back ({m}); it was not written"),
        }
    }
}

impl std::error::Error for SaveError {}

/// A name `[network.NAME]` carries as a bare key, short enough for a metric's label.
pub fn check_name(name: &str) -> Result<(), SaveError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(ok) {
        return Err(SaveError::Name(name.to_string()));
    }
    Ok(())
}

/// What [`save`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub text: String,
    /// A table of this name was there and was re-tuned (else one was added at the end).
    pub retuned: bool,
}

/// Checks that a run on `iface` could be saved as `name` into the file `text` (read from
/// `path`): everything [`save`] checks but the rates and the gateway, before minutes of load.
pub fn precheck(text: &str, path: &Path, name: &str, iface: &IfName) -> Result<(), SaveError> {
    check_name(name)?;
    let file = ConfigFile::parse(text, path).map_err(|e| SaveError::Broken(Box::new(e)))?;
    if !file.interfaces.iter().any(|i| i.name == *iface) {
        return Err(SaveError::NoInterface {
            path: path.display().to_string(),
            iface: iface.clone(),
        });
    }
    if let Some(n) = file.networks.tables.iter().find(|n| n.name == name) {
        if let Some(other) = n.interface.as_ref().filter(|i| *i != iface) {
            return Err(SaveError::OtherInterface {
                name: name.to_string(),
                iface: other.clone(),
            });
        }
    }
    Ok(())
}

/// The file (read as a config) if no network of `iface` but `name` is recognised by `gateway`:
/// two would make recognition ambiguous, and the file refuses that.
pub fn unclaimed(
    text: &str,
    path: &Path,
    name: &str,
    iface: &IfName,
    gateway: Mac,
) -> Result<ConfigFile, SaveError> {
    let file = ConfigFile::parse(text, path).map_err(|e| SaveError::Broken(Box::new(e)))?;
    if let Some(other) = file
        .networks
        .for_iface(iface)
        .find(|n| n.name != name && n.gateways.contains(&gateway))
    {
        return Err(SaveError::Taken {
            other: other.name.clone(),
            gateway,
        });
    }
    Ok(file)
}

/// `text` (the config file at `path`) with `[network.NAME]` holding `options`' tuned keys, for
/// `iface`, recognised by `gateway`; `note` (one line or more) goes above a new table as
/// comments.
pub fn save(
    text: &str,
    path: &Path,
    name: &str,
    iface: &IfName,
    gateway: Mac,
    options: &ShapeOptions,
    note: &str,
) -> Result<Saved, SaveError> {
    precheck(text, path, name, iface)?;
    if options.down.is_none() && options.up.is_none() {
        return Err(SaveError::NoRates);
    }
    let file = unclaimed(text, path, name, iface, gateway)?;
    let existing = file.networks.tables.iter().find(|n| n.name == name);
    let mut gateways: Vec<Mac> = existing.map(|n| n.gateways.clone()).unwrap_or_default();
    if !gateways.contains(&gateway) {
        gateways.push(gateway);
    }
    let gateway_text = match gateways.as_slice() {
        [one] => toml_string(&one.to_string()),
        all => format!(
            "[{}]",
            all.iter()
                .map(|m| toml_string(&m.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut changes: Vec<(&str, Option<String>)> = vec![
        ("gateway", Some(gateway_text)),
        ("interface", Some(toml_string(iface.as_str()))),
    ];
    for opt in OPTIONS.iter().filter(|o| TUNED_KEYS.contains(&o.key)) {
        match opt.field.toml(options) {
            Some(v) => changes.push((opt.key, Some(v))),
            // A direction the run found no rate for keeps what the table said.
            None if opt.key == "down" || opt.key == "up" => {}
            None => changes.push((opt.key, None)),
        }
    }
    let root = tomlsplice::parse(text).map_err(SaveError::Refused)?;
    let mut new =
        tomlsplice::set(text, &root, "network", name, &changes).map_err(|Unsupported| {
            SaveError::Unsupported {
                name: name.to_string(),
            }
        })?;
    if existing.is_none() && !note.is_empty() {
        let header = format!("[network.{name}]\n");
        if let Some(at) = new.rfind(&header) {
            let comment: String = note.lines().map(|l| format!("# {l}\n")).collect();
            new.insert_str(at, &comment);
        }
    }
    // Read back as the daemon will: the file must load, and the gateway must name this network.
    let back = ConfigFile::parse(&new, path).map_err(|e| SaveError::Refused(e.to_string()))?;
    let seen = Sighting {
        gateway: Some(gateway),
        ..Sighting::default()
    };
    let found = recognise(&back.networks, iface, &seen).map(|(n, _)| n.name.as_str());
    if found != Some(name) {
        return Err(SaveError::Refused(format!(
            "{iface} behind {gateway} is recognised as {found:?}, not {name}"
        )));
    }
    Ok(Saved {
        text: new,
        retuned: existing.is_some(),
    })
}

#[cfg(test)]
#[path = "save_tests.rs"]
mod tests;
