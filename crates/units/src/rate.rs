//! Rates in bits per second, with tc's suffixes (tc(8), "RATES"; iproute2 tc/tc_util.c `get_rate`).

use crate::{number, serde_via_text, UnitError};
use std::fmt;
use std::str::FromStr;

/// A rate in bits per second. The kernel keeps rates in bytes per second, so [`Rate::bytes_per_sec`]
/// is what `tc -j` reports back (e.g. cake's `bandwidth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(u64);

/// tc's rate suffixes and their value in bits per second. Matching is case-insensitive, as tc's
/// `strcasecmp`, which makes `Bps` and `bps` the same: both are BYTES per second, as in tc.
const SUFFIXES: &[(&str, u128)] = &[
    ("", 1), // a bare number is bits per second
    ("bit", 1),
    ("kibit", 1 << 10),
    ("kbit", 1_000),
    ("mibit", 1 << 20),
    ("mbit", 1_000_000),
    ("gibit", 1 << 30),
    ("gbit", 1_000_000_000),
    ("tibit", 1 << 40),
    ("tbit", 1_000_000_000_000),
    ("bps", 8),
    ("kibps", 8 << 10),
    ("kbps", 8_000),
    ("mibps", 8 << 20),
    ("mbps", 8_000_000),
    ("gibps", 8 << 30),
    ("gbps", 8_000_000_000),
    ("tibps", 8 << 40),
    ("tbps", 8_000_000_000_000),
];

impl Rate {
    pub const ZERO: Rate = Rate(0);

    pub const fn from_bits_per_sec(bps: u64) -> Rate {
        Rate(bps)
    }
    pub const fn from_kbit(kbit: u64) -> Rate {
        Rate(kbit * 1_000)
    }
    pub const fn from_mbit(mbit: u64) -> Rate {
        Rate(mbit * 1_000_000)
    }
    /// From the kernel's bytes per second (what `tc -j` reports).
    pub const fn from_bytes_per_sec(bytes: u64) -> Rate {
        Rate(bytes.saturating_mul(8))
    }
    pub const fn bits_per_sec(self) -> u64 {
        self.0
    }
    /// What the kernel stores: whole bytes per second (tc divides by 8 and truncates).
    pub const fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }
    pub fn kbit_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    pub fn mbit_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// `self * percent / 100`, rounded down to a whole kbit/s when the rate is at least 1 Mbit/s
    /// so that scripts stay readable (95 % of 80mbit is `76mbit`, of 19950kbit is `18952kbit`).
    pub fn percent(self, percent: u64) -> Rate {
        let raw = (self.0 as u128 * percent as u128 / 100) as u64;
        if raw >= 1_000_000 {
            Rate(raw / 1_000 * 1_000)
        } else {
            Rate(raw)
        }
    }
    /// Seconds needed to send `bytes` at this rate (infinite for a zero rate).
    pub fn seconds_for(self, bytes: u64) -> f64 {
        if self.0 == 0 {
            f64::INFINITY
        } else {
            bytes as f64 * 8.0 / self.0 as f64
        }
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Rate, UnitError> {
        let err = |r: String| UnitError::new("rate", s, r);
        let (dec, unit) = number::split(s).map_err(err)?;
        let scale = SUFFIXES.iter().find(|(name, _)| *name == unit).map(|(_, v)| *v).ok_or_else(|| {
            err(format!("unknown unit {unit:?}; use bit, kbit, mbit, gbit (or kbps, mbps for bytes/s) as tc does, e.g. 78mbit"))
        })?;
        dec.scaled(scale, 1)
            .map(Rate)
            .map_err(|r| err(r.to_string()))
    }
}

impl fmt::Display for Rate {
    /// The largest decimal unit that represents the rate exactly: `78mbit`, `19950kbit`, `1500bit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 4] = [
            ("tbit", 1_000_000_000_000),
            ("gbit", 1_000_000_000),
            ("mbit", 1_000_000),
            ("kbit", 1_000),
        ];
        for (name, div) in UNITS {
            if self.0 != 0 && self.0.is_multiple_of(div) {
                return write!(f, "{}{name}", self.0 / div);
            }
        }
        write!(f, "{}bit", self.0)
    }
}

serde_via_text!(Rate, |v| Ok(Rate(v)));

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_tc_spellings() {
        let cases = [
            ("78mbit", 78_000_000),
            ("19950kbit", 19_950_000),
            ("19.95Mbit", 19_950_000),
            ("1gbit", 1_000_000_000),
            ("1kibit", 1024),
            ("100", 100),
            ("100bit", 100),
            ("1mbps", 8_000_000),
            ("1MBps", 8_000_000),
            ("0", 0),
            (" 5kbit ", 5_000),
        ];
        for (text, bps) in cases {
            assert_eq!(
                text.parse::<Rate>().map(|r| r.bits_per_sec()),
                Ok(bps),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_bad_rates_with_the_reason() {
        for bad in [
            "78mbits",
            "-5mbit",
            "fast",
            "",
            "1.5.0mbit",
            "0.5bit",
            "99999999999tbit",
        ] {
            let e = bad.parse::<Rate>().unwrap_err();
            assert_eq!(e.what, "rate");
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!("78mbits"
            .parse::<Rate>()
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
    }

    #[test]
    fn displays_exactly_in_the_largest_unit() {
        assert_eq!(Rate::from_mbit(78).to_string(), "78mbit");
        assert_eq!(Rate::from_kbit(19_950).to_string(), "19950kbit");
        assert_eq!(Rate::from_bits_per_sec(1_500).to_string(), "1500bit");
        assert_eq!(
            Rate::from_bits_per_sec(1_000_000_001).to_string(),
            "1000000001bit"
        );
        assert_eq!(Rate::ZERO.to_string(), "0bit");
    }

    #[test]
    fn percent_rounds_to_kbit_above_a_megabit() {
        assert_eq!(Rate::from_mbit(80).percent(95), Rate::from_mbit(76));
        assert_eq!(Rate::from_kbit(19_950).percent(95), Rate::from_kbit(18_952));
        assert_eq!(
            Rate::from_kbit(220).percent(95),
            Rate::from_bits_per_sec(209_000)
        );
    }

    #[test]
    fn kernel_bytes() {
        assert_eq!(Rate::from_kbit(19_950).bytes_per_sec(), 2_493_750);
        assert_eq!(Rate::from_bytes_per_sec(2_493_750), Rate::from_kbit(19_950));
    }

    #[test]
    fn serde_uses_text_and_accepts_integers() {
        let r: Rate = serde_json::from_str("\"78mbit\"").unwrap();
        assert_eq!(r, Rate::from_mbit(78));
        let z: Rate = serde_json::from_str("0").unwrap();
        assert_eq!(z, Rate::ZERO);
        assert!(serde_json::from_str::<Rate>("-1").is_err());
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"78mbit\"");
    }

    proptest! {
        #[test]
        fn display_parses_back(bps in any::<u64>()) {
            let r = Rate::from_bits_per_sec(bps);
            prop_assert_eq!(r.to_string().parse::<Rate>(), Ok(r));
        }

        #[test]
        fn kbit_text_is_exact(k in 0u64..10_000_000) {
            prop_assert_eq!(format!("{k}kbit").parse::<Rate>(), Ok(Rate::from_kbit(k)));
        }
    }
}
