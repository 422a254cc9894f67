//! DiffServ code points (RFC 2474 §3, names from RFC 2597 (AF), RFC 3246 (EF), RFC 5865 (VA),
//! RFC 8622 (LE)). The DSCP is the upper six bits of the IPv4 TOS / IPv6 traffic class byte.

use crate::{serde_via_text, UnitError};
use std::fmt;
use std::str::FromStr;

/// A 6-bit DSCP value, 0..=63.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dscp(u8);

const NAMES: &[(&str, u8)] = &[
    ("CS0", 0),
    ("LE", 1),
    ("CS1", 8),
    ("AF11", 10),
    ("AF12", 12),
    ("AF13", 14),
    ("CS2", 16),
    ("AF21", 18),
    ("AF22", 20),
    ("AF23", 22),
    ("CS3", 24),
    ("AF31", 26),
    ("AF32", 28),
    ("AF33", 30),
    ("CS4", 32),
    ("AF41", 34),
    ("AF42", 36),
    ("AF43", 38),
    ("CS5", 40),
    ("VA", 44),
    ("EF", 46),
    ("CS6", 48),
    ("CS7", 56),
];

impl Dscp {
    pub const BE: Dscp = Dscp(0);
    pub const LE: Dscp = Dscp(1);
    pub const CS1: Dscp = Dscp(8);
    pub const AF42: Dscp = Dscp(36);
    pub const CS5: Dscp = Dscp(40);
    pub const EF: Dscp = Dscp(46);
    pub const CS6: Dscp = Dscp(48);
    pub const CS7: Dscp = Dscp(56);

    pub fn new(value: u8) -> Result<Dscp, UnitError> {
        if value < 64 {
            Ok(Dscp(value))
        } else {
            Err(UnitError::new(
                "DSCP",
                &value.to_string(),
                "must be 0..63 (six bits)",
            ))
        }
    }
    pub const fn value(self) -> u8 {
        self.0
    }
    /// The whole TOS / traffic class byte with ECN bits clear: `dscp << 2`.
    pub const fn tos(self) -> u8 {
        self.0 << 2
    }
    /// The name, if this code point has one (`EF`, `CS1`, ...).
    pub fn name(self) -> Option<&'static str> {
        NAMES.iter().find(|(_, v)| *v == self.0).map(|(n, _)| *n)
    }
}

impl FromStr for Dscp {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Dscp, UnitError> {
        let t = s.trim();
        let upper = t.to_ascii_uppercase();
        if upper == "BE" || upper == "DF" {
            return Ok(Dscp::BE);
        }
        if let Some((_, v)) = NAMES.iter().find(|(n, _)| *n == upper) {
            return Ok(Dscp(*v));
        }
        let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u8::from_str_radix(hex, 16),
            None => t.parse::<u8>(),
        };
        match parsed {
            Ok(v) => {
                Dscp::new(v).map_err(|_| UnitError::new("DSCP", s, "must be 0..63 (six bits)"))
            }
            Err(_) => Err(UnitError::new(
                "DSCP",
                s,
                "use a number 0..63 or a name like EF, CS1, AF41, LE",
            )),
        }
    }
}

impl fmt::Display for Dscp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

serde_via_text!(Dscp, |v| u8::try_from(v)
    .map_err(|_| UnitError::new("DSCP", &v.to_string(), "must be 0..63"))
    .and_then(Dscp::new));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!("EF".parse::<Dscp>(), Ok(Dscp::EF));
        assert_eq!("cs1".parse::<Dscp>(), Ok(Dscp::CS1));
        assert_eq!("46".parse::<Dscp>(), Ok(Dscp::EF));
        assert_eq!("0x2e".parse::<Dscp>(), Ok(Dscp::EF));
        assert_eq!("be".parse::<Dscp>(), Ok(Dscp::BE));
        assert_eq!(Dscp::EF.tos(), 0xb8);
        assert!("64".parse::<Dscp>().is_err());
        assert!("XX".parse::<Dscp>().is_err());
    }

    #[test]
    fn every_value_round_trips() {
        for v in 0..64u8 {
            let d = Dscp::new(v).unwrap();
            assert_eq!(d.to_string().parse::<Dscp>(), Ok(d));
        }
    }
}
