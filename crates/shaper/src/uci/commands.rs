//! libuci's tokenizer (`file.c`: `uci_parse_line`, `parse_str`, `parse_single_quote`,
//! `parse_double_quote`, `parse_backslash`), over the whole text rather than line by line, since a
//! quoted value may span lines. What it does, checked against OpenWrt's own `uci` by
//! tests/libuci.rs:
//! - a command ends at an unquoted newline, at `;`, or at `#`, which comments out the rest of
//!   the line wherever it stands outside quotes (`a#b` is `a`);
//! - `'...'` takes everything up to the next quote, newlines too; `"..."` the same, where `\c`
//!   is `c` for any `c`; outside quotes `\c` is `c`; a backslash before a newline joins the lines;
//! - pieces next to each other are one word (`'it'\''s'`); `''` is an empty word, which libuci
//!   counts as no word where one is required.
//!
//! Nothing is expanded: `$HOME` is those five characters, as libuci leaves it.

/// One command: its first line (for messages) and its words, the first being the keyword.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub line: usize,
    pub words: Vec<Word>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// Some of it was quoted or escaped: libuci reads its keywords only bare.
    pub quoted: bool,
}

/// The commands of `text`, or the line where a quote is left open and what is wrong.
pub fn commands(text: &str) -> Result<Vec<Command>, (usize, String)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    // The words of the command being read, and the line it started on.
    let mut words: Vec<Word> = Vec::new();
    let mut start = 1;
    let mut end = |words: &mut Vec<Word>, start: usize| {
        if !words.is_empty() {
            out.push(Command {
                line: start,
                words: std::mem::take(words),
            });
        }
    };
    while let Some(&c) = chars.peek() {
        match c {
            '\n' => {
                chars.next();
                end(&mut words, start);
                line += 1;
            }
            ';' => {
                chars.next();
                end(&mut words, start);
            }
            '#' => {
                while chars.next_if(|&c| c != '\n').is_some() {}
                end(&mut words, start);
            }
            c if c.is_ascii_whitespace() || c == '\u{b}' => {
                chars.next();
            }
            _ => {
                if words.is_empty() {
                    start = line;
                }
                words.push(word(&mut chars, &mut line)?);
            }
        }
    }
    end(&mut words, start);
    Ok(out)
}

/// One word, from its first character up to (not including) whitespace, `;`, `#` or the end.
fn word(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    line: &mut usize,
) -> Result<Word, (usize, String)> {
    let mut w = Word {
        text: String::new(),
        quoted: false,
    };
    let opened = *line;
    let take = |c: char, w: &mut Word, line: &mut usize| {
        if c == '\n' {
            *line += 1;
        }
        w.text.push(c);
    };
    while let Some(&c) = chars.peek() {
        if c.is_ascii_whitespace() || c == '\u{b}' || c == ';' || c == '#' {
            break;
        }
        chars.next();
        match c {
            '\'' => {
                w.quoted = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => take(c, &mut w, line),
                        None => return Err((opened, "a quote (') is never closed".into())),
                    }
                }
            }
            '"' => {
                w.quoted = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => backslash(chars, &mut w, line),
                        Some(c) => take(c, &mut w, line),
                        None => return Err((opened, "a quote (\") is never closed".into())),
                    }
                }
            }
            '\\' => {
                w.quoted = true;
                backslash(chars, &mut w, line)
            }
            c => w.text.push(c),
        }
    }
    Ok(w)
}

/// After a backslash: the next character as itself, or nothing when the line ends there (the
/// next line continues this one, `\r\n` too).
fn backslash(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, w: &mut Word, line: &mut usize) {
    match chars.next() {
        Some('\n') => *line += 1,
        Some('\r') if chars.peek() == Some(&'\n') => {
            chars.next();
            *line += 1;
        }
        Some(c) => w.text.push(c),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<(usize, Vec<String>)> {
        commands(text)
            .unwrap()
            .into_iter()
            .map(|c| (c.line, c.words.into_iter().map(|w| w.text).collect()))
            .collect()
    }

    #[test]
    fn commands_end_at_newlines_semicolons_and_comments() {
        assert_eq!(
            texts("config a 'b'; option c d#e\n\n  list f 'g;h' # i\n"),
            [
                (1, vec!["config".into(), "a".into(), "b".into()]),
                (1, vec!["option".into(), "c".into(), "d".into()]),
                (3, vec!["list".into(), "f".into(), "g;h".into()]),
            ]
        );
    }

    #[test]
    fn quotes_span_lines_and_backslashes_join_them() {
        assert_eq!(
            texts("option a 'x\ny'\noption b \"\\\"q\\\\\" c\\\nd\noption e 'it'\\''s'\n"),
            [
                (1, vec!["option".into(), "a".into(), "x\ny".into()]),
                (
                    3,
                    vec!["option".into(), "b".into(), "\"q\\".into(), "cd".into()]
                ),
                (5, vec!["option".into(), "e".into(), "it's".into()]),
            ]
        );
        assert_eq!(commands("option a 'x\n\n").unwrap_err().0, 1);
    }
}
