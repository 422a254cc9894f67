//! OpenWrt's UCI files (`/etc/config/NAME`), read as libuci reads them, without running anything:
//! the sections, each with its options and lists. Two readers use it: unbloat's own
//! `/etc/config/unbloat` ([`crate::config`]) and sqm-scripts' `/etc/config/sqm`
//! ([`crate::sqm_import`]), whose shell files (`/etc/sqm/*.iface.conf`) share the quoting
//! ([`words`]).
//!
//! Heads up! The syntax is libuci's `file.c` (what `uci export` writes), tokenized by
//! [`commands`]: `package NAME`, `config TYPE ['NAME']`, `option NAME ['VALUE']`, `list NAME
//! ['VALUE']` (or `p`, `c`, `o`, `l`). What the file means is what libuci makes of it, checked
//! against OpenWrt's own `uci` by tests/libuci.rs: a section named twice is one section (of one
//! type); an option said again replaces the earlier one and moves to the end; an empty option
//! unsets it; a `list` adds to what is there; names are letters, digits and `_`, a type any
//! printable ASCII. An anonymous section is `@TYPE[INDEX]`, as `uci show` names it.

mod commands;

pub use commands::{commands, Command, Word};

/// One `config TYPE ['NAME']` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub kind: String,
    pub name: Option<String>,
    /// How messages name it: `interface 'wan'`, or `@interface[1]` when it has no name.
    pub label: String,
    /// Its first `config` line (1-based).
    pub line: usize,
    /// Its options and lists as libuci holds them (in `uci show`'s order), each item of a list
    /// an entry of its own.
    pub options: Vec<UciOption>,
}

/// One `option NAME 'VALUE'` or `list NAME 'VALUE'` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciOption {
    pub name: String,
    pub value: String,
    /// An item of a list (`list`, or an `option` a later `list` added to).
    pub list: bool,
    pub line: usize,
}

/// Why a UCI file cannot be read: its line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UciError {
    pub line: usize,
    pub message: String,
}

/// The sections of `text`, merged as libuci merges them.
pub fn parse(text: &str) -> Result<Vec<Section>, UciError> {
    let commands = commands(text).map_err(|(line, message)| UciError { line, message })?;
    let mut sections: Vec<Section> = Vec::new();
    // The section options go to: the last one opened, or one named again.
    let mut current = None;
    for Command { line, words } in commands {
        let err = |message: String| UciError { line, message };
        let (keyword, args) = words.split_first().expect("a command has a word");
        let keyword = match keyword.quoted {
            false => keyword.text.as_str(),
            true => "",
        };
        let arg = |i: usize| args.get(i).map_or("", |w| w.text.as_str());
        if args.len() > 2 {
            return Err(err(format!(
                "too many words after `{}`; UCI writes `config TYPE 'NAME'` and `option NAME 'VALUE'`, quoting a value with spaces",
                crate::clip::clip(keyword)
            )));
        }
        match keyword {
            "package" | "p" => {}
            "config" | "c" => {
                let (kind, name) = (arg(0), arg(1));
                if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(err(format!(
                        "the section's type {:?} is not a UCI type (printable ASCII, no spaces)",
                        crate::clip::clip(kind)
                    )));
                }
                check_name(name, "section").map_err(err)?;
                let name = (!name.is_empty()).then(|| name.to_string());
                // A name said again: libuci goes on filling the section it has.
                if let Some(at) = sections
                    .iter()
                    .position(|s| name.is_some() && s.name == name)
                {
                    if sections[at].kind != kind {
                        return Err(err(format!(
                            "section '{}' was a `{}` above: one name, one type",
                            crate::clip::clip(arg(1)),
                            crate::clip::clip(&sections[at].kind),
                        )));
                    }
                    current = Some(at);
                    continue;
                }
                let index = sections.iter().filter(|s| s.kind == kind).count();
                let label = match &name {
                    Some(n) => format!("{} '{}'", crate::clip::clip(kind), crate::clip::clip(n)),
                    None => format!("@{}[{index}]", crate::clip::clip(kind)),
                };
                current = Some(sections.len());
                sections.push(Section {
                    kind: kind.to_string(),
                    name,
                    label,
                    line,
                    options: Vec::new(),
                });
            }
            "option" | "o" | "list" | "l" => {
                let Some(s) = current.map(|at| &mut sections[at]) else {
                    return Err(err(format!("`{keyword}` before any `config` section")));
                };
                let (name, value) = (arg(0), arg(1));
                if name.is_empty() {
                    return Err(err(format!("`{keyword}` without a name")));
                }
                check_name(name, "option").map_err(err)?;
                let item = UciOption {
                    name: name.to_string(),
                    value: value.to_string(),
                    list: keyword.starts_with('l'),
                    line,
                };
                set(&mut s.options, item);
            }
            other => {
                return Err(err(format!(
                    "{:?} is not a UCI command (package, config, option or list)",
                    crate::clip::clip(other)
                )))
            }
        }
    }
    Ok(sections)
}

/// An option or a list item into a section's options, as libuci's `uci_set` and
/// `uci_add_list` do.
fn set(options: &mut Vec<UciOption>, item: UciOption) {
    if item.list {
        match options.iter().rposition(|o| o.name == item.name) {
            Some(last) => {
                for o in options.iter_mut().filter(|o| o.name == item.name) {
                    o.list = true;
                }
                options.insert(last + 1, item);
            }
            None => options.push(item),
        }
    } else {
        options.retain(|o| o.name != item.name);
        if !item.value.is_empty() {
            options.push(item);
        }
    }
}

/// libuci's `uci_validate_name`: letters, digits and `_`, for section and option names (an
/// empty section name is an anonymous section).
fn check_name(name: &str, what: &str) -> Result<(), String> {
    match name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        true => Ok(()),
        false => Err(format!(
            "the {what} name {:?} is not a UCI name (letters, digits and _ only)",
            crate::clip::clip(name)
        )),
    }
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
        let e = parse("config interface 'wan'\n\toption down 1 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("too many words"), "{}", e.message);
        let e = parse("option down '1mbit'\n").unwrap_err();
        assert!(e.message.contains("before any `config`"), "{}", e.message);
        let e = parse("config interface 'wan\n").unwrap_err();
        assert!(e.message.contains("never closed"), "{}", e.message);
    }
}
