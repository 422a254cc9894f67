//! `unbloat config import-sqm`: sqm-scripts' configuration (OpenWrt's `/etc/config/sqm`, or
//! `/etc/sqm/IFACE.iface.conf`) as unbloat's TOML, with a note for every option saying what
//! became of it. Pure: text in, typed result out; the binary reads and writes the files.
//!
//! Heads up! Every meaning and default here is sqm-scripts' own, read from its source
//! (tohojo/sqm-scripts 95337de, vendored in `third_party/sqm-scripts`): `src/run-openwrt.sh`
//! (the UCI options and the variables they become), `src/defaults.sh` (every default),
//! `src/functions.sh` (`get_target`, `get_ecn`, `get_limit`, the link-layer strings) and the
//! recipes `src/*.qos`; luci-app-sqm's page (`view/network/sqm.js`) only adds GUI switches. The
//! option strings are read with tc's grammar and units ([`words`]).
//!
//! The rule, for every option:
//! - **What shapes is carried**: the interface, the rates (kbit/s, written `"50000kbit"`), the
//!   recipe's qdisc and tiers, DSCP tins and washing per direction, the link-layer compensation
//!   the file asks for (exactly: cake's `overhead`/`mpu`/`atm`, or `link = "raw"` for the size
//!   table HTB gets, which counts from Linux's length), and every word of the option strings
//!   unbloat has a typed option for.
//! - **Tuning left at sqm-scripts' defaults gets unbloat's**, with a note saying how they differ:
//!   fq_codel's limit, target and ECN, the cake recipes' `nat` (unbloat chooses isolation and nat
//!   from the machine), `linklayer none` (unbloat assumes Ethernet framing; `link = "raw"` keeps
//!   sqm's). Tuning set to anything else is carried.
//! - **What has no equivalent is reported**: TBF (unbloat shapes with HTB), leaf qdiscs other
//!   than fq_codel, simple.qos's iptables marks and DSCP squashing under HTB, per-direction HTB
//!   tiers, the size table's resolution, sqm's logging; option-string words unbloat refuses or tc
//!   itself would refuse are left out, each named.
//! - A disabled queue (`enabled 0`) is written as a commented-out table, so enabling it is
//!   uncommenting it; several queues are several tables; a second enabled queue for the same
//!   interface is left out, as sqm-scripts starts only the first.
//!
//! Errors ([`ImportError`], exit status 2 in the binary) name the file, the line, the queue and
//! the option: no interface, an unknown script, a negative or non-numeric rate, a link layer or
//! overhead out of range, a result unbloat's own checks refuse (checked with
//! [`Spec::new`](crate::spec::Spec::new), as `unbloat config check` does).
//!
//! The steps, each a module, data flowing one way: [`parse`] (the two formats into
//! [`SqmQueue`]s), [`map`], [`recipe`] and [`aqm`] (a queue into typed options per direction, with
//! [`words`] for the option strings, through the options' own grammar), [`factor`] (two
//! directions into one table), [`render`] (TOML and notes). [`model`] holds the types they all
//! share and imports none of them; [`dir`] the per-direction state and [`ctx`] the queue being
//! mapped.

pub mod aqm;
pub mod ctx;
pub mod dir;
pub mod factor;
pub mod map;
pub mod model;
pub mod parse;
pub mod recipe;
pub mod render;
pub mod words;

pub use model::{
    Format, Import, ImportError, ImportErrorKind, Imported, Note, NoteKind, Script, SqmQueue,
};

use crate::spec::{Spec, SpecError};

/// What the caller says beside the file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// `--iface`: the interface of a shell file that names none (`default.conf`).
    pub iface: Option<&'a str>,
    /// `--i-mean-it`: a table whose rates unbloat would refuse as a likely typo (below 64 kbit/s,
    /// directions over 1000:1 apart) gets `i-mean-it = true`, as `unbloat start --i-mean-it`.
    pub i_mean_it: bool,
}

/// Import `text`, the contents of `path` (named in messages; a shell file's name
/// `IFACE.iface.conf` names its interface).
pub fn import(text: &str, path: &str, opts: &Options) -> Result<Import, ImportError> {
    let iface = opts.iface;
    let queues = parse::read(text, path, iface)?;
    let file_error = |message: &str| -> ImportError {
        ImportErrorKind::File {
            path: path.to_string(),
            message: message.to_string(),
        }
        .into()
    };
    let format = queues.first().map_or(Format::Uci, |q| q.format);
    if queues.is_empty() {
        return Err(file_error("no `config queue` section: nothing to import"));
    }
    if format == Format::Uci && iface.is_some() {
        return Err(file_error(
            "--iface is for sqm-scripts' shell files; a UCI section names its own interface",
        ));
    }
    if format == Format::Shell && is_sqm_conf(&queues[0]) {
        return Err(file_error(
            "this is sqm-scripts' own configuration (SQM_LIB_DIR, SQM_STATE_DIR), not a queue's: \
             the queues are in /etc/sqm/IFACE.iface.conf (or OpenWrt's /etc/config/sqm)",
        ));
    }
    let mut notes = Vec::new();
    let mut interfaces: Vec<Imported> = Vec::new();
    for q in &queues {
        let (on, _) = map::enabled(q);
        let note = |kind, text: String| Note {
            queue: q.label.clone(),
            option: None,
            value: None,
            kind,
            text,
        };
        let mq = match map::queue(q, path, on) {
            Ok(mq) => mq,
            Err(e) if !on => {
                notes.push(note(
                    NoteKind::Warning,
                    format!("disabled, and left out: {e}"),
                ));
                continue;
            }
            Err(e) => return Err(e),
        };
        if q.format == Format::Uci && q.section_type != "queue" {
            notes.push(note(
                NoteKind::Warning,
                format!(
                    "a `config {}` section: run.sh starts every section of /etc/config/sqm \
                     whatever its type, so it is imported as a queue",
                    crate::clip::clip(&q.section_type)
                ),
            ));
        }
        let first = interfaces.iter().find(|i| i.iface == mq.iface && i.enabled);
        if let Some(first) = first {
            let text = match on {
                true => format!(
                    "{} again: sqm-scripts starts only the first enabled queue of an interface \
                     ({}; its state file makes run.sh skip the rest); left out",
                    mq.iface, first.queue
                ),
                false => format!(
                    "{} is also {}'s interface: uncommenting this table would name it twice",
                    mq.iface, first.queue
                ),
            };
            if on {
                notes.push(note(NoteKind::Warning, text));
                continue;
            }
            notes.extend(mq.notes.iter().cloned());
            notes.push(note(NoteKind::Warning, text));
        } else {
            notes.extend(mq.notes.iter().cloned());
        }
        let (mut options, mut sources) = factor::table(&mq.mapped);
        let typo = |e: &crate::spec::SpecError| {
            matches!(e, SpecError::CutOff { .. } | SpecError::Lopsided { .. })
        };
        if opts.i_mean_it && Spec::new(mq.iface.clone(), &options).is_err_and(|e| typo(&e)) {
            options.i_mean_it = Some(true);
            sources.insert(
                "i-mean-it".into(),
                vec!["--i-mean-it given to the import".into()],
            );
        }
        match Spec::new(mq.iface.clone(), &options) {
            Ok(spec) => {
                for w in spec.warnings {
                    notes.push(note(NoteKind::Warning, format!("unbloat warns: {w}")));
                }
            }
            Err(e) if !on => {
                notes.push(note(
                    NoteKind::Warning,
                    format!("disabled, and left out: {e}"),
                ));
                continue;
            }
            Err(e) => {
                return Err(ImportErrorKind::Invalid {
                    path: path.to_string(),
                    line: q.line,
                    queue: q.label.clone(),
                    source: Box::new(e),
                }
                .into())
            }
        }
        interfaces.push(Imported {
            iface: mq.iface,
            enabled: on,
            queue: q.label.clone(),
            line: q.line,
            script: mq.script,
            options,
            comments: sources
                .into_iter()
                .map(|(k, v)| (k, v.join("; ")))
                .collect(),
            sqm_env: q.sqm_env(),
        });
    }
    if !interfaces.iter().any(|i| i.enabled) {
        notes.push(Note {
            queue: path.to_string(),
            option: None,
            value: None,
            kind: NoteKind::Warning,
            text: "no queue is enabled: the result shapes nothing until a table is uncommented"
                .to_string(),
        });
    }
    Ok(Import {
        format,
        interfaces,
        notes,
    })
}

/// sqm-scripts' `sqm.conf` sets where it lives, and nothing of a queue.
fn is_sqm_conf(q: &SqmQueue) -> bool {
    let has = |n: &str| q.settings.iter().any(|s| s.name == n);
    (has("SQM_LIB_DIR") || has("SQM_STATE_DIR"))
        && !q
            .settings
            .iter()
            .any(|s| model::Key::from_shell(&s.name).is_some())
}
