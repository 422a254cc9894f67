//! The configuration file: one TOML table per interface, keys spelled like the flags.
//!
//! ```toml
//! [defaults]              # optional, merged under every interface
//! qdisc = "cake"
//!
//! [interface.eth0]
//! down = "78mbit"
//! up = "19950kbit"
//! link = "vdsl2"
//! isolation = "dual-host"
//! nat = true
//! ```
//!
//! Callers can rely on: every error names the file, the line and column, and the key (an
//! unknown key, a bad value, an interface named twice, an interface name the kernel would refuse,
//! or options [`Spec::new`] refuses); an interface's options are its table merged over
//! `[defaults]`, and the command line is merged over that by the caller
//! ([`ShapeOptions::merge`]). The example shipped in `examples/unbloat.toml` documents every key
//! and is loaded by a test.

use crate::options::ShapeOptions;
use crate::spec::{parse_iface, Spec, SpecError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use unbloat_units::IfName;

/// The file's shape; unknown top-level tables are errors too.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: Option<ShapeOptions>,
    #[serde(default)]
    interface: BTreeMap<toml::Spanned<String>, ShapeOptions>,
}

/// A loaded and syntax-checked configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub defaults: ShapeOptions,
    /// In the order of the file (by line).
    pub interfaces: Vec<InterfaceConfig>,
}

/// One `[interface.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    pub name: IfName,
    /// Where the table's name is, for messages.
    pub at: Position,
    /// The table merged over `[defaults]`.
    pub options: ShapeOptions,
}

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Why a configuration file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{at}: {key_note}{message}")]
    Syntax {
        path: PathBuf,
        at: Position,
        /// The key at that place, if one could be found.
        key: Option<String>,
        key_note: String,
        message: String,
    },
    #[error("{path}:{at}: [interface.{name}]: {source}")]
    Interface {
        path: PathBuf,
        at: Position,
        name: String,
        source: Box<SpecError>,
    },
}

impl ConfigFile {
    /// Read and parse `path`.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        ConfigFile::parse(&text, path)
    }

    /// Parse `text`; `path` is only used in messages and kept in the result.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map(|s| s.start).unwrap_or(0);
            let at = position(text, offset);
            let key = key_at(text, offset);
            // toml's messages may span lines ("invalid table header\nduplicate key ..."): one line.
            let mut message = e.message().trim().replace('\n', ": ");
            if message.contains("duplicate key") && message.contains("`interface`") {
                message.push_str(" (each interface may have one table only)");
            }
            // toml names unknown keys itself ("unknown field `x`"); name the key otherwise.
            let key_note = match &key {
                Some(k) if !message.contains(&format!("`{k}`")) => format!("key `{k}`: "),
                _ => String::new(),
            };
            ConfigError::Syntax {
                path: path.to_path_buf(),
                at,
                key,
                key_note,
                message,
            }
        })?;
        let defaults = raw.defaults.unwrap_or_default();
        let mut interfaces = Vec::new();
        for (name, table) in raw.interface {
            let at = position(text, name.span().start);
            let iface = parse_iface(name.get_ref()).map_err(|source| ConfigError::Interface {
                path: path.to_path_buf(),
                at,
                name: name.get_ref().clone(),
                source: Box::new(source),
            })?;
            interfaces.push(InterfaceConfig {
                name: iface,
                at,
                options: ShapeOptions::merge(&defaults, &table),
            });
        }
        interfaces.sort_by_key(|i| i.at.line);
        Ok(ConfigFile {
            path: path.to_path_buf(),
            defaults,
            interfaces,
        })
    }

    /// The configuration of one interface, if the file has it.
    pub fn interface(&self, name: &IfName) -> Option<&InterfaceConfig> {
        self.interfaces.iter().find(|i| &i.name == name)
    }

    /// Validate every interface as `unbloat config check` does, with `flags` merged over each
    /// (pass `ShapeOptions::default()` for none). The first refusal names file, line and table.
    pub fn specs(&self, flags: &ShapeOptions) -> Result<Vec<Spec>, ConfigError> {
        self.interfaces
            .iter()
            .map(|i| {
                Spec::new(i.name.clone(), &ShapeOptions::merge(&i.options, flags)).map_err(
                    |source| ConfigError::Interface {
                        path: self.path.clone(),
                        at: i.at,
                        name: i.name.to_string(),
                        source: Box::new(source),
                    },
                )
            })
            .collect()
    }
}

/// The 1-based line and column (in characters) of a byte offset.
fn position(text: &str, offset: usize) -> Position {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let column = text
        .get(line_start..offset)
        .map(|s| s.chars().count())
        .unwrap_or(0)
        + 1;
    Position { line, column }
}

/// The key of a `key = value` line containing `offset`, if that is what the line is.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text.get(..offset)?.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = text.get(start..)?.lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches('"');
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    plain.then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use unbloat_units::Rate;

    fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        ConfigFile::parse(text, Path::new("/etc/unbloat/unbloat.toml"))
    }

    #[test]
    fn tables_merge_over_defaults() {
        let c = parse("[defaults]\nnat = true\nup = \"10mbit\"\n\n[interface.eth0]\ndown = \"78mbit\"\n\n[interface.\"eth0.2\"]\nup = \"5mbit\"\nnat = false\n").unwrap();
        assert_eq!(c.interfaces.len(), 2);
        let e = &c.interfaces[0];
        assert_eq!(e.name.as_str(), "eth0");
        assert_eq!(e.at.line, 5);
        assert_eq!(e.options.down, Some(Rate::from_mbit(78)));
        assert_eq!(e.options.up, Some(Rate::from_mbit(10)));
        assert_eq!(e.options.nat, Some(true));
        assert_eq!(c.interfaces[1].options.nat, Some(false));
        assert_eq!(c.specs(&ShapeOptions::default()).unwrap().len(), 2);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = parse("[interface.eth0]\ndown = \"78mbit\"\necn = true\n").unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with("/etc/unbloat/unbloat.toml:3:1: "), "{m}");
        assert!(m.contains("unknown field `ecn`"), "{m}");
    }

    #[test]
    fn bad_value_names_line_key_and_value() {
        let e = parse("[interface.eth0]\n\ndown = \"78mbits\"\n").unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("/etc/unbloat/unbloat.toml:3:8: key `down`: "),
            "{m}"
        );
        assert!(m.contains("\"78mbits\""), "{m}");
        let e = parse("[interface.eth0]\noverhead = \"big\"\n").unwrap_err();
        assert!(e.to_string().contains(":2:"), "{e}");
    }

    #[test]
    fn the_same_interface_twice_is_an_error() {
        for text in [
            "[interface.eth0]\ndown = \"1mbit\"\n\n[interface.eth0]\nup = \"1mbit\"\n",
            "[interface.eth0]\ndown = \"1mbit\"\n\n[interface.\"eth0\"]\nup = \"1mbit\"\n",
            "interface.eth0.down = \"1mbit\"\n[interface.eth0]\nup = \"1mbit\"\n",
        ] {
            let m = parse(text).unwrap_err().to_string();
            assert!(m.starts_with("/etc/unbloat/unbloat.toml:"), "{m}");
            assert!(m.contains("eth0") || m.contains("duplicate"), "{m}");
            assert!(
                m.contains("duplicate") || m.contains("redefin") || m.contains("already"),
                "{m}"
            );
        }
    }

    #[test]
    fn bad_interface_names_and_specs_name_the_table() {
        let m = parse("[interface.averyveryverylongname]\ndown = \"1mbit\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            m.starts_with(
                "/etc/unbloat/unbloat.toml:1:12: [interface.averyveryverylongname]: interface"
            ),
            "{m}"
        );
        assert!(m.contains("longer than 15 bytes"), "{m}");
        let c = parse("[interface.eth1]\ndown = \"10mbit\"\noverhead = 300\n").unwrap();
        let m = c.specs(&ShapeOptions::default()).unwrap_err().to_string();
        assert_eq!(m, "/etc/unbloat/unbloat.toml:1:12: [interface.eth1]: --overhead 300: out of range -64..256 (cake's limit)");
    }

    #[test]
    fn unknown_table_is_an_error() {
        let m = parse("[interfaces.eth0]\ndown = \"1mbit\"\n")
            .unwrap_err()
            .to_string();
        assert!(m.contains("unknown field `interfaces`"), "{m}");
    }

    #[test]
    fn the_shipped_example_loads_and_validates() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/unbloat.toml");
        let c = ConfigFile::load(&path).unwrap();
        assert!(c.interfaces.len() >= 2);
        let specs = c.specs(&ShapeOptions::default()).unwrap();
        assert_eq!(specs.len(), c.interfaces.len());
    }
}
