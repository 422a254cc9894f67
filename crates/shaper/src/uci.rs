//! OpenWrt's UCI files (`/etc/config/NAME`), read as libuci reads them, without running anything:
//! the sections, each with its options and lists. Two readers use it: unbloat's own
//! `/etc/config/unbloat` ([`crate::config`]) and sqm-scripts' `/etc/config/sqm`
//! ([`crate::sqm_import`]), whose shell files (`/etc/sqm/*.iface.conf`) share the quoting.
//!
//! Heads up! The syntax is libuci's `file.c` (what `uci export` writes): a line is
//! `package NAME`, `config TYPE ['NAME']`, `option NAME 'VALUE'` or `list NAME 'VALUE'`; words
//! are bare, `'single quoted'` (nothing special inside) or `"double quoted"` (backslash escapes),
//! and adjacent pieces join into one word (`'it'\''s'`, as `uci export` writes a quote); `#`
//! starts a comment outside quotes. An anonymous section is `@TYPE[INDEX]`, as `uci show` names it.

/// One `config TYPE ['NAME']` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub kind: String,
    pub name: Option<String>,
    /// How messages name it: `interface 'wan'`, or `@interface[1]` when it has no name.
    pub label: String,
    /// Its `config` line (1-based).
    pub line: usize,
    /// Its options and lists, in the file's order.
    pub options: Vec<UciOption>,
}

/// One `option NAME 'VALUE'` or `list NAME 'VALUE'` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciOption {
    pub name: String,
    pub value: String,
    /// Written with `list`: one item of a list.
    pub list: bool,
    pub line: usize,
    /// The value has a `$` or backquote outside single quotes (kept as written, never run).
    pub expanded: bool,
}

/// Why a UCI file cannot be read: its line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciError {
    pub line: usize,
    pub message: String,
}

/// The sections of `text`.
pub fn parse(text: &str) -> Result<Vec<Section>, UciError> {
    let mut sections: Vec<Section> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |message: String| UciError { line, message };
        let w = words(raw).map_err(err)?;
        let Some(((keyword, _), rest)) = w.split_first() else {
            continue;
        };
        match (keyword.as_str(), rest) {
            ("package", [_]) => {}
            ("config", [(kind, _)] | [(kind, _), _]) => {
                let index = sections.iter().filter(|s| &s.kind == kind).count();
                let name = rest.get(1).map(|(n, _)| n.clone());
                let label = match &name {
                    Some(n) => format!("{kind} '{}'", crate::clip::clip(n)),
                    None => format!("@{kind}[{index}]"),
                };
                sections.push(Section {
                    kind: kind.clone(),
                    name,
                    label,
                    line,
                    options: Vec::new(),
                });
            }
            ("option" | "list", [(name, _), (value, expanded)]) => {
                let Some(s) = sections.last_mut() else {
                    return Err(err(format!("`{keyword}` before any `config` section")));
                };
                s.options.push(UciOption {
                    name: name.clone(),
                    value: value.clone(),
                    list: keyword == "list",
                    line,
                    expanded: *expanded,
                });
            }
            ("package" | "config" | "option" | "list", _) => {
                return Err(err(format!(
                    "`{}` with {} word(s) after it; UCI writes `config TYPE 'NAME'` and `option NAME 'VALUE'`",
                    crate::clip::clip(keyword),
                    rest.len()
                )))
            }
            (other, _) => {
                return Err(err(format!(
                    "{:?} is not a UCI line (package, config, option or list)",
                    crate::clip::clip(other)
                )))
            }
        }
    }
    Ok(sections)
}

/// Whether `text` is a UCI file: its first line that is neither blank nor a comment starts with
/// `config` or `package`.
pub fn is_uci(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .and_then(|l| l.split_whitespace().next())
        .is_some_and(|w| w == "config" || w == "package")
}

/// The words of one line with the shell's (and UCI's) quoting: `'...'` literal, `"..."` with
/// `\"`, `\\`, `\$`, `` \` `` escapes, `\x` outside quotes is `x`, `#` at the start of a word
/// ends the line. Returns each word and whether it has an unquoted or double-quoted `$` or
/// backquote.
pub fn words(line: &str) -> Result<Vec<(String, bool)>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uci_sections_options_lists_and_quoting() {
        let text = "package unbloat\n\nconfig interface 'wan'\n\toption down '78mbit' # comment\n\tlist classify \"gaming\"\n\tlist classify 'bulk lan-host 10.0.0.5'\nconfig interface\n\toption x 'it'\\''s'\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].label.as_str(), s[0].line), ("interface 'wan'", 3));
        assert_eq!(s[0].options[0].value, "78mbit");
        assert!(s[0].options[1].list && s[0].options[2].value == "bulk lan-host 10.0.0.5");
        assert_eq!(s[1].label, "@interface[1]");
        assert_eq!(s[1].options[0].value, "it's");
        assert!(is_uci(text) && !is_uci("[interface.eth0]\n"));
    }

    #[test]
    fn uci_lines_that_are_not_uci_name_their_line() {
        let e = parse("config interface 'wan'\n\toption down\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("1 word(s)"), "{}", e.message);
        let e = parse("option down '1mbit'\n").unwrap_err();
        assert!(e.message.contains("before any `config`"), "{}", e.message);
        let e = parse("config interface 'wan\n").unwrap_err();
        assert!(e.message.contains("not closed"), "{}", e.message);
    }
}
