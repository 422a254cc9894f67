//! How long a test, a lab or a refresh lasts, as typed on the command line.
//!
//! Not a qdisc time: here a bare number is seconds, as in `iperf3 -t 60`, `flent -l 60` and
//! `ping -w 60`, and every word of [`Time`] works too (`500ms`, `2s`, `1.5s`, `2m`). A qdisc time
//! ([`Time`]'s own `FromStr`) keeps tc's words and refuses a bare number, because tc would read it
//! as microseconds. Each caller gives the range it can honour, so a duration is always finite and
//! a message names the range.
//!
//! ```
//! use unbloat_units::{duration::parse_test_duration, Time};
//! let range = Time::from_secs(2)..=Time::from_secs(3600);
//! assert_eq!(parse_test_duration("60", range.clone()), Ok(Time::from_secs(60)));
//! assert_eq!(parse_test_duration("1.5m", range.clone()), Ok(Time::from_secs(90)));
//! assert!(parse_test_duration("500ms", range).unwrap_err().to_string().contains("2s..3600s"));
//! ```

use crate::time::suffix_micros;
use crate::{number, Time, UnitError};
use std::ops::RangeInclusive;

/// Parse a test or lab duration: a bare number of seconds, or a number with one of [`Time`]'s
/// units (us, ms, s, m, min and their long forms), within `range`.
pub fn parse_test_duration(text: &str, range: RangeInclusive<Time>) -> Result<Time, UnitError> {
    let err = |r: String| UnitError::new("duration", text, r);
    let (dec, unit) = number::split(text).map_err(err)?;
    let micros = match unit.as_str() {
        "" => 1_000_000,
        u => suffix_micros(u).ok_or_else(|| {
            err(format!(
                "unknown unit {u:?}; give seconds (60, 1.5) or a unit: 500ms, 30s, 2m"
            ))
        })?,
    };
    let t = dec
        .scaled(micros, 1)
        .map(Time::from_micros)
        .map_err(|r| err(r.to_string()))?;
    if !range.contains(&t) {
        return Err(err(format!(
            "{t} is outside {}..{} (a bare number is seconds)",
            range.start(),
            range.end()
        )));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_range() -> RangeInclusive<Time> {
        Time::from_micros(0)..=Time::from_secs(86_400)
    }

    #[test]
    fn a_bare_number_is_seconds_and_tc_words_work() {
        for (text, us) in [
            ("60", 60_000_000),
            ("1.5", 1_500_000),
            ("0.1", 100_000),
            ("500ms", 500_000),
            ("2s", 2_000_000),
            ("30 s", 30_000_000),
            ("2m", 120_000_000),
            ("1min", 60_000_000),
            ("250000us", 250_000),
        ] {
            assert_eq!(
                parse_test_duration(text, any_range()),
                Ok(Time::from_micros(us)),
                "{text}"
            );
        }
    }

    #[test]
    fn out_of_range_and_garbage_are_refused_naming_the_range() {
        let range = Time::from_secs(2)..=Time::from_secs(3600);
        for (text, words) in [
            ("1", ["1s is outside 2s..3600s", "a bare number is seconds"]),
            (
                "500ms",
                ["500ms is outside 2s..3600s", "duration \"500ms\""],
            ),
            ("2h", ["unknown unit \"h\"", "500ms, 30s, 2m"]),
            ("3601", ["3601s is outside", "3600s"]),
        ] {
            let m = parse_test_duration(text, range.clone())
                .unwrap_err()
                .to_string();
            for w in words {
                assert!(m.contains(w), "{text}: {w:?} missing: {m}");
            }
        }
        for bad in [
            "",
            "-1",
            "fast",
            "1e99",
            "0.0000001",
            "99999999999999999999",
        ] {
            assert!(parse_test_duration(bad, any_range()).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn bare_seconds_and_s_agree(n in 0u64..86_400) {
            prop_assert_eq!(
                parse_test_duration(&n.to_string(), any_range()),
                parse_test_duration(&format!("{n}s"), any_range())
            );
            prop_assert_eq!(
                parse_test_duration(&n.to_string(), any_range()),
                Ok(Time::from_secs(n))
            );
        }

        #[test]
        fn a_time_as_displayed_parses_back(us in 0u64..86_400_000_000) {
            let t = Time::from_micros(us);
            prop_assert_eq!(parse_test_duration(&t.to_string(), any_range()), Ok(t));
        }
    }
}
