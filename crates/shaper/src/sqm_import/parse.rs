//! Reading sqm's two file formats into [`SqmQueue`]s, without running anything.
//!
//! Heads up! UCI is OpenWrt's config syntax (libuci `file.c`; the sections `run.sh` walks with
//! `config_load sqm; config_foreach start_sqm_section`, which visits *every* section whatever its
//! type). A line is `package NAME`, `config TYPE ['NAME']`, `option NAME 'VALUE'` or
//! `list NAME 'VALUE'`; words are bare, `'single quoted'` (nothing special inside) or
//! `"double quoted"` (backslash escapes), and adjacent pieces join into one word (`'it'\''s'`, as
//! `uci export` writes a quote); `#` starts a comment outside quotes.
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
    let word = first.split_whitespace().next().unwrap_or_default();
    if word == "config" || word == "package" {
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

/// The words of one line with the shell's (and UCI's) quoting: `'...'` literal, `"..."` with
/// `\"`, `\\`, `\$`, `` \` `` escapes, `\x` outside quotes is `x`, `#` at the start of a word
/// ends the line. Returns each word and whether it has an unquoted or double-quoted `$` or
/// backquote.
fn words(line: &str) -> Result<Vec<(String, bool)>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None | Some('#') => return Ok(out),
            _ => {}
        }
        let mut word = String::new();
        let mut expanded = false;
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '\'' => loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("a quote (') is not closed on this line".to_string()),
                    }
                },
                '"' => loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => word.push(e),
                            Some(e) => {
                                word.push('\\');
                                word.push(e);
                            }
                            None => return Err("a quote (\") is not closed on this line".into()),
                        },
                        Some(c) => {
                            expanded |= c == '$' || c == '`';
                            word.push(c);
                        }
                        None => return Err("a quote (\") is not closed on this line".to_string()),
                    }
                },
                '\\' => match chars.next() {
                    Some(e) => word.push(e),
                    None => return Err("a line continued with \\ is not supported".to_string()),
                },
                // A command substitution is one word however many spaces it holds: kept as
                // written, marked, never run.
                '$' if chars.peek() == Some(&'(') => {
                    expanded = true;
                    word.push('$');
                    let mut depth = 0;
                    for c in chars.by_ref() {
                        word.push(c);
                        depth += match c {
                            '(' => 1,
                            ')' => -1,
                            _ => 0,
                        };
                        if depth == 0 {
                            break;
                        }
                    }
                    if depth != 0 {
                        return Err("a $( is not closed on this line".to_string());
                    }
                }
                '`' => {
                    expanded = true;
                    word.push('`');
                    loop {
                        match chars.next() {
                            Some('`') => break word.push('`'),
                            Some(c) => word.push(c),
                            None => return Err("a backquote is not closed on this line".into()),
                        }
                    }
                }
                c => {
                    expanded |= c == '$';
                    word.push(c);
                }
            }
        }
        out.push((word, expanded));
    }
}

fn uci(text: &str, path: &str) -> Result<Vec<SqmQueue>, ImportError> {
    let mut queues: Vec<SqmQueue> = Vec::new();
    // How many sections of each type came before: anonymous sections are `@TYPE[INDEX]`.
    let mut seen: Vec<String> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let w = words(raw).map_err(|m| syntax(path, line, m))?;
        let Some(((keyword, _), rest)) = w.split_first() else {
            continue;
        };
        match (keyword.as_str(), rest) {
            ("package", [_]) => {}
            ("config", [(kind, _)] | [(kind, _), _]) => {
                let index = seen.iter().filter(|t| *t == kind).count();
                seen.push(kind.clone());
                let label = match rest.get(1) {
                    Some((name, _)) => format!("{kind} '{}'", crate::clip::clip(name)),
                    None => format!("@{kind}[{index}]"),
                };
                queues.push(SqmQueue {
                    format: Format::Uci,
                    label,
                    line,
                    section_type: kind.clone(),
                    settings: Vec::new(),
                    iface_from_name: None,
                    iface_flag: None,
                });
            }
            ("option" | "list", [(name, _), (value, _)]) => {
                let Some(q) = queues.last_mut() else {
                    return Err(syntax(
                        path,
                        line,
                        format!("`{keyword}` before any `config` section"),
                    ));
                };
                // sqm-scripts reads no list; keep it under its own name so that it is reported.
                let name = match keyword.as_str() {
                    "list" => format!("list {name}"),
                    _ => name.clone(),
                };
                q.settings.push(Setting {
                    name,
                    value: value.clone(),
                    line,
                    expanded: false,
                });
            }
            ("package" | "config" | "option" | "list", _) => {
                return Err(syntax(
                    path,
                    line,
                    format!(
                        "`{}` with {} word(s) after it; UCI writes `config TYPE 'NAME'` and `option NAME 'VALUE'`",
                        crate::clip::clip(keyword),
                        rest.len()
                    ),
                ))
            }
            (other, _) => {
                return Err(syntax(
                    path,
                    line,
                    format!(
                        "{:?} is not a UCI line (package, config, option or list)",
                        crate::clip::clip(other)
                    ),
                ))
            }
        }
    }
    Ok(queues)
}

fn shell(text: &str, path: &str, iface: Option<&str>) -> Result<SqmQueue, ImportError> {
    let file = std::path::Path::new(path)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string());
    let mut settings = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let mut w = words(raw).map_err(|m| syntax(path, line, m))?;
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
        let e = read("config queue\noption x\n", "f", None).unwrap_err();
        assert!(
            e.to_string().starts_with("f:2: `option` with 1 word"),
            "{e}"
        );
        let e = read("config queue\nfrob x y\n", "f", None).unwrap_err();
        assert!(
            e.to_string().starts_with("f:2: \"frob\" is not a UCI line"),
            "{e}"
        );
        let e = read("package sqm\noption a 'b'\n", "f", None).unwrap_err();
        assert!(e.to_string().contains("before any `config`"), "{e}");
        let e = read("config queue\noption a 'b\n", "f", None).unwrap_err();
        assert!(e.to_string().contains("not closed"), "{e}");
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
