//! Times in microseconds, with tc's suffixes (tc(8), "TIMES"; iproute2 tc/tc_util.c `get_time`).
//!
//! A qdisc time (`--rtt`, `--target`, `--interval`, the config keys and option-string words of
//! the same names) needs its unit: tc reads a bare number as microseconds, and a user writing
//! `rtt 100` means 100 ms, so a bare number other than 0 is refused with both readings
//! ("100: write 100ms"). The durations of tests and labs follow another habit (a bare number is
//! seconds, as in iperf3, flent and ping): they are read by [`crate::duration`].

use crate::number::{self, Decimal};
use crate::{serde_via_text, UnitError};
use std::fmt;
use std::str::FromStr;

/// A duration in whole microseconds, the resolution of every qdisc parameter unbloat sets
/// (fq_codel's target and interval, cake's rtt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

/// Suffixes in microseconds. `m`/`min` are minutes for test durations; tc itself never sees them
/// because [`Display`](fmt::Display) never writes them. No bare number: see the module's note.
const SUFFIXES: &[(&str, u128)] = &[
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

/// The microseconds in one `unit` (`ms`, `s`, ...), if it is one of [`Time`]'s suffixes.
pub(crate) fn suffix_micros(unit: &str) -> Option<u128> {
    SUFFIXES.iter().find(|(n, _)| *n == unit).map(|(_, f)| *f)
}

/// The readings of a bare qdisc time, the likelier first: below 1000 milliseconds (every qdisc
/// time of the field is a few to a few hundred ms), from 1000 tc's microseconds.
fn bare_readings(dec: Decimal) -> String {
    let n = dec.to_string();
    if dec.whole() >= 1_000 {
        let ms = dec.shifted(3);
        format!("write {n}us as tc would read it, or {ms}ms")
    } else {
        format!("write {n}ms, or {n}us as tc would read it")
    }
}

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
        if unit.is_empty() {
            return match dec.is_zero() {
                true => Ok(Time(0)),
                false => Err(err(format!(
                    "no unit: {}; unbloat does not guess",
                    bare_readings(dec)
                ))),
            };
        }
        let f = suffix_micros(&unit)
            .ok_or_else(|| err(format!("unknown unit {unit:?}; use us, ms or s, e.g. 5ms")))?;
        dec.scaled(f, 1).map(Time).map_err(|r| err(r.to_string()))
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

// A TOML or JSON integer is a bare number: refused as the text would be (0 is 0).
serde_via_text!(Time, |v| v.to_string().parse());

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
            ("300us", 300),
            ("2m", 120_000_000),
            ("0", 0),
            ("5 ms", 5_000),
            ("5MS", 5_000),
        ] {
            assert_eq!(t.parse::<Time>(), Ok(Time(us)), "{t}");
        }
        for bad in ["5 parsecs", "-1ms", "0.5us", "ms", "300"] {
            assert!(bad.parse::<Time>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bare_qdisc_time_is_refused_with_both_readings() {
        for (text, words) in [
            ("100", ["write 100ms", "100us as tc would read it"]),
            ("5", ["write 5ms", "5us"]),
            ("14570", ["write 14570us", "14.57ms"]),
        ] {
            let m = text.parse::<Time>().unwrap_err().to_string();
            assert!(
                m.starts_with(&format!("invalid time {text:?}: no unit: ")),
                "{m}"
            );
            for w in words {
                assert!(m.contains(w), "{w:?} missing: {m}");
            }
        }
        let e = serde_json::from_str::<Time>("100").unwrap_err().to_string();
        assert!(e.contains("write 100ms"), "{e}");
        assert_eq!(serde_json::from_str::<Time>("0").unwrap(), Time(0));
        assert_eq!(
            serde_json::from_str::<Time>("\"5ms\"").unwrap(),
            Time(5_000)
        );
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

        #[test]
        fn a_bare_number_is_never_a_time(n in 1u64..10_000_000) {
            let m = n.to_string().parse::<Time>().unwrap_err().to_string();
            prop_assert!(m.contains(&format!("{n}us")) && m.contains("ms"), "{}", m);
        }
    }
}
