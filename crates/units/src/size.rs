//! Sizes in bytes, with tc's suffixes (tc(8), "SIZES"; iproute2 tc/tc_util.c `get_size`).

use crate::{number, serde_via_text, UnitError};
use std::fmt;
use std::str::FromStr;

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Size(u64);

/// tc's size suffixes in bytes; note that tc's `k` is 1024 and `kbit` is 1024 bits.
const SUFFIXES: &[(&str, u128)] = &[
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("kb", 1 << 10),
    ("m", 1 << 20),
    ("mb", 1 << 20),
    ("g", 1 << 30),
    ("gb", 1 << 30),
];
/// Bit suffixes, in bits (divided by 8 when parsed).
const BIT_SUFFIXES: &[(&str, u128)] = &[("kbit", 1 << 10), ("mbit", 1 << 20), ("gbit", 1 << 30)];

impl Size {
    pub const fn from_bytes(bytes: u64) -> Size {
        Size(bytes)
    }
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for Size {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Size, UnitError> {
        let err = |r: String| UnitError::new("size", s, r);
        let (dec, unit) = number::split(s).map_err(err)?;
        let (factor, divisor) = if let Some((_, v)) = SUFFIXES.iter().find(|(n, _)| *n == unit) {
            (*v, 1)
        } else if let Some((_, v)) = BIT_SUFFIXES.iter().find(|(n, _)| *n == unit) {
            (*v, 8)
        } else {
            return Err(err(format!(
                "unknown unit {unit:?}; use b, k (1024 bytes), m, or kbit, mbit as tc does"
            )));
        };
        dec.scaled(factor, divisor)
            .map(Size)
            .map_err(|r| err(r.to_string()))
    }
}

impl fmt::Display for Size {
    /// Plain bytes with tc's `b` suffix, which tc parses back exactly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}b", self.0)
    }
}

serde_via_text!(Size, |v| Ok(Size(v)));

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_tc_spellings() {
        for (t, b) in [
            ("1514", 1514),
            ("64b", 64),
            ("6k", 6144),
            ("1mb", 1 << 20),
            ("2kbit", 256),
        ] {
            assert_eq!(t.parse::<Size>(), Ok(Size(b)), "{t}");
        }
        for bad in ["6kk", "-1", "1.5b", "x"] {
            assert!(bad.parse::<Size>().is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn display_parses_back(b in any::<u64>()) {
            prop_assert_eq!(Size(b).to_string().parse::<Size>(), Ok(Size(b)));
        }
    }
}
