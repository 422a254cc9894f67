//! A Wi-Fi network's name as 802.11 carries it: 1 to 32 octets, not always UTF-8 (IEEE
//! 802.11-2020 9.4.2.2). The kernel hands it over as bytes (nl80211's `NL80211_ATTR_SSID`); a
//! config file writes it as a TOML string, so what can be configured is the UTF-8 ones, and they
//! are compared byte for byte: "Home" is not "home".

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::clip::clip;

/// The longest SSID 802.11 allows, in octets.
pub const MAX_SSID: usize = 32;

/// An SSID, 1 to [`MAX_SSID`] octets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ssid(Vec<u8>);

impl Ssid {
    /// The octets the kernel reported; `None` when there are none or too many (a hidden
    /// network's beacon, a driver's mistake): no SSID to recognise.
    pub fn from_octets(octets: &[u8]) -> Option<Ssid> {
        (!octets.is_empty() && octets.len() <= MAX_SSID).then(|| Ssid(octets.to_vec()))
    }

    pub fn octets(&self) -> &[u8] {
        &self.0
    }
}

impl FromStr for Ssid {
    type Err = String;

    fn from_str(s: &str) -> Result<Ssid, String> {
        if s.is_empty() {
            return Err(
                "an empty SSID names no network; write the Wi-Fi network's name as `iw dev` or `nmcli -f SSID dev wifi` shows it".into(),
            );
        }
        if s.len() > MAX_SSID {
            return Err(format!(
                "{:?} is {} bytes; an SSID is at most {MAX_SSID} (IEEE 802.11)",
                clip(s),
                s.len()
            ));
        }
        Ok(Ssid(s.as_bytes().to_vec()))
    }
}

/// Printable as it is (a UTF-8 SSID's letters too: "Café"), every other octet and `\` as
/// `\xNN`, as `iw` does: two SSIDs that differ print differently, and nothing a neighbour's
/// beacon carries reaches a terminal or the log as a control character.
impl fmt::Display for Ssid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let escape = |f: &mut fmt::Formatter<'_>, bytes: &[u8]| -> fmt::Result {
            bytes.iter().try_for_each(|b| write!(f, "\\x{b:02x}"))
        };
        match std::str::from_utf8(&self.0) {
            Ok(text) => {
                for c in text.chars() {
                    if c.is_control() || c == '\\' || invisible(c) {
                        escape(f, c.encode_utf8(&mut [0; 4]).as_bytes())?;
                    } else {
                        write!(f, "{c}")?;
                    }
                }
                Ok(())
            }
            Err(_) => {
                for &b in &self.0 {
                    if (0x20..0x7f).contains(&b) && b != b'\\' {
                        write!(f, "{}", b as char)?;
                    } else {
                        escape(f, &[b])?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Unicode's format characters that reorder or hide text (bidi overrides, zero widths): a
/// beacon could make one SSID print as another with them.
fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

impl Serialize for Ssid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ssid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ssid, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ssid_is_one_to_32_bytes_compared_exactly() {
        let home: Ssid = "Home".parse().unwrap();
        assert_ne!(home, "home".parse().unwrap());
        assert!("".parse::<Ssid>().unwrap_err().contains("empty SSID"));
        let long = "x".repeat(33);
        assert!(long.parse::<Ssid>().unwrap_err().contains("33 bytes"));
        // 32 bytes of UTF-8 is 16 two-byte letters: still one SSID.
        assert!("é".repeat(16).parse::<Ssid>().is_ok());
        assert!("é".repeat(17).parse::<Ssid>().is_err());
        assert_eq!(Ssid::from_octets(b""), None);
        assert_eq!(Ssid::from_octets(&[b'a'; 33]), None);
        assert_eq!(Ssid::from_octets(b"Home"), Some(home));
    }

    #[test]
    fn it_prints_control_octets_and_non_ascii_escaped() {
        let cafe = Ssid::from_octets("Café\n\x1b[2J\\".as_bytes()).unwrap();
        assert_eq!(cafe.to_string(), "Café\\x0a\\x1b[2J\\x5c");
        // Not UTF-8: every octet outside printable ASCII escaped.
        let latin1 = Ssid::from_octets(b"Caf\xe9\x07").unwrap();
        assert_eq!(latin1.to_string(), "Caf\\xe9\\x07");
        let turned = Ssid::from_octets("a\u{202e}b".as_bytes()).unwrap();
        assert_eq!(turned.to_string(), "a\\xe2\\x80\\xaeb");
    }
}
