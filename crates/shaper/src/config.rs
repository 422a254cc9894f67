//! The configuration file: one TOML table per interface, keys spelled like the flags; or the same
//! in OpenWrt's UCI (`/etc/config/unbloat`, read by [`uci`]), told apart by its first word.
//!
//! ```toml
//! [defaults]              # optional, merged under every interface
//! qdisc = "cake"
//!
//! [interface.eth0]
//! down = "78mbit"         # a rate needs its unit: 20000 or "20mbps" is refused, not guessed
//! up = "19950kbit"
//! link = "vdsl2"
//! isolation = "dual-host"
//! nat = true
//! ```
//!
//! Callers can rely on: every error names the file, the line and column, and the key (an
//! unknown key, a bad value, an interface named twice, an interface name the kernel would refuse,
//! or options [`Spec::new`] refuses), repeating at most [`MAX_ECHO`](crate::clip::MAX_ECHO)
//! characters of anything the file says; an interface's options are its table merged over
//! `[defaults]`, and the command line is merged over that by the caller
//! ([`ShapeOptions::merge`]). The example shipped in `examples/unbloat.toml` documents every key
//! and is loaded by a test.
//!
//! Bounds: a file larger than [`MAX_CONFIG_BYTES`] is refused after reading one byte more than
//! that, never read whole (`--config /dev/zero` fails at once); parsing is linear in the file's
//! size (line and column come from one index of line starts, not a scan per table); and a file
//! with no `[interface.NAME]` table is refused by [`ConfigFile::specs`]: it shapes nothing.

mod uci;

use crate::autorate_config::{pinned, AutorateConfig, AutorateTable};
use crate::clip::{clip, clip_quoted};
use crate::options::ShapeOptions;
use crate::spec::{parse_iface, Spec, SpecError};
use crate::tomlread::{self, line_start, TomlError};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use toml::de::DeValue;
use toml::Spanned;
use unbloat_units::IfName;

/// The largest configuration file unbloat reads: 1 MiB. One interface takes a few hundred bytes
/// even with every key commented, so this is thousands of interfaces; anything larger is not a
/// configuration file (a log, an image, `/dev/zero`).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A loaded and syntax-checked configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub defaults: ShapeOptions,
    /// In the order of the file (by line).
    pub interfaces: Vec<InterfaceConfig>,
    /// The `[network.NAME]` tables and each interface's `unknown_network`.
    #[cfg(feature = "networks")]
    pub networks: crate::network::Networks,
}

/// One `[interface.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    pub name: IfName,
    /// Where the table's name is, for messages.
    pub at: Position,
    /// How messages name it: `[interface.eth0]`, or UCI's `interface 'wan'`.
    pub label: String,
    /// The table merged over `[defaults]` (with cake's ingress mode pinned under autorate:
    /// [`pinned`]).
    pub options: ShapeOptions,
    /// Its `[autorate.NAME]` table, checked: the daemon moves its rates.
    pub autorate: Option<AutorateConfig>,
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
    #[error("{path}: larger than {limit} bytes (1 MiB), the most a config file may be; is it the right file?")]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{path}: not UTF-8 text (at byte {at}); a config file is TOML")]
    NotText { path: PathBuf, at: usize },
    #[error(
        "{path}: nothing to shape: no [interface.NAME] table ([defaults] alone shapes nothing); \
         add one per interface, e.g. a line [interface.eth0] followed by down = \"78mbit\" and \
         up = \"19950kbit\""
    )]
    NothingToShape { path: PathBuf },
    #[error("{path}:{at}: {key_note}{message}")]
    Syntax {
        path: PathBuf,
        at: Position,
        /// The key at that place, if one could be found.
        key: Option<String>,
        key_note: String,
        message: String,
    },
    #[error("{path}:{at}: [autorate.{name}]: {message}")]
    Autorate {
        path: PathBuf,
        at: Position,
        name: String,
        message: String,
    },
    /// A `[network.NAME]` table, or an interface's `unknown_network`.
    #[cfg(feature = "networks")]
    #[error("{path}:{at}: {table}: {message}")]
    Network {
        path: PathBuf,
        at: Position,
        table: String,
        message: String,
    },
    #[error("{path}:{at}: {label}: {source}")]
    Interface {
        path: PathBuf,
        at: Position,
        name: String,
        /// `[interface.eth0]`, or UCI's `interface 'wan'`.
        label: String,
        source: Box<SpecError>,
    },
    /// In `/etc/config/unbloat`: the line, the section and option (`interface 'wan', option
    /// down '20000'`), and what is wrong.
    #[error("{path}:{line}: {}{message}", if .at.is_empty() { String::new() } else { format!("{}: ", .at) })]
    Uci {
        path: PathBuf,
        line: usize,
        at: String,
        message: String,
    },
}

impl ConfigFile {
    /// Read and parse `path`: at most [`MAX_CONFIG_BYTES`] + 1 bytes are read, and a file with
    /// more is refused.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let io = |source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .map_err(io)?
            .take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge {
                path: path.to_path_buf(),
                limit: MAX_CONFIG_BYTES,
            });
        }
        let text = String::from_utf8(bytes).map_err(|e| ConfigError::NotText {
            path: path.to_path_buf(),
            at: e.utf8_error().valid_up_to(),
        })?;
        ConfigFile::parse(&text, path)
    }

    /// Parse `text`, TOML or UCI; `path` is only used in messages and kept in the result.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
        if crate::uci::is_uci(text) {
            return uci::read(text, path);
        }
        let lines = LineIndex::new(text);
        let syntax = |e: TomlError| {
            let at = lines.position(text, e.offset);
            let key = e
                .key
                .or_else(|| key_at(text, e.offset))
                .map(|k| clip(&k).into_owned());
            // toml's messages may span lines: one line, and what it quotes from the file cut to
            // a length a message can repeat.
            let mut message = clip_quoted(&e.message.trim().replace('\n', ": "));
            // toml says "duplicate key" at a header that repeats a table: say which table.
            let line = text[line_start(text, e.offset)..]
                .lines()
                .next()
                .unwrap_or("");
            if message == "duplicate key" && line.trim_start().starts_with('[') {
                message = format!("duplicate table {}", clip(line.trim()));
            }
            if message.starts_with("duplicate") && line.contains("interface") {
                message.push_str(" (each interface may have one table only)");
            }
            // serde names unknown keys itself ("unknown field `x`"); name the key otherwise.
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
        };
        let root = tomlread::parse(text).map_err(syntax)?;
        let mut defaults = ShapeOptions::default();
        let mut tables = vec![];
        let mut autorates = vec![];
        #[cfg(feature = "networks")]
        let (mut raw_networks, mut unknowns) = (vec![], vec![]);
        #[cfg(feature = "networks")]
        let refused = |r: crate::network::read::Refused| ConfigError::Network {
            path: path.to_path_buf(),
            at: lines.position(text, r.offset),
            table: r.table,
            message: r.message,
        };
        for (key, value) in root.iter() {
            match key.get_ref().as_ref() {
                "defaults" => defaults = tomlread::typed(value).map_err(syntax)?,
                #[cfg(not(feature = "networks"))]
                "interface" => {
                    tables = named::<ShapeOptions>("interface", value).map_err(syntax)?
                }
                #[cfg(feature = "networks")]
                "interface" => {
                    let (value, said) =
                        crate::network::read::take_unknown(value).map_err(refused)?;
                    unknowns = said;
                    tables = named::<ShapeOptions>("interface", &value).map_err(syntax)?;
                }
                "autorate" => {
                    autorates = named::<AutorateTable>("autorate", value).map_err(syntax)?
                }
                #[cfg(feature = "networks")]
                "network" => raw_networks = crate::network::read::tables(value).map_err(refused)?,
                other => {
                    return Err(syntax(TomlError {
                        offset: key.span().start,
                        key: Some(other.to_string()),
                        message: format!("unknown field `{other}`, expected one of {TABLES}"),
                    }))
                }
            }
        }
        let mut interfaces = Vec::new();
        #[cfg(feature = "networks")]
        let mut bases = vec![];
        for (name, offset, table) in tables {
            let at = lines.position(text, offset);
            let label = format!("[interface.{}]", clip(name.as_str()));
            let iface = parse_iface(name.as_str()).map_err(|source| ConfigError::Interface {
                path: path.to_path_buf(),
                at,
                name: clip(name.as_str()).into_owned(),
                label: label.clone(),
                source: Box::new(source),
            })?;
            #[cfg(feature = "networks")]
            bases.push((
                iface.clone(),
                offset,
                ShapeOptions::merge(&defaults, &table),
            ));
            interfaces.push(InterfaceConfig {
                name: iface,
                at,
                label,
                options: ShapeOptions::merge(&defaults, &table),
                autorate: None,
            });
        }
        for (name, offset, table) in autorates {
            let refused = |message: String| ConfigError::Autorate {
                path: path.to_path_buf(),
                at: lines.position(text, offset),
                name: clip(name.as_str()).into_owned(),
                message,
            };
            let Some(i) = interfaces
                .iter_mut()
                .find(|i| i.name.as_str() == name.as_str())
            else {
                return Err(refused(format!(
                    "no [interface.{}] table: autorate moves the rates of an interface the file shapes, from its `down` and `up`",
                    clip(name.as_str())
                )));
            };
            i.autorate = Some(table.check(&i.options).map_err(refused)?);
            i.options = pinned(&i.options);
        }
        interfaces.sort_by_key(|i| i.at.line);
        // In the file's order too, so a refusal names the first interface it applies to.
        #[cfg(feature = "networks")]
        bases.sort_by_key(|&(_, offset, _)| offset);
        #[cfg(feature = "networks")]
        let bases: Vec<_> = bases.into_iter().map(|(i, _, o)| (i, o)).collect();
        #[cfg(feature = "networks")]
        let networks = crate::network::read::resolve(raw_networks, unknowns, &bases, |o| {
            lines.position(text, o).line
        })
        .map_err(refused)?;
        Ok(ConfigFile {
            path: path.to_path_buf(),
            defaults,
            interfaces,
            #[cfg(feature = "networks")]
            networks,
        })
    }

    /// The configuration of one interface, if the file has it.
    pub fn interface(&self, name: &IfName) -> Option<&InterfaceConfig> {
        self.interfaces.iter().find(|i| &i.name == name)
    }

    /// Validate every interface as `unbloat config check` does, with `flags` merged over each
    /// (pass `ShapeOptions::default()` for none). The first refusal names file, line and table;
    /// a file without interfaces is refused ([`ConfigError::NothingToShape`]).
    pub fn specs(&self, flags: &ShapeOptions) -> Result<Vec<Spec>, ConfigError> {
        if self.interfaces.is_empty() {
            return Err(ConfigError::NothingToShape {
                path: self.path.clone(),
            });
        }
        self.interfaces
            .iter()
            .map(|i| {
                Spec::new(i.name.clone(), &ShapeOptions::merge(&i.options, flags)).map_err(
                    |source| ConfigError::Interface {
                        path: self.path.clone(),
                        at: i.at,
                        name: i.name.to_string(),
                        label: i.label.clone(),
                        source: Box::new(source),
                    },
                )
            })
            .collect()
    }
}

/// The top-level tables a file may have, for the message about one it may not.
#[cfg(not(feature = "networks"))]
const TABLES: &str = "`defaults`, `interface`, `autorate`";
#[cfg(feature = "networks")]
const TABLES: &str = "`defaults`, `interface`, `autorate`, `network`";

/// The tables under `v` (`[interface.NAME]`, `[autorate.NAME]`): each name, where it is written,
/// and its table read as a `T`.
fn named<T: serde::de::DeserializeOwned>(
    parent: &str,
    v: &Spanned<DeValue>,
) -> Result<Vec<(String, usize, T)>, TomlError> {
    let DeValue::Table(all) = v.get_ref() else {
        return Err(TomlError {
            offset: v.span().start,
            key: None,
            message: format!("expected tables, one per name ([{parent}.NAME])"),
        });
    };
    all.iter()
        .map(|(name, t)| {
            Ok((
                name.get_ref().to_string(),
                name.span().start,
                tomlread::typed(t)?,
            ))
        })
        .collect()
}

/// The byte offsets where the lines of a text start, built once: a position costs a binary
/// search and a count within its own line, not a scan from the start of the file (which made
/// 40,000 tables quadratic).
struct LineIndex(Vec<usize>);

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0)
            .chain(
                text.bytes()
                    .enumerate()
                    .filter(|(_, b)| *b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .collect();
        LineIndex(starts)
    }

    /// The 1-based line and column (in characters) of a byte offset of `text`.
    fn position(&self, text: &str, offset: usize) -> Position {
        let offset = offset.min(text.len());
        // The number of line starts at or before `offset` is the 1-based line.
        let line = self.0.partition_point(|&start| start <= offset);
        let line_start = self.0[line.max(1) - 1];
        let column = text
            .get(line_start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        Position { line, column }
    }
}

/// The key of a `key = value` line containing `offset`, if that is what the line is.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let line = text.get(line_start(text, offset)..)?.lines().next()?;
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
        let e = parse("[interface.eth0]\n\ndown = \"78mbitz\"\n").unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("/etc/unbloat/unbloat.toml:3:8: key `down`: "),
            "{m}"
        );
        assert!(m.contains("\"78mbitz\""), "{m}");
        let e = parse("[interface.eth0]\noverhead = \"big\"\n").unwrap_err();
        assert!(e.to_string().contains(":2:"), "{e}");
    }

    /// Issue 19: `down = 20000` (a TOML integer, SQM's kbit/s) is not 20000 bit/s.
    #[test]
    fn numbers_without_units_name_line_key_and_readings() {
        for (line, words) in [
            ("down = 20000", &["20000kbit (SQM's unit)", "20mbit"][..]),
            ("up = \"20000\"", &["20000kbit (SQM's unit)", "20mbit"][..]),
            (
                "up = \"20Mbps\"",
                &["20mbit if you mean megabits", "160mbit"][..],
            ),
            ("rtt = 100", &["write 100ms"][..]),
        ] {
            let m = parse(&format!("[interface.eth0]\n{line}\n"))
                .unwrap_err()
                .to_string();
            let key = line.split(' ').next().unwrap_or_default();
            assert!(m.starts_with("/etc/unbloat/unbloat.toml:2:"), "{m}");
            assert!(m.contains(&format!("`{key}`")), "{m}");
            for w in words {
                assert!(m.contains(w), "{line}: {w:?} missing: {m}");
            }
        }
    }

    #[test]
    fn a_table_of_tables_written_as_a_value_says_which_form_it_takes() {
        for (text, want) in [
            (
                "interface = 3\n",
                "1:13: key `interface`: expected tables, one per name ([interface.NAME])",
            ),
            (
                "autorate = \"x\"\n",
                "1:12: key `autorate`: expected tables, one per name ([autorate.NAME])",
            ),
            (
                "[interface]\neth0 = 3\n",
                "2:8: key `eth0`: expected a table",
            ),
            (
                "[interfaces.eth0]\n",
                "1:2: unknown field `interfaces`, expected one of ",
            ),
        ] {
            let m = parse(text).unwrap_err().to_string();
            let want = if want.ends_with("of ") {
                format!("{want}{TABLES}")
            } else {
                want.to_string()
            };
            assert_eq!(m, format!("/etc/unbloat/unbloat.toml:{want}"));
        }
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
            assert!(m.contains("duplicate"), "{m}");
            assert!(
                m.contains("(each interface may have one table only)"),
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
    fn autorate_tables_take_the_interfaces_rates_as_base_and_name_their_line() {
        let c = parse("[interface.wwan0]\ndown = \"10mbit\"\nup = \"5mbit\"\n\n[autorate.wwan0]\nmin = \"2mbit\"\nmax = \"50mbit\"\n").unwrap();
        let a = c.interfaces[0].autorate.as_ref().unwrap();
        assert_eq!(a.down.base, Rate::from_mbit(10));
        assert_eq!(a.up.min, Rate::from_mbit(2));
        assert_eq!(c.interfaces[0].options.ingress_keyword, Some(true));
        for (text, says) in [
            ("[interface.eth0]\ndown = \"10mbit\"\nup = \"5mbit\"\n\n[autorate.wwan0]\nmin = \"2mbit\"\n", ":5:11: [autorate.wwan0]: no [interface.wwan0] table"),
            ("[interface.wwan0]\ndown = \"10mbit\"\nup = \"5mbit\"\n[autorate.wwan0]\nmin = \"20mbit\"\nmax = \"50mbit\"\n", ":4:11: [autorate.wwan0]: the download's rates must be 0 < min <= base <= max"),
            ("[interface.wwan0]\ndown = \"10mbit\"\nup = \"5mbit\"\n[autorate.wwan0]\nmin = 2000\n", "2000kbit (SQM's unit)"),
            ("[interface.wwan0]\ndown = \"10mbit\"\nup = \"5mbit\"\n[autorate.wwan0]\nmni = \"2mbit\"\n", "unknown field `mni`"),
        ] {
            let m = parse(text).unwrap_err().to_string();
            assert!(m.contains(says), "{m}");
        }
    }

    #[test]
    fn the_shipped_example_loads_and_validates() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/unbloat.toml");
        let c = ConfigFile::load(&path).unwrap();
        assert!(c.interfaces.len() >= 2);
        let specs = c.specs(&ShapeOptions::default()).unwrap();
        assert_eq!(specs.len(), c.interfaces.len());
    }

    #[test]
    fn a_file_without_interfaces_has_nothing_to_shape() {
        for text in [
            "",
            "# only a comment\n",
            "[defaults]\nnat = true\nup = \"10mbit\"\n",
        ] {
            let c = parse(text).expect("parses");
            let m = c.specs(&ShapeOptions::default()).unwrap_err().to_string();
            assert!(
                m.starts_with("/etc/unbloat/unbloat.toml: nothing to shape: no [interface.NAME]"),
                "{m}"
            );
            assert!(
                m.contains("[interface.eth0]") && m.contains("down = \"78mbit\""),
                "{m}"
            );
        }
    }

    #[test]
    fn a_file_over_1_mib_is_refused_without_reading_it_whole() {
        let dir = std::env::temp_dir().join(format!("unbloat-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let table = "[interface.eth0]\ndown = \"10mbit\"\n";
        // Exactly the limit: read and parsed.
        let fits = dir.join("fits.toml");
        let pad = MAX_CONFIG_BYTES as usize - table.len() - 1;
        std::fs::write(&fits, format!("{table}#{}", "x".repeat(pad))).expect("write");
        assert_eq!(
            std::fs::metadata(&fits).expect("meta").len(),
            MAX_CONFIG_BYTES
        );
        assert_eq!(ConfigFile::load(&fits).expect("fits").interfaces.len(), 1);
        // One byte more: refused, naming the file and the limit.
        let big = dir.join("big.toml");
        std::fs::write(&big, format!("{table}#{}", "x".repeat(pad + 1))).expect("write");
        let m = ConfigFile::load(&big).unwrap_err().to_string();
        assert!(
            m.starts_with(&format!(
                "{}: larger than 1048576 bytes (1 MiB)",
                big.display()
            )),
            "{m}"
        );
        std::fs::remove_dir_all(&dir).ok();
        // An endless file stops at the limit too.
        if Path::new("/dev/zero").exists() {
            let e = ConfigFile::load(Path::new("/dev/zero")).unwrap_err();
            assert!(matches!(e, ConfigError::TooLarge { .. }), "{e}");
        }
    }

    #[test]
    fn forty_thousand_tables_parse_with_their_lines() {
        // The position of each table comes from one index of line starts (a scan from the start
        // of the file per table made this quadratic: 22 s for 40,000 tables).
        let text: String = (0..40_000).map(|i| format!("[interface.e{i}]\n")).collect();
        assert!(text.len() as u64 <= MAX_CONFIG_BYTES);
        let c = parse(&text).expect("parses");
        assert_eq!(c.interfaces.len(), 40_000);
        let last = c.interfaces.last().expect("tables");
        assert_eq!(last.name.as_str(), "e39999");
        assert_eq!(
            last.at,
            Position {
                line: 40_000,
                column: 12
            }
        );
    }

    #[test]
    fn line_index_agrees_with_counting_from_the_start() {
        let text = "a\n\nbé = 1\n[interface.x]\r\nlast";
        let index = LineIndex::new(text);
        for offset in (0..=text.len()).filter(|&o| text.is_char_boundary(o)) {
            let before = &text[..offset];
            let line = before.matches('\n').count() + 1;
            let start = before.rfind('\n').map_or(0, |i| i + 1);
            let column = text[start..offset].chars().count() + 1;
            assert_eq!(
                index.position(text, offset),
                Position { line, column },
                "{offset}"
            );
        }
    }

    #[test]
    fn huge_keys_names_and_values_are_not_repeated_whole() {
        // 2 MB: any length over MAX_ECHO shows it; 10 MB only makes the debug test slower.
        let huge = "k".repeat(2_000_000);
        for text in [
            format!("[interface.eth0]\n{huge} = 1\n"),
            format!("[interface.eth0]\ndown = \"{huge}\"\n"),
            format!("[interface.{huge}]\ndown = \"1mbit\"\n"),
            format!("[interface.eth0]\ndown = \"1mbit\"\nextra-egress = \"{huge}\"\n"),
        ] {
            let m = match parse(&text) {
                Err(e) => e.to_string(),
                Ok(c) => c.specs(&ShapeOptions::default()).unwrap_err().to_string(),
            };
            assert!(m.len() < 1_500, "{} bytes: {}", m.len(), &m[..200]);
            assert!(m.contains("kkkk…"), "{m}");
        }
    }
}
