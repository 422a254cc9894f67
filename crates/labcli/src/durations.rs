//! How the bench's duration flags read: every one by the units crate's rule for a test's
//! duration, the one `unbloat test --duration` and `unbloat-lab run --duration` use (`10s`,
//! `2m`, `500ms`; a bare number is seconds, as iperf3's `-t`), within the range its command
//! honours, refused with the units crate's message otherwise. Times that are qdisc times
//! (`bench tune --bound`) read as [`unbloat_units::Time`]'s own text, as `unbloat tune`'s do.
//!
//! Bug (issue 51): `unbloat-lab hosts --duration 10s` was refused ("invalid digit found in
//! string": the flag was a bare `u32`), while `unbloat-lab run` took `--duration 30s`.

use std::ops::RangeInclusive;
use unbloat_units::duration::parse_test_duration;
use unbloat_units::{Time, UnitError};

/// A load `whole` seconds long at most and at least: iperf3's `-t` and ping's count take no
/// fraction (iperf3 reads `-t 10.5` as 10), so a fraction is refused rather than cut.
fn whole_seconds(text: &str, secs: RangeInclusive<u64>) -> Result<Time, UnitError> {
    let range = Time::from_secs(*secs.start())..=Time::from_secs(*secs.end());
    let t = parse_test_duration(text, range)?;
    match t.micros() % 1_000_000 {
        0 => Ok(t),
        _ => Err(UnitError {
            what: "duration",
            input: text.to_string(),
            reason: "not a whole number of seconds, which iperf3's -t and ping's count take".into(),
        }),
    }
}

/// Whole seconds of a duration read by the parsers here (all whole seconds, at most a day).
pub fn secs(t: Time) -> u32 {
    u32::try_from(t.micros() / 1_000_000).unwrap_or(u32::MAX)
}

/// `hosts --duration`, `bench fair --duration`: 6 s (the ramp and a few pings) to 5 min.
pub fn hosts_load(text: &str) -> Result<Time, UnitError> {
    whole_seconds(text, 6..=300)
}

/// `bench household --duration`: 8 s (3 s of start-up, then the steady state) to 5 min.
pub fn household_load(text: &str) -> Result<Time, UnitError> {
    whole_seconds(text, 8..=300)
}

/// `bench locate --duration`: as `unbloat-lab run --duration` (2 s to 60 min), in whole seconds.
pub fn locate_load(text: &str) -> Result<Time, UnitError> {
    whole_seconds(text, 2..=3600)
}

/// `bench daemon --duration`: one scrape a second, 1 s to 60 min.
pub fn scrape_time(text: &str) -> Result<Time, UnitError> {
    whole_seconds(text, 1..=3600)
}

/// `bench hostile --duration`: each attack, 2 s to an hour.
pub fn attack_time(text: &str) -> Result<Time, UnitError> {
    parse_test_duration(text, Time::from_secs(2)..=Time::from_secs(3600))
}

/// `bench hostile --gap`: a slow connection's byte every 100 ms to 60 s.
pub fn drip_gap(text: &str) -> Result<Time, UnitError> {
    parse_test_duration(text, Time::from_millis(100)..=Time::from_secs(60))
}

/// `bench soak --duration`: at most this long, 10 s to a day.
pub fn soak_time(text: &str) -> Result<Time, UnitError> {
    parse_test_duration(text, Time::from_secs(10)..=Time::from_secs(86_400))
}

/// `bench soak --hold`: how long wan0 stays between re-creations, none to 10 minutes.
pub fn soak_hold(text: &str) -> Result<Time, UnitError> {
    parse_test_duration(text, Time::from_secs(0)..=Time::from_secs(600))
}

/// `kernel --timeout`: 1 s to a day.
pub fn kernel_timeout(text: &str) -> Result<Time, UnitError> {
    parse_test_duration(text, Time::from_secs(1)..=Time::from_secs(86_400))
}

#[cfg(test)]
mod tests {
    use crate::Cli;
    use clap::Parser;

    fn parses(argv: &[&str]) -> Result<Cli, String> {
        let argv = std::iter::once("unbloat-lab").chain(argv.iter().copied());
        Cli::try_parse_from(argv).map_err(|e| e.to_string())
    }

    /// Bug (issue 51): `hosts --duration 10s` was refused with "invalid digit found in string".
    #[test]
    fn hosts_duration_10s_is_taken_as_run_takes_it() {
        let taken: [&[&str]; 15] = [
            &["hosts", "--duration", "10s"],
            &["bench", "fair", "--duration=10s"],
            &["bench", "household", "--duration=10s"],
            &["bench", "locate", "--duration=10s"],
            &["bench", "daemon", "--duration=10s"],
            &["kernel", "--timeout=10s", "true"],
            &["run", "--duration", "10s"],
            &["bench", "lab", "--duration=10s"],
            &["bench", "autorate", "--duration=10s"],
            &["hosts", "--duration", "2m"],
            &["bench", "daemon", "--seconds", "1m"],
            &["kernel", "--timeout", "1.5m", "true"],
            &["bench", "hostile", "--duration=10s", "--gap", "500ms"],
            &["bench", "soak", "--duration", "10m"],
            &["bench", "soak", "--hold", "2.5s"],
        ];
        for argv in taken {
            parses(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        }
    }

    /// A bare number is seconds, as for `unbloat test --duration` (and as these flags took it
    /// before, so `bench household --duration 20` still means what docs/benchmarks.md says).
    #[test]
    fn hosts_duration_bare_number_is_seconds_as_unbloat_test_reads_it() {
        for flag in ["--duration=20", "--duration=20s"] {
            let cli = parses(&["hosts", flag]).expect(flag);
            match cli.command {
                crate::Command::Hosts(a) => assert_eq!(super::secs(a.duration), 20, "{flag}"),
                _ => panic!("{flag}: not hosts"),
            }
        }
    }

    /// Out of range, a fraction the load's tools cannot take, or no duration at all: refused,
    /// naming the flag, with the units crate's message (its range, its units).
    #[test]
    fn hosts_duration_refused_with_the_units_crates_message() {
        for (argv, words) in [
            (
                &["hosts", "--duration", "10x"][..],
                &["--duration", "invalid duration \"10x\"", "500ms, 30s, 2m"][..],
            ),
            (
                &["hosts", "--duration", "5s"],
                &["5s is outside 6s..300s", "a bare number is seconds"],
            ),
            (
                &["hosts", "--duration", "10.5s"],
                &["invalid duration \"10.5s\": not a whole number of seconds"],
            ),
            (
                &["bench", "household", "--duration", "6"],
                &["outside 8s..300s"],
            ),
            (
                &["bench", "fair", "--duration", "fast"],
                &["invalid duration \"fast\""],
            ),
            (
                &["bench", "daemon", "--duration", "0"],
                &["outside 1s..3600s"],
            ),
            (
                &["kernel", "--timeout", "2d", "true"],
                &["--timeout", "unknown unit \"d\""],
            ),
        ] {
            let err = parses(argv)
                .err()
                .unwrap_or_else(|| panic!("{argv:?} taken"));
            for w in words {
                assert!(err.contains(w), "{argv:?}: {w:?} missing: {err}");
            }
        }
    }

    /// `bench tune --bound` is a qdisc time, read as `unbloat tune --bound` reads it: a bare
    /// number is refused (tc would read it as microseconds); `--max-time` as `unbloat tune`'s.
    #[test]
    fn bench_tune_times_read_as_unbloat_tunes() {
        let cli = parses(&["bench", "tune", "--bound", "20ms", "--max-time", "4m"]).expect("ok");
        let crate::Command::Bench(crate::cmd_bench::BenchCommand::Tune(t)) = cli.command else {
            panic!("not bench tune");
        };
        assert_eq!(t.bound, unbloat_units::Time::from_millis(20));
        assert_eq!(t.max_time.to_string(), "240s");
        let err = parses(&["bench", "tune", "--bound", "10"])
            .err()
            .expect("bare");
        assert!(err.contains("invalid time \"10\": no unit"), "{err}");
        let err = parses(&["bench", "tune", "--max-time", "soon"])
            .err()
            .expect("soon");
        assert!(err.contains("or auto"), "{err}");
    }

    /// The link's rates read as unbloat's `--down`/`--up`: a bare number is refused with its
    /// readings.
    #[test]
    fn hosts_rates_refuse_a_bare_number_with_its_readings() {
        parses(&["hosts", "--down", "50mbit", "--up", "10mbit"]).expect("rates");
        let err = parses(&["hosts", "--down", "20000"])
            .err()
            .expect("bare rate");
        assert!(err.contains("--down") && err.contains("20000kbit"), "{err}");
    }
}
