//! Times in microseconds, with tc's suffixes (tc(8), "TIMES"; iproute2 tc/tc_util.c `get_time`).

use crate::{number, serde_via_text, UnitError};
use std::fmt;
use std::str::FromStr;

/// A duration in whole microseconds, the resolution of every qdisc parameter unbloat sets
/// (fq_codel's target and interval, cake's rtt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

/// Suffixes in microseconds. A bare number is microseconds, as in tc. `m`/`min` are minutes for
/// test durations; tc itself never sees them because [`Display`](fmt::Display) never writes them.
const SUFFIXES: &[(&str, u128)] = &[
    ("", 1),
    ("us", 1),
    ("usec", 1),
    ("usecs", 1),
    ("ms", 1_000),
    ("msec", 1_000),
    ("msecs", 1_000),
    ("s", 1_000_000),
    ("sec", 1_000_000),
    ("secs", 1_000_000),
    ("m", 60_000_000),
    ("min", 60_000_000),
];

impl Time {
    pub const fn from_micros(us: u64) -> Time {
        Time(us)
    }
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms * 1_000)
    }
    pub const fn from_secs(s: u64) -> Time {
        Time(s * 1_000_000)
    }
    pub const fn micros(self) -> u64 {
        self.0
    }
    pub fn millis_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    pub fn secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn as_duration(self) -> std::time::Duration {
        std::time::Duration::from_micros(self.0)
    }
}

impl FromStr for Time {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Time, UnitError> {
        let err = |r: String| UnitError::new("time", s, r);
        let (dec, unit) = number::split(s).map_err(err)?;
        let (_, f) = SUFFIXES
            .iter()
            .find(|(n, _)| *n == unit)
            .ok_or_else(|| err(format!("unknown unit {unit:?}; use us, ms or s, e.g. 5ms")))?;
        dec.scaled(*f, 1).map(Time).map_err(|r| err(r.to_string()))
    }
}

impl fmt::Display for Time {
    /// `30s`, `5ms` or `14570us`: the largest of s, ms, us that is exact.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 != 0 && self.0.is_multiple_of(1_000_000) {
            write!(f, "{}s", self.0 / 1_000_000)
        } else if self.0 != 0 && self.0.is_multiple_of(1_000) {
            write!(f, "{}ms", self.0 / 1_000)
        } else {
            write!(f, "{}us", self.0)
        }
    }
}

serde_via_text!(Time, |v| Ok(Time(v)));

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_tc_spellings() {
        for (t, us) in [
            ("5ms", 5_000),
            ("100000us", 100_000),
            ("30s", 30_000_000),
            ("0.5ms", 500),
            ("300", 300),
            ("2m", 120_000_000),
        ] {
            assert_eq!(t.parse::<Time>(), Ok(Time(us)), "{t}");
        }
        for bad in ["5 parsecs", "-1ms", "0.5us", "ms"] {
            assert!(bad.parse::<Time>().is_err(), "{bad}");
        }
    }

    #[test]
    fn displays_exactly() {
        assert_eq!(Time(5_000).to_string(), "5ms");
        assert_eq!(Time(14_570).to_string(), "14570us");
        assert_eq!(Time(30_000_000).to_string(), "30s");
    }

    proptest! {
        #[test]
        fn display_parses_back(us in 0u64..u64::MAX / 2) {
            prop_assert_eq!(Time(us).to_string().parse::<Time>(), Ok(Time(us)));
        }
    }
}
