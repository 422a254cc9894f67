//! Reading sqm's two file formats into [`SqmQueue`]s, without running anything.
//!
//! Heads up! UCI is OpenWrt's config syntax, read by [`crate::uci`] (libuci `file.c`; the
//! sections `run.sh` walks with `config_load sqm; config_foreach start_sqm_section`, which visits
//! *every* section whatever its type).
//!
//! The shell format is what `sqm-bin` and `sqm-ifup` source (`. /etc/sqm/eth0.iface.conf`). The
//! import reads only `NAME=VALUE` lines (optionally after `export`), with the shell's quoting, and
//! runs nothing: a line that is not an assignment is an error naming the line, and a value with
//! `$` or a backquote is kept as written and marked [`Setting::expanded`] (the mapping refuses
//! it where it matters).
//!
//! Which format a file is: UCI when its first line that is neither blank nor a comment starts
//! with `config` or `package`, the shell's otherwise.

use super::model::{Format, ImportError, ImportErrorKind, Setting, SqmQueue};

/// Read `text`; `path` names it in messages, and a shell file named `IFACE.iface.conf` is for
/// `IFACE` unless `iface` (the caller's `--iface`) says otherwise.
pub fn read(text: &str, path: &str, iface: Option<&str>) -> Result<Vec<SqmQueue>, ImportError> {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    let Some(first) = first else {
        return Err(ImportErrorKind::File {
            path: path.to_string(),
            message: "nothing to import: no `config queue` section (OpenWrt's /etc/config/sqm) \
                      and no NAME=VALUE line (sqm-scripts' /etc/sqm/IFACE.iface.conf)"
                .to_string(),
        }
        .into());
    };
    if crate::uci::is_uci(first) {
        uci(text, path)
    } else {
        shell(text, path, iface).map(|q| vec![q])
    }
}

fn syntax(path: &str, line: usize, message: String) -> ImportError {
    ImportErrorKind::Syntax {
        path: path.to_string(),
        line,
        message,
    }
    .into()
}

fn uci(text: &str, path: &str) -> Result<Vec<SqmQueue>, ImportError> {
    let sections = crate::uci::parse(text).map_err(|e| syntax(path, e.line, e.message))?;
    Ok(sections
        .into_iter()
        .map(|s| SqmQueue {
            format: Format::Uci,
            label: s.label,
            line: s.line,
            section_type: s.kind,
            settings: s
                .options
                .into_iter()
                .map(|o| Setting {
                    // sqm-scripts reads no list; keep it under its own name so that it is
                    // reported.
                    name: if o.list {
                        format!("list {}", o.name)
                    } else {
                        o.name
                    },
                    value: o.value,
                    line: o.line,
                    expanded: false,
                })
                .collect(),
            iface_from_name: None,
            iface_flag: None,
        })
        .collect())
}

fn shell(text: &str, path: &str, iface: Option<&str>) -> Result<SqmQueue, ImportError> {
    let file = std::path::Path::new(path)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string());
    let mut settings = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let mut w = crate::uci::words(raw).map_err(|m| syntax(path, line, m))?;
        if w.first().is_some_and(|(x, _)| x == "export") {
            w.remove(0);
        }
        let Some((word, expanded)) = w.first() else {
            continue;
        };
        let assignment = word.split_once('=').filter(|(name, _)| {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        });
        let Some((name, value)) = assignment else {
            return Err(syntax(
                path,
                line,
                format!(
                    "{:?} is not a NAME=VALUE assignment; the import reads sqm-scripts' variables and runs no shell code",
                    crate::clip::clip(raw.trim())
                ),
            ));
        };
        if w.len() > 1 {
            return Err(syntax(
                path,
                line,
                format!(
                    "{name}=: more than one word (quote a value with spaces: {name}=\"...\"); the import runs no shell code"
                ),
            ));
        }
        settings.push(Setting {
            name: name.to_string(),
            value: value.to_string(),
            line,
            expanded: *expanded,
        });
    }
    let from_name = file
        .strip_suffix(".iface.conf")
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    Ok(SqmQueue {
        format: Format::Shell,
        label: file,
        line: 1,
        section_type: String::new(),
        settings,
        iface_from_name: from_name,
        iface_flag: iface.map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqm_import::model::Key;

    #[test]
    fn sqm_uci_sections_options_and_quoting() {
        let text = "package sqm\n\nconfig queue 'wan'\n\toption interface 'eth1' # WAN\n\toption eqdisc_opts \"nat dual-srchost\"\n\toption iqdisc_opts 'it'\\''s'\nconfig queue\n\toption enabled 1\nconfig queue\n";
        let q = read(text, "sqm", None).unwrap();
        assert_eq!(q.len(), 3);
        assert_eq!(q[0].label, "queue 'wan'");
        assert_eq!(q[0].line, 3);
        assert_eq!(q[0].get(Key::Interface).unwrap().value, "eth1");
        assert_eq!(q[0].get(Key::EqdiscOpts).unwrap().value, "nat dual-srchost");
        assert_eq!(q[0].get(Key::IqdiscOpts).unwrap().value, "it's");
        assert_eq!(q[1].label, "@queue[1]");
        assert_eq!(q[2].label, "@queue[2]");
        assert_eq!(q[1].get(Key::Enabled).unwrap().value, "1");
    }

    #[test]
    fn sqm_uci_errors_name_the_line() {
        let e = read("config queue\noption x 'y' z\n", "f", None).unwrap_err();
        assert!(e.to_string().starts_with("f:2: too many words"), "{e}");
        let e = read("config queue\nfrob x y\n", "f", None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("f:2: \"frob\" is not a UCI command"),
            "{e}"
        );
        let e = read("package sqm\noption a 'b'\n", "f", None).unwrap_err();
        assert!(e.to_string().contains("before any `config`"), "{e}");
        let e = read("config queue\noption a 'b\n", "f", None).unwrap_err();
        assert!(e.to_string().contains("never closed"), "{e}");
        let e = read("# only\n\n", "f", None).unwrap_err();
        assert!(e.to_string().starts_with("f: nothing to import"), "{e}");
    }

    #[test]
    fn sqm_shell_assignments_and_precedence() {
        let text = "# comment\nA=$(cat /x | wc -l)\nB=`cat /x`\nUPLINK=1000 # kbit/s\nexport DOWNLINK=\"85000\"\nSQUASH_DSCP=0\nZERO_DSCP_INGRESS=\nEQDISC_OPTS='nat ack-filter'\nX=\"$HOME\"\n";
        let q = read(text, "/etc/sqm/eth0.iface.conf", None).unwrap();
        let q = &q[0];
        assert_eq!(q.label, "eth0.iface.conf");
        assert_eq!(q.iface_from_name.as_deref(), Some("eth0"));
        assert_eq!(q.get(Key::Upload).unwrap().value, "1000");
        assert_eq!(q.get(Key::Download).unwrap().value, "85000");
        // ZERO_DSCP_INGRESS is empty, so the older name SQUASH_DSCP counts (defaults.sh).
        assert_eq!(q.get(Key::SquashDscp).unwrap().name, "SQUASH_DSCP");
        assert_eq!(q.get(Key::EqdiscOpts).unwrap().value, "nat ack-filter");
        assert!(q.settings.last().unwrap().expanded);
        assert_eq!(q.settings[0].value, "$(cat /x | wc -l)");
        assert!(q.settings[0].expanded && q.settings[1].expanded);
        assert_eq!(q.unknown().len(), 3);
        let q = read("UPLINK=1\n", "default.conf", Some("eth9")).unwrap();
        assert_eq!(q[0].iface_flag.as_deref(), Some("eth9"));
        assert_eq!(
            read("UPLINK=1\n", "default.conf", None).unwrap()[0].iface_from_name,
            None
        );
    }

    #[test]
    fn sqm_shell_code_is_refused_not_run() {
        for (text, want) in [
            (
                "if true; then UPLINK=1; fi\n",
                "is not a NAME=VALUE assignment",
            ),
            ("UPLINK=1 DOWNLINK=2\n", "UPLINK=: more than one word"),
            ("UPLINK='1\n", "not closed"),
            ("[ -z \"$X\" ] && X=1\n", "is not a NAME=VALUE"),
            ("UPLINK=$(cat /etc/x\n", "not closed"),
        ] {
            let e = read(text, "x.iface.conf", None).unwrap_err().to_string();
            assert!(e.starts_with("x.iface.conf:1: "), "{e}");
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
