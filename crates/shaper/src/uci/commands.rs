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
///
/// Bytes, not characters: every byte libuci treats specially is ASCII, so a word is cut only
/// between characters and stays UTF-8.
pub fn commands(text: &str) -> Result<Vec<Command>, (usize, String)> {
    let mut lexer = Lexer {
        bytes: text.as_bytes(),
        at: 0,
        line: 1,
    };
    let mut out: Vec<Command> = Vec::new();
    // Whether the last command is still taking words.
    let mut open = false;
    while let Some(b) = lexer.peek() {
        match b {
            b'\n' | b';' | b'#' => {
                if b == b'#' {
                    while lexer.peek().is_some_and(|b| b != b'\n') {
                        lexer.at += 1;
                    }
                    continue;
                }
                lexer.next();
                open = false;
            }
            b' ' | b'\t' | b'\r' | 0x0b | 0x0c => lexer.at += 1,
            _ => {
                let line = lexer.line;
                let word = lexer.word()?;
                match out.last_mut() {
                    Some(c) if open => c.words.push(word),
                    _ => out.push(Command {
                        line,
                        words: vec![word],
                    }),
                }
                open = true;
            }
        }
    }
    Ok(out)
}

struct Lexer<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// The next byte, counting lines.
    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        self.line += usize::from(b == b'\n');
        Some(b)
    }

    /// One word, up to (not including) whitespace, `;`, `#` or the end.
    fn word(&mut self) -> Result<Word, (usize, String)> {
        let opened = self.line;
        let mut text = Vec::new();
        let mut quoted = false;
        while let Some(b) = self.peek() {
            if b.is_ascii_whitespace() || matches!(b, 0x0b | b';' | b'#') {
                break;
            }
            self.at += 1;
            if !matches!(b, b'\'' | b'"' | b'\\') {
                text.push(b);
                continue;
            }
            quoted = true;
            if b == b'\\' {
                self.backslash(&mut text);
                continue;
            }
            // Up to the same quote, newlines too; in double quotes a backslash escapes.
            loop {
                match self.next() {
                    Some(q) if q == b => break,
                    Some(b'\\') if b == b'"' => self.backslash(&mut text),
                    Some(c) => text.push(c),
                    None => {
                        return Err((opened, format!("a quote ({}) is never closed", b as char)))
                    }
                }
            }
        }
        let text = String::from_utf8(text).expect("cut between characters");
        Ok(Word { text, quoted })
    }

    /// After a backslash: the next byte as itself, or nothing when the line ends there (the next
    /// line continues this one, after `\r\n` too).
    fn backslash(&mut self, text: &mut Vec<u8>) {
        if self.peek() == Some(b'\r') && self.bytes.get(self.at + 1) == Some(&b'\n') {
            self.at += 1;
        }
        match self.next() {
            Some(b'\n') | None => {}
            Some(c) => text.push(c),
        }
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
