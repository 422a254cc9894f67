//! Cutting what a user typed down to a length an error message can repeat.
//!
//! Errors name the value they refuse, but a value can be anything a file holds: a 10 MB key, a
//! line of a binary file read by mistake. Callers can rely on every error of this crate repeating
//! at most [`MAX_ECHO`] characters of any one piece of user text, followed by `…` when it was
//! cut, and on [`clip_quoted`] doing the same inside messages of other crates (toml's, the units
//! crate's) that quote what they were given.

use std::borrow::Cow;

/// The most characters of one piece of user text an error message repeats.
pub const MAX_ECHO: usize = 64;
/// The most characters of a whole message built around foreign text ([`clip_quoted`]).
pub const MAX_MESSAGE: usize = 1024;

/// `text` as it is when it has at most [`MAX_ECHO`] characters, else its first [`MAX_ECHO`]
/// characters and `…`.
pub fn clip(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(MAX_ECHO) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => Cow::Owned(format!("{}…", &text[..cut])),
    }
}

/// `message` with every quoted piece (between backticks or double quotes) and every word longer
/// than [`MAX_ECHO`] characters cut by [`clip`], and the whole cut to [`MAX_MESSAGE`] characters:
/// for messages whose text this crate does not build itself. Linear in the message's length.
pub fn clip_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE + 8));
    let mut rest = message;
    while !rest.is_empty() {
        // The next piece: a quoted run (delimiters kept), or a word, or the spaces before one.
        let len = match rest.chars().next() {
            Some(q @ ('`' | '"')) => rest[1..].find(q).map_or(rest.len(), |end| end + 2),
            Some(c) if c.is_whitespace() => rest
                .find(|c: char| !c.is_whitespace())
                .unwrap_or(rest.len()),
            _ => rest
                .find(|c: char| c.is_whitespace() || c == '`' || c == '"')
                .unwrap_or(rest.len()),
        };
        let (piece, tail) = rest.split_at(len);
        out.push_str(&clip(piece));
        rest = tail;
        if out.len() > MAX_MESSAGE * 4 {
            break;
        }
    }
    clip_to(&out, MAX_MESSAGE)
}

fn clip_to(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_long_text_is_cut() {
        assert_eq!(clip("eth0"), "eth0");
        let long = "x".repeat(10_000_000);
        let c = clip(&long);
        assert_eq!(c.chars().count(), MAX_ECHO + 1);
        assert!(c.ends_with('…'));
        // Characters, not bytes: never a cut inside a UTF-8 sequence.
        let wide = "é".repeat(100);
        assert_eq!(clip(&wide).chars().count(), MAX_ECHO + 1);
    }

    #[test]
    fn quoted_pieces_of_foreign_messages_are_cut() {
        let key = "k".repeat(1_000_000);
        let m = clip_quoted(&format!(
            "unknown field `{key}`, expected one of `down`, `up`"
        ));
        assert!(m.starts_with("unknown field `kkkk"), "{m}");
        assert!(m.ends_with("…, expected one of `down`, `up`"), "{m}");
        assert!(m.len() < 200, "{}", m.len());
        let m = clip_quoted(&format!("invalid rate \"{}\"", "9".repeat(5000)));
        assert!(m.len() < 100, "{m}");
        // A message of many short words is cut as a whole.
        let m = clip_quoted(&"word ".repeat(100_000));
        assert_eq!(m.chars().count(), MAX_MESSAGE + 1);
        assert_eq!(clip_quoted("a `b` \"c\" d"), "a `b` \"c\" d");
        assert_eq!(clip_quoted("open `quote"), "open `quote");
    }
}
