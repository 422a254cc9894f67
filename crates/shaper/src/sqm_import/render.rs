//! The import as text: unbloat's TOML, each key with a comment naming the sqm options it came
//! from, disabled queues commented out; and the notes, one per line.
//!
//! What callers can rely on: [`ConfigFile`](crate::config::ConfigFile) reads the TOML back to
//! exactly [`Imported::options`] for every enabled interface (a test checks every golden case),
//! and a disabled table, uncommented, to its options too.

use super::model::{Import, Imported, NoteKind};
use crate::options::value::toml_string;
use crate::options::{ShapeOptions, OPTIONS};

/// The TOML for `import`, read from `source` (a path, for the header).
pub fn toml(import: &Import, source: &str) -> String {
    let mut out = format!(
        "# unbloat configuration imported from {} by `unbloat config import-sqm`.\n\
         # Each key's comment names the sqm options it came from; what did not carry over is in\n\
         # the notes the import printed. Check: unbloat config check FILE; see the commands:\n\
         # unbloat plan --config FILE\n",
        comment_text(source)
    );
    if import.interfaces.iter().all(|i| !i.enabled) {
        out.push_str("#\n# No queue is enabled in sqm: this file shapes nothing until a table is uncommented.\n");
    }
    for i in &import.interfaces {
        out.push('\n');
        out.push_str(&table(i));
    }
    out
}

/// One interface's table, commented out when the queue is disabled.
pub fn table(i: &Imported) -> String {
    let mut lines = vec![format!(
        "# {} (line {}): {}",
        comment_text(&i.queue),
        i.line,
        i.script.name()
    )];
    if !i.enabled {
        lines.push(format!(
            "# Disabled in sqm: uncomment the lines below to shape {}.",
            i.iface
        ));
    }
    let mut body = vec![format!("[interface.{}]", toml_key(i.iface.as_str()))];
    for (key, value) in values(&i.options) {
        let line = format!("{key} = {value}");
        match i.comments.iter().find(|(k, _)| k == key) {
            Some((_, c)) if !c.is_empty() => {
                body.push(format!("{line:<31} # {}", comment_text(c)));
            }
            _ => body.push(line),
        }
    }
    for b in body {
        lines.push(if i.enabled { b } else { format!("# {b}") });
    }
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// The same import as OpenWrt's UCI, for `/etc/config/unbloat`: a `config interface` section
/// per queue, named like sqm's, with `option enabled '0'` for a disabled one (UCI has no
/// commented-out section that `uci` keeps), each option by its UCI name and each classification
/// rule a `list` line. [`ConfigFile`](crate::config::ConfigFile) reads it back to the same options.
pub fn uci(import: &Import, source: &str) -> String {
    let mut out = format!(
        "# unbloat configuration imported from {} by `unbloat config import-sqm --uci`.\n\
         # Each option's comment names the sqm options it came from (`uci commit` drops comments).\n\
         # Check: unbloat config check /etc/config/unbloat\n",
        comment_text(source)
    );
    let mut names: Vec<String> = Vec::new();
    for i in &import.interfaces {
        // sqm's section name where it has one (`queue 'wan'`), else the device's; once each.
        let base: String = i
            .queue
            .split_once('\'')
            .and_then(|(_, r)| r.strip_suffix('\''))
            .unwrap_or(i.iface.as_str())
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut name = base.clone();
        let mut n = 1;
        while names.contains(&name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        names.push(name.clone());
        out.push_str(&format!(
            "\n# {} (line {}): {}\nconfig interface '{name}'\n\toption interface {}\n",
            comment_text(&i.queue),
            i.line,
            i.script.name(),
            uci_value(i.iface.as_str())
        ));
        if !i.enabled {
            out.push_str("\toption enabled '0'\n");
        }
        for opt in OPTIONS {
            let values = opt.field.show_each(&i.options);
            let list = opt.field.kind() == crate::options::value::Kind::List;
            let comment = i
                .comments
                .iter()
                .find(|(k, c)| k == opt.key && !c.is_empty())
                .map(|(_, c)| format!(" # {}", comment_text(c)))
                .unwrap_or_default();
            for v in values {
                let word = if list { "list" } else { "option" };
                out.push_str(&format!(
                    "\t{word} {} {}{comment}\n",
                    opt.uci_name(),
                    uci_value(&v)
                ));
            }
        }
    }
    out
}

/// A UCI value in single quotes, a quote inside written as `'\''` (as `uci export` does).
fn uci_value(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// The notes for people: all but the mapped ones (the TOML's comments say those), one per line.
pub fn notes(import: &Import) -> String {
    import
        .notes
        .iter()
        .filter(|n| n.kind != NoteKind::Mapped)
        .map(|n| format!("{n}\n"))
        .collect()
}

/// (key, TOML value) for every option the table sets, in the order the options are declared.
pub fn values(o: &ShapeOptions) -> Vec<(&'static str, String)> {
    OPTIONS
        .iter()
        .filter_map(|opt| opt.field.toml(o).map(|v| (opt.key, v)))
        .collect()
}

/// A table name part: bare when TOML allows it, quoted otherwise (`"eth0.2"`).
pub fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        k.to_string()
    } else {
        toml_string(k)
    }
}

/// Text a comment can hold: one line, cut to a length a reader takes in.
fn comment_text(t: &str) -> String {
    let one: String = t
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one.char_indices().nth(400) {
        Some((cut, _)) => format!("{}…", &one[..cut]),
        None => one,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqm_render_quotes_what_toml_needs() {
        assert_eq!(toml_key("eth0"), "eth0");
        assert_eq!(toml_key("eth0.2"), "\"eth0.2\"");
        assert_eq!(comment_text("a\nb"), "a b");
    }
}
