//! The web page's token: what a request that changes anything must carry
//! (`Authorization: Bearer TOKEN`).
//!
//! A new one at each daemon start: 32 bytes from the kernel's random pool (`/dev/urandom`),
//! written as 64 hex digits to `web-token` in the run directory, readable by root only (0600 in a
//! 0700 directory), and never logged: the daemon's start line says where the file is (the
//! journal is readable by more than root). Compared in constant time, so
//! the time an answer takes says nothing about how much of a guess was right.

use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// 256 bits: not guessable through an HTTP port, whatever the rate of guesses.
const TOKEN_BYTES: usize = 32;
/// The file's name in the run directory.
pub const TOKEN_FILE: &str = "web-token";

#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    // Never in a log line or a panic message by accident.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A fresh token from `/dev/urandom`.
    pub fn generate() -> io::Result<Token> {
        let mut bytes = [0u8; TOKEN_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|e| io::Error::new(e.kind(), format!("reading /dev/urandom: {e}")))?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// A given token (tests).
    pub fn from_text(text: &str) -> Token {
        Token(text.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Writes the token to `dir/web-token`, mode 0600, replacing an old one (a file left by a
    /// daemon that ended is not reused: its token may have been seen). The path.
    pub fn write(&self, dir: &Path) -> io::Result<PathBuf> {
        let path = dir.join(TOKEN_FILE);
        let _ = std::fs::remove_file(&path);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        // The umask cannot widen 0600, but a mode set explicitly says what is meant.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        writeln!(f, "{}", self.0)?;
        Ok(path)
    }

    /// Whether `given` is this token, in time that does not depend on where they differ.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// Whether an `Authorization` header's value carries this token (`Bearer TOKEN`).
    pub fn authorizes(&self, header: Option<&str>) -> bool {
        header
            .and_then(|h| h.strip_prefix("Bearer "))
            .is_some_and(|t| self.matches(t.trim()))
    }

    /// Whether a `Cookie` header carries this token as [`COOKIE`] (what `POST /api/token` sets,
    /// so that the runs' links and images, which cannot send a header, are read with it).
    pub fn in_cookie(&self, header: Option<&str>) -> bool {
        header.is_some_and(|h| {
            h.split(';')
                .filter_map(|c| c.trim().split_once('='))
                .any(|(name, value)| name == COOKIE && self.matches(value))
        })
    }

    /// The `Set-Cookie` value that carries the token: only to `/runs/`, never to scripts
    /// (HttpOnly), never on a request another site starts (SameSite=Strict). It authorizes reads
    /// of the runs' files and nothing else: changes still need the header.
    pub fn cookie(&self) -> String {
        format!(
            "{COOKIE}={}; Path=/runs/; HttpOnly; SameSite=Strict",
            self.0
        )
    }
}

/// The cookie's name.
pub const COOKIE: &str = "unbloat-token";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_hex_and_only_the_whole_token_matches() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_eq!(a.as_str().len(), 64);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.as_str(), b.as_str());
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(&a.as_str()[..63]));
        assert!(!a.matches(""));
        assert!(a.authorizes(Some(&format!("Bearer {}", a.as_str()))));
        assert!(!a.authorizes(Some(a.as_str())));
        assert!(!a.authorizes(None));
    }

    #[test]
    fn the_file_is_root_only_and_replaced() {
        let scratch = crate::web::scratch::Scratch::new("token");
        let dir = scratch.path();
        let t = Token::from_text("abc");
        let path = t.write(dir).unwrap();
        Token::from_text("def").write(dir).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "def\n");
    }
}
