//! One table of the config written into the file's own text: each changed value replaced where
//! the parser found it, a removed key's line taken out, new keys added after the table's last
//! line, a new table at the end of the file. Everything else (comments, order, blank lines, the
//! other tables) stays byte for byte. The result is read back and must hold exactly what was
//! asked; otherwise [`Unsupported`] says to use the TOML editor rather than guess.
//!
//! The parser is toml's own, with the span of every key and value (`toml::de::DeTable`): the
//! router build carries one TOML parser, not a second one for editing.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::tomlread::line_start;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A table that cannot be edited in place: written in a form other than `[parent.name]` with
/// `key = value` lines (an inline table, dotted keys), or under a parent that is not a table.
#[derive(Debug, PartialEq, Eq)]
pub struct Unsupported;

/// The file's tables with the spans of their keys and values; refused, the parser's message
/// (with the line it quotes).
pub fn parse(text: &str) -> Result<DeTable<'_>, String> {
    DeTable::parse(text)
        .map(Spanned::into_inner)
        .map_err(|e| e.to_string().trim().to_string())
}

/// A value as the form shows it: a string without its quotes, anything else as the file writes
/// it; a table is not a value.
pub fn shown(text: &str, v: &Spanned<DeValue>) -> Option<String> {
    match v.get_ref() {
        DeValue::String(s) => Some(s.to_string()),
        DeValue::Table(_) => None,
        _ => text.get(v.span()).map(|t| t.trim().to_string()),
    }
}

/// The table's keys the form can show, with their values.
pub fn values(text: &str, t: &DeTable) -> BTreeMap<String, String> {
    t.iter()
        .filter_map(|(k, v)| Some((k.get_ref().to_string(), shown(text, v)?)))
        .collect()
}

/// The tables under `parent` (for example each `[interface.NAME]`) in the file's order.
pub fn tables<'d, 't>(root: &'d DeTable<'t>, parent: &str) -> Vec<(String, &'d DeTable<'t>)> {
    let Some(DeValue::Table(all)) = root.get(parent).map(Spanned::get_ref) else {
        return vec![];
    };
    let mut found: Vec<_> = all
        .iter()
        .filter_map(|(k, v)| match v.get_ref() {
            DeValue::Table(t) => Some((v.span().start, k.get_ref().to_string(), t)),
            _ => None,
        })
        .collect();
    found.sort_by_key(|(at, ..)| *at);
    found.into_iter().map(|(_, name, t)| (name, t)).collect()
}

/// `text` (parsed as `root`) with the table `[parent.name]` changed: each `(key, Some(value))`
/// set to `value` (TOML text, as [`string`] writes a string), each `(key, None)` removed. New
/// keys go in the order given; a missing table is created at the end of the file.
pub fn set(
    text: &str,
    root: &DeTable,
    parent: &str,
    name: &str,
    changes: &[(&str, Option<String>)],
) -> Result<String, Unsupported> {
    let mut splices: Vec<(Range<usize>, String)> = vec![];
    let mut added = String::new();
    let existing = match root.get(parent) {
        None => None,
        Some(all) => {
            let DeValue::Table(all) = all.get_ref() else {
                return Err(Unsupported);
            };
            // A new `[parent.name]` at the end only adds to a parent written as headers.
            if !all.values().all(|t| is_header_table(text, t)) {
                return Err(Unsupported);
            }
            all.get(name)
        }
    };
    let Some(table) = existing else {
        for (key, value) in changes {
            if let Some(v) = value {
                added.push_str(&format!("{} = {v}\n", key_text(key)));
            }
        }
        let gap = match text {
            "" => "",
            t if t.ends_with("\n\n") => "",
            t if t.ends_with('\n') => "\n",
            _ => "\n\n",
        };
        let header = format!("[{}.{}]\n", key_text(parent), key_text(name));
        let new = format!("{text}{gap}{header}{added}");
        return checked(new, parent, name, changes);
    };
    let DeValue::Table(entries) = table.get_ref() else {
        return Err(Unsupported);
    };
    // New keys follow the table's last `key = value` line (its header's if it has none); a
    // `[parent.name.sub]` table below it is another table's text.
    let mut last = table.span().end;
    for (k, v) in entries.iter() {
        if !is_header_table(text, v) {
            last = last.max(k.span().end).max(v.span().end);
        }
    }
    let insert_at = line_end(text, last);
    for (key, value) in changes {
        match (entries.get_key_value(*key), value) {
            (Some((_, v)), _) if matches!(v.get_ref(), DeValue::Table(_)) => {
                return Err(Unsupported)
            }
            (Some((_, v)), Some(new)) => splices.push((v.span(), new.clone())),
            (Some((k, v)), None) => splices.push((
                line_start(text, k.span().start)..line_end(text, v.span().end),
                String::new(),
            )),
            (None, Some(new)) => added.push_str(&format!("{} = {new}\n", key_text(key))),
            (None, None) => {}
        }
    }
    if !added.is_empty() {
        if insert_at == text.len() && !text.ends_with('\n') {
            added.insert(0, '\n');
        }
        splices.push((insert_at..insert_at, added));
    }
    // From the end back, so each range still points at the text it was found in.
    splices.sort_by_key(|(r, _)| std::cmp::Reverse((r.start, r.end)));
    let mut new = text.to_string();
    for (range, with) in splices {
        new.replace_range(range, &with);
    }
    checked(new, parent, name, changes)
}

/// `new` if it parses and its `[parent.name]` holds exactly the changes.
fn checked(
    new: String,
    parent: &str,
    name: &str,
    changes: &[(&str, Option<String>)],
) -> Result<String, Unsupported> {
    let root = parse(&new).map_err(|_| Unsupported)?;
    let table = match root.get(parent).map(Spanned::get_ref) {
        Some(DeValue::Table(all)) => match all.get(name).map(Spanned::get_ref) {
            Some(DeValue::Table(t)) => t,
            _ => return Err(Unsupported),
        },
        _ => return Err(Unsupported),
    };
    let holds = changes.iter().all(|(key, value)| {
        let found = table.get(*key).and_then(|v| new.get(v.span()));
        found == value.as_deref()
    });
    if holds {
        Ok(new)
    } else {
        Err(Unsupported)
    }
}

/// A TOML basic string holding `s`.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A key as TOML writes it: bare when it can be, a string otherwise.
fn key_text(key: &str) -> String {
    let bare = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if !key.is_empty() && key.chars().all(bare) {
        key.to_string()
    } else {
        string(key)
    }
}

/// A table written as a `[header]` (its span is the header's).
fn is_header_table(text: &str, v: &Spanned<DeValue>) -> bool {
    matches!(v.get_ref(), DeValue::Table(_))
        && text.get(v.span()).is_some_and(|t| t.starts_with('['))
}

fn line_end(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}

#[cfg(test)]
#[path = "tomlsplice_tests.rs"]
mod tests;
