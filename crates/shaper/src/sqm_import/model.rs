//! What every step of the sqm import shares: the options sqm-scripts knows ([`Key`], both
//! spellings), one queue as read from a file ([`SqmQueue`]), the result ([`Import`]) and its
//! [`Note`]s, and the [`ImportError`]s. This module imports none of the other `sqm_import`
//! modules; they all import it, so data flows one way (parse -> map -> factor -> render).

use crate::options::ShapeOptions;
use crate::spec::SpecError;
use serde::Serialize;
use std::fmt;
use unbloat_units::IfName;

/// The two ways sqm-scripts is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// OpenWrt's `/etc/config/sqm`: `config queue` sections of `option NAME 'VALUE'` lines,
    /// which `run.sh` (src/run-openwrt.sh) exports as the variables below.
    Uci,
    /// sqm-scripts' `/etc/sqm/IFACE.iface.conf` (and `default.conf`): shell variables that
    /// `sqm-bin` / `sqm-ifup` source before `start-sqm`.
    Shell,
}

/// An option sqm-scripts reads, whichever way it is spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    Enabled,
    Interface,
    Download,
    Upload,
    Qdisc,
    Script,
    SquashDscp,
    SquashIngress,
    IngressEcn,
    EgressEcn,
    Ilimit,
    Elimit,
    Itarget,
    Etarget,
    IqdiscOpts,
    EqdiscOpts,
    Linklayer,
    Overhead,
    LinklayerAdvanced,
    TcMtu,
    TcTsize,
    TcMpu,
    Llam,
    QdiscAdvanced,
    QdiscReallyAdvanced,
    Target,
    DebugLogging,
    Verbosity,
    VerbosityMin,
    // Shell files only: the variables of defaults.sh that run.sh does not export.
    Limit,
    Autoflow,
    IngressCakeOpts,
    EgressCakeOpts,
    BurstDur,
    IBurstDur,
    EBurstDur,
    QuantumDur,
    IQuantumDur,
    EQuantumDur,
    IptMask,
}

/// (key, UCI option as run-openwrt.sh reads it, shell variables in defaults.sh's order of
/// precedence: `ZERO_DSCP_INGRESS="${ZERO_DSCP:-${SQUASH_DSCP:-1}}"`).
const NAMES: &[(Key, Option<&str>, &[&str])] = &[
    (Key::Enabled, Some("enabled"), &["ENABLED"]),
    (Key::Interface, Some("interface"), &["IFACE"]),
    (Key::Download, Some("download"), &["DOWNLINK"]),
    (Key::Upload, Some("upload"), &["UPLINK"]),
    (Key::Qdisc, Some("qdisc"), &["QDISC"]),
    (Key::Script, Some("script"), &["SCRIPT"]),
    (
        Key::SquashDscp,
        Some("squash_dscp"),
        &["ZERO_DSCP_INGRESS", "ZERO_DSCP", "SQUASH_DSCP"],
    ),
    (
        Key::SquashIngress,
        Some("squash_ingress"),
        &["IGNORE_DSCP_INGRESS", "IGNORE_DSCP", "SQUASH_INGRESS"],
    ),
    (Key::IngressEcn, Some("ingress_ecn"), &["IECN"]),
    (Key::EgressEcn, Some("egress_ecn"), &["EECN"]),
    (Key::Ilimit, Some("ilimit"), &["ILIMIT"]),
    (Key::Elimit, Some("elimit"), &["ELIMIT"]),
    (Key::Itarget, Some("itarget"), &["ITARGET"]),
    (Key::Etarget, Some("etarget"), &["ETARGET"]),
    (Key::IqdiscOpts, Some("iqdisc_opts"), &["IQDISC_OPTS"]),
    (Key::EqdiscOpts, Some("eqdisc_opts"), &["EQDISC_OPTS"]),
    (Key::Linklayer, Some("linklayer"), &["LINKLAYER"]),
    (Key::Overhead, Some("overhead"), &["OVERHEAD"]),
    (Key::LinklayerAdvanced, Some("linklayer_advanced"), &[]),
    (Key::TcMtu, Some("tcMTU"), &["STAB_MTU"]),
    (Key::TcTsize, Some("tcTSIZE"), &["STAB_TSIZE"]),
    (Key::TcMpu, Some("tcMPU"), &["STAB_MPU"]),
    (Key::Llam, Some("linklayer_adaptation_mechanism"), &["LLAM"]),
    (Key::QdiscAdvanced, Some("qdisc_advanced"), &[]),
    (
        Key::QdiscReallyAdvanced,
        Some("qdisc_really_really_advanced"),
        &[],
    ),
    (Key::Target, Some("target"), &["TARGET"]),
    (Key::DebugLogging, Some("debug_logging"), &["SQM_DEBUG"]),
    (Key::Verbosity, Some("verbosity"), &["SQM_VERBOSITY_MAX"]),
    (Key::VerbosityMin, None, &["SQM_VERBOSITY_MIN"]),
    (Key::Limit, None, &["LIMIT"]),
    (Key::Autoflow, None, &["AUTOFLOW"]),
    (Key::IngressCakeOpts, None, &["INGRESS_CAKE_OPTS"]),
    (Key::EgressCakeOpts, None, &["EGRESS_CAKE_OPTS"]),
    (Key::BurstDur, None, &["SHAPER_BURST_DUR_US"]),
    (Key::IBurstDur, None, &["ISHAPER_BURST_DUR_US"]),
    (Key::EBurstDur, None, &["ESHAPER_BURST_DUR_US"]),
    (Key::QuantumDur, None, &["SHAPER_QUANTUM_DUR_US"]),
    (Key::IQuantumDur, None, &["ISHAPER_QUANTUM_DUR_US"]),
    (Key::EQuantumDur, None, &["ESHAPER_QUANTUM_DUR_US"]),
    (Key::IptMask, None, &["IPT_MASK"]),
];

impl Key {
    /// The key a UCI option name stands for.
    pub fn from_uci(name: &str) -> Option<Key> {
        NAMES.iter().find(|r| r.1 == Some(name)).map(|r| r.0)
    }

    /// The key a shell variable stands for.
    pub fn from_shell(name: &str) -> Option<Key> {
        NAMES.iter().find(|r| r.2.contains(&name)).map(|r| r.0)
    }

    /// The spellings of this key in `format`, the one that wins first.
    pub fn names(self, format: Format) -> Vec<&'static str> {
        let row = NAMES.iter().find(|r| r.0 == self);
        match (format, row) {
            (Format::Uci, Some((_, Some(n), _))) => vec![n],
            (Format::Shell, Some((_, _, names))) => names.to_vec(),
            _ => vec![],
        }
    }

    /// The variable `start-sqm` reads (what run.sh exports for the UCI option).
    pub fn shell_name(self) -> Option<&'static str> {
        NAMES
            .iter()
            .find(|r| r.0 == self)
            .and_then(|r| r.2.first().copied())
    }
}

/// One `option NAME 'VALUE'` line, or one `NAME=VALUE` assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// As written in the file.
    pub name: String,
    pub value: String,
    pub line: usize,
    /// A shell value with `$` or a backquote: the import does not run shell code.
    pub expanded: bool,
}

/// One sqm queue: a UCI `config` section, or a whole shell file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqmQueue {
    pub format: Format,
    /// How messages name it: `queue 'wan'`, `@queue[1]`, `eth0.iface.conf`.
    pub label: String,
    /// Where it starts (1-based).
    pub line: usize,
    /// The UCI section type (`queue`); empty for a shell file.
    pub section_type: String,
    /// Every setting in file order; a later one of the same name wins, as in the shell and UCI.
    pub settings: Vec<Setting>,
    /// Shell files: the interface the file's name says (`IFACE.iface.conf`), used when the file
    /// sets no `IFACE`.
    pub iface_from_name: Option<String>,
    /// The caller's `--iface`, which wins over the file (shell files only).
    pub iface_flag: Option<String>,
}

impl SqmQueue {
    /// The value `start-sqm` would see for `key`: the last setting of its first spelling that is
    /// not empty (an empty value is unset to sqm-scripts: `[ -z "$X" ] && X=default`).
    pub fn get(&self, key: Key) -> Option<&Setting> {
        key.names(self.format).into_iter().find_map(|name| {
            self.settings
                .iter()
                .rev()
                .find(|s| s.name == name)
                .filter(|s| !s.value.trim().is_empty())
        })
    }

    /// The variables start-sqm gets for this queue: for UCI, what run-openwrt.sh exports
    /// (every option it reads, empty when unset, squash_dscp as ZERO_DSCP_INGRESS, ...); for a
    /// shell file, its own assignments of sqm-scripts' variables. `IFACE` is the caller's.
    pub fn sqm_env(&self) -> Vec<(String, String)> {
        match self.format {
            Format::Uci => NAMES
                .iter()
                .filter(|(k, uci, shell)| {
                    *k != Key::Enabled && *k != Key::Interface && uci.is_some() && !shell.is_empty()
                })
                .map(|(k, _, shell)| {
                    let v = self.get(*k).map(|s| s.value.clone()).unwrap_or_default();
                    (shell[0].to_string(), v)
                })
                .collect(),
            Format::Shell => self
                .settings
                .iter()
                .filter(|s| Key::from_shell(&s.name).is_some_and(|k| k != Key::Interface))
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect(),
        }
    }

    /// Settings no sqm-scripts code reads for a queue (the last of each name).
    pub fn unknown(&self) -> Vec<&Setting> {
        let known = |n: &str| match self.format {
            Format::Uci => Key::from_uci(n).is_some(),
            Format::Shell => Key::from_shell(n).is_some(),
        };
        let mut out: Vec<&Setting> = Vec::new();
        for s in self.settings.iter().rev() {
            if !known(&s.name) && !out.iter().any(|o| o.name == s.name) {
                out.push(s);
            }
        }
        out.reverse();
        out
    }
}

/// What a note says about an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoteKind {
    /// Carried into the TOML (the text names the key).
    Mapped,
    /// Left at sqm-scripts' default: unbloat's own default applies (the text says how it differs).
    Default,
    /// Has no unbloat equivalent (the text says why).
    NotMapped,
    /// sqm-scripts itself does nothing with it here (a GUI switch, an unused variable).
    Ignored,
    /// Something to check before shaping with the result.
    Warning,
}

impl NoteKind {
    pub fn label(self) -> &'static str {
        match self {
            NoteKind::Mapped => "mapped",
            NoteKind::Default => "default",
            NoteKind::NotMapped => "not mapped",
            NoteKind::Ignored => "ignored",
            NoteKind::Warning => "warning",
        }
    }
}

/// One line of the import's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// The queue it is about (its label), or the file.
    pub queue: String,
    /// The sqm option (as spelled in the file) or option-string word, if about one.
    pub option: Option<String>,
    pub value: Option<String>,
    pub kind: NoteKind,
    pub text: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.queue)?;
        match (&self.option, &self.value) {
            (Some(o), Some(v)) => write!(f, "{o} '{}': ", crate::clip::clip(v))?,
            (Some(o), None) => write!(f, "{o}: ")?,
            _ => {}
        }
        write!(f, "{}: {}", self.kind.label(), self.text)
    }
}

/// The sqm-scripts recipes unbloat can tell the meaning of (src/*.qos).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Script {
    #[serde(rename = "piece_of_cake.qos")]
    PieceOfCake,
    #[serde(rename = "layer_cake.qos")]
    LayerCake,
    #[serde(rename = "simple.qos")]
    Simple,
    #[serde(rename = "simplest.qos")]
    Simplest,
    #[serde(rename = "simplest_tbf.qos")]
    SimplestTbf,
}

impl Script {
    pub const ALL: [Script; 5] = [
        Script::PieceOfCake,
        Script::LayerCake,
        Script::Simple,
        Script::Simplest,
        Script::SimplestTbf,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Script::PieceOfCake => "piece_of_cake.qos",
            Script::LayerCake => "layer_cake.qos",
            Script::Simple => "simple.qos",
            Script::Simplest => "simplest.qos",
            Script::SimplestTbf => "simplest_tbf.qos",
        }
    }
    /// The recipes that set `QDISC=cake` themselves.
    pub fn forces_cake(self) -> bool {
        matches!(self, Script::PieceOfCake | Script::LayerCake)
    }
}

/// One interface of the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Imported {
    pub iface: IfName,
    /// `false`: the section is disabled in sqm, and the table is written commented out.
    pub enabled: bool,
    /// The queue it came from (its label) and where.
    pub queue: String,
    pub line: usize,
    pub script: Script,
    /// The options the TOML table holds (what `ConfigFile` reads back from it).
    pub options: ShapeOptions,
    /// For each TOML key, where its value came from (the line's comment).
    pub comments: Vec<(String, String)>,
    /// The variables sqm-scripts' start-sqm reads for this queue ([`SqmQueue::sqm_env`]), to run
    /// it beside the result (`--check`).
    #[serde(skip)]
    pub sqm_env: Vec<(String, String)>,
}

/// The whole result: the interfaces in file order and every note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Import {
    pub format: Format,
    pub interfaces: Vec<Imported>,
    pub notes: Vec<Note>,
}

/// Why a file cannot be imported; every message names the file, the line and the option.
/// Boxed: an error is rare and the `Result`s carrying it are many.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct ImportError(pub Box<ImportErrorKind>);

impl From<ImportErrorKind> for ImportError {
    fn from(k: ImportErrorKind) -> ImportError {
        ImportError(Box::new(k))
    }
}

/// The kinds of [`ImportError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportErrorKind {
    #[error("{path}:{line}: {message}")]
    Syntax {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{path}:{line}: {queue}: {option} '{value}': {reason}")]
    Value {
        path: String,
        line: usize,
        queue: String,
        option: String,
        value: String,
        reason: String,
    },
    #[error("{path}:{line}: {queue}: {message}")]
    Queue {
        path: String,
        line: usize,
        queue: String,
        message: String,
    },
    #[error("{path}:{line}: {queue}: the result is not a valid unbloat setup: {source}")]
    Invalid {
        path: String,
        line: usize,
        queue: String,
        source: Box<SpecError>,
    },
}
