//! Rates in bits per second, with tc's suffixes (tc(8), "RATES"; iproute2 tc/tc_util.c `get_rate`)
//! minus the two that turn a habit into an outage.
//!
//! Heads up: unbloat does not guess units (issue 19). tc reads a bare number as bit/s and `mbps`
//! as megaBYTES per second; a user coming from OpenWrt's SQM page types kbit/s without a unit, and
//! one coming from a speed test types `Mbps` meaning megabits. Either way tc shapes at a rate
//! 1000 or 8 times off, silently, on the link the user may be logged in through. So:
//!
//! - Accepted (case-insensitive, an optional space after the number, an optional `/s` or `/sec`):
//!   `bit`/`bits` with an SI or IEC prefix (`78mbit`, `19950kbit`, `20 Mbit/s`, `94.1 Mbits/sec`
//!   as iperf3 prints it, `1kibit`), and the SI prefix alone (`20M`, `20K`, `1.5G`), which means
//!   bits here as in iperf3's `-b 20M`. `0` alone is 0 in every unit and turns a direction off.
//! - Refused, with the likely readings spelled out: a bare number other than 0 (`20000`: 20000kbit
//!   as SQM means it, or 20mbit), and every spelling that may be bytes: tc's `bps` family
//!   (`kbps`, `mbps`, `MBps`, ...), `b` (`20Mb`, `20MB/s`) and `byte`. Matching is
//!   case-insensitive as in tc (`strcasecmp`), so `Mbps` and `MBps` cannot be told apart; a
//!   case-sensitive rule would make the Shift key worth a factor of 8. Rates are written in bits
//!   only, so no script or config file carries a hidden factor of 8.

use crate::number::{self, Decimal};
use crate::{serde_via_text, UnitError};
use std::fmt;
use std::str::FromStr;

/// A rate in bits per second. The kernel keeps rates in bytes per second, so [`Rate::bytes_per_sec`]
/// is what `tc -j` reports back (e.g. cake's `bandwidth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(u64);

/// Prefixes and their factor, IEC first so that `mibit` is mebi + bit, not mega + `ibit`.
const PREFIXES: &[(&str, &str, u128)] = &[
    ("ki", "kibi", 1 << 10),
    ("mi", "mebi", 1 << 20),
    ("gi", "gibi", 1 << 30),
    ("ti", "tebi", 1 << 40),
    ("k", "kilo", 1_000),
    ("m", "mega", 1_000_000),
    ("g", "giga", 1_000_000_000),
    ("t", "tera", 1_000_000_000_000),
    ("", "", 1),
];

/// What a unit after the number says, before the number is scaled.
enum Unit {
    /// Bits per second times this factor.
    Bits(u128),
    /// No unit at all.
    Bare,
    /// Bits or bytes, the text cannot say which: `mbps` (bytes to tc, bits to a speed test),
    /// `mb`, `MB/s`. The prefix's name and factor.
    BitsOrBytes(&'static str, u128),
    /// Clearly bytes (`mbyte/s`): unbloat's rates are in bits.
    Bytes(&'static str, u128),
}

/// Reads a (lower-cased) unit, or `None` if it is not one.
fn unit(text: &str) -> Option<Unit> {
    if text.is_empty() {
        return Some(Unit::Bare);
    }
    let (base, per_second) = match text
        .strip_suffix("/sec")
        .or_else(|| text.strip_suffix("/s"))
    {
        Some(b) => (b.trim_end(), true),
        None => (text, false),
    };
    PREFIXES.iter().find_map(|&(prefix, name, factor)| {
        let rest = base.strip_prefix(prefix)?;
        let si = matches!(prefix, "k" | "m" | "g" | "t");
        match rest {
            "bit" | "bits" => Some(Unit::Bits(factor)),
            // `20M`, as iperf3's `-b`; `20M/s` would be a unit of its own.
            "" if si && !per_second => Some(Unit::Bits(factor)),
            "bps" if !per_second => Some(Unit::BitsOrBytes(name, factor)),
            "b" => Some(Unit::BitsOrBytes(name, factor)),
            "byte" | "bytes" => Some(Unit::Bytes(name, factor)),
            _ => None,
        }
    })
}

/// `dec` times `factor` as a rate, if it is a whole number of bit/s that fits.
fn scaled(dec: Decimal, factor: u128) -> Option<Rate> {
    dec.scaled(factor, 1).ok().map(Rate)
}

/// The likely readings of a bare number, most likely first by its size: below 1000 a speed
/// test's megabits, from 1000 SQM's kilobits, from a million tc's bits.
fn bare_readings(dec: Decimal) -> String {
    let n = dec.to_string();
    let tc = format!("unbloat does not guess (tc would read {n} bit/s)");
    if dec.whole() >= 1_000_000 {
        let mbit = dec.shifted(6);
        format!("write {mbit}mbit if you mean bit/s, or {n}kbit (SQM's unit); {tc}")
    } else if dec.whole() >= 1_000 {
        let mbit = dec.shifted(3);
        format!("write {n}kbit (SQM's unit) or {mbit}mbit; {tc}")
    } else {
        format!("write {n}mbit or {n}kbit (SQM's unit); {tc}")
    }
}

/// The two readings of `bps`, `b` and friends, in bits.
fn bits_or_bytes(dec: Decimal, name: &str, factor: u128) -> String {
    let readings: Vec<String> = [
        scaled(dec, factor)
            .map(|r| format!("{r} if you mean {name}bits per second, as speed tests do")),
        scaled(dec, factor * 8)
            .map(|r| format!("{r} if you mean {name}bytes per second, as tc reads bps")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if readings.is_empty() {
        "bits or bytes? write the rate in bits: kbit, mbit, gbit".to_string()
    } else {
        format!("bits or bytes? {}", readings.join("; "))
    }
}

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
    /// Parse a rate as the module's rule says: bits with a unit, or `0`.
    fn from_str(s: &str) -> Result<Rate, UnitError> {
        let err = |r: String| UnitError::new("rate", s, r);
        let (dec, text) = number::split(s).map_err(err)?;
        let factor = match unit(&text) {
            Some(Unit::Bits(f)) => f,
            Some(Unit::Bare) if dec.is_zero() => 1,
            Some(Unit::Bare) => return Err(err(format!("no unit: {}", bare_readings(dec)))),
            Some(Unit::BitsOrBytes(name, f)) => return Err(err(bits_or_bytes(dec, name, f))),
            Some(Unit::Bytes(name, f)) => {
                let hint = match scaled(dec, f * 8) {
                    Some(r) => format!("write {r}"),
                    None => "write kbit, mbit or gbit".to_string(),
                };
                return Err(err(format!(
                    "{name}bytes: unbloat's rates are in bits; {hint}"
                )));
            }
            None => {
                return Err(err(format!(
                    "unknown unit {text:?}; use bit, kbit, mbit or gbit (or k, M, G: bits), e.g. 78mbit"
                )))
            }
        };
        dec.scaled(factor, 1)
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

// A TOML or JSON integer is a bare number: refused as the text would be, 0 meaning off.
serde_via_text!(Rate, |v| v.to_string().parse());

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bps(text: &str) -> Result<u64, UnitError> {
        text.parse::<Rate>().map(|r| r.bits_per_sec())
    }

    /// Every spelling the module's rule accepts, and the bit/s it means.
    const ACCEPTED: &[(&str, u64)] = &[
        ("78mbit", 78_000_000),
        ("19950kbit", 19_950_000),
        ("19.95Mbit", 19_950_000),
        ("1gbit", 1_000_000_000),
        ("1tbit", 1_000_000_000_000),
        ("1kibit", 1024),
        ("1mibit", 1 << 20),
        ("100bit", 100),
        ("20M", 20_000_000),
        ("20m", 20_000_000),
        ("20K", 20_000),
        ("1.5G", 1_500_000_000),
        ("20Mbit", 20_000_000),
        ("20 Mbit", 20_000_000),
        ("20 mbit", 20_000_000),
        ("20Mbit/s", 20_000_000),
        ("20 Mbit/s", 20_000_000),
        ("20 mbit/sec", 20_000_000),
        ("94.1 Mbits/sec", 94_100_000),
        ("20mbits", 20_000_000),
        ("800Kbits/s", 800_000),
        ("0", 0),
        ("0.0", 0),
        ("0bit", 0),
        ("0mbit", 0),
        (" 5kbit ", 5_000),
    ];

    #[test]
    fn parses_every_accepted_spelling() {
        for &(text, want) in ACCEPTED {
            assert_eq!(bps(text), Ok(want), "{text}");
        }
    }

    /// Every refused spelling that has readings, and words each message must contain.
    const REFUSED: &[(&str, &[&str])] = &[
        (
            "20000",
            &["no unit", "20000kbit (SQM's unit)", "20mbit", "20000 bit/s"],
        ),
        ("19950", &["19950kbit (SQM's unit)", "19.95mbit"]),
        ("20", &["20mbit", "20kbit (SQM's unit)"]),
        ("0.5", &["0.5mbit", "0.5kbit"]),
        (
            "20000000",
            &["20mbit if you mean bit/s", "20000000kbit (SQM's unit)"],
        ),
        (
            "20mbps",
            &[
                "20mbit if you mean megabits",
                "160mbit if you mean megabytes",
                "speed tests",
                "tc",
            ],
        ),
        (
            "20Mbps",
            &[
                "20mbit if you mean megabits",
                "160mbit if you mean megabytes",
            ],
        ),
        (
            "20 Mbps",
            &[
                "20mbit if you mean megabits",
                "160mbit if you mean megabytes",
            ],
        ),
        ("20MBps", &["20mbit", "160mbit"]),
        (
            "800kbps",
            &[
                "800kbit if you mean kilobits",
                "6400kbit if you mean kilobytes",
            ],
        ),
        (
            "1gbps",
            &["1gbit if you mean gigabits", "8gbit if you mean gigabytes"],
        ),
        (
            "100bps",
            &["100bit if you mean bits", "800bit if you mean bytes"],
        ),
        (
            "1kibps",
            &[
                "1024bit if you mean kibibits",
                "8192bit if you mean kibibytes",
            ],
        ),
        ("20MB/s", &["20mbit", "160mbit"]),
        ("20Mb/s", &["20mbit", "160mbit"]),
        ("20mb", &["20mbit", "160mbit"]),
        ("2 MByte/s", &["megabytes", "write 16mbit"]),
        ("2mbytes", &["megabytes", "write 16mbit"]),
    ];

    #[test]
    fn refuses_guessed_units_with_the_readings() {
        for &(text, words) in REFUSED {
            let e = text.parse::<Rate>().unwrap_err();
            assert_eq!(e.what, "rate");
            let m = e.to_string();
            assert!(m.contains(&format!("{text:?}")), "{m}");
            for w in words {
                assert!(m.contains(w), "{text}: {w:?} missing from: {m}");
            }
        }
    }

    #[test]
    fn the_readings_offered_are_accepted_and_mean_what_they_say() {
        // "write 20000kbit (SQM's unit) or 20mbit": both suggestions parse.
        for (text, readings) in [
            ("20000", ["20000kbit", "20mbit"]),
            ("19950", ["19950kbit", "19.95mbit"]),
            ("20mbps", ["20mbit", "160mbit"]),
        ] {
            let m = text.parse::<Rate>().unwrap_err().to_string();
            for r in readings {
                assert!(m.contains(r), "{m}");
                assert!(r.parse::<Rate>().is_ok(), "{r}");
            }
        }
        assert_eq!(bps("19.95mbit"), bps("19950kbit"));
    }

    #[test]
    fn refuses_bad_rates_with_the_reason() {
        for bad in [
            "78mbitz",
            "-5mbit",
            "fast",
            "",
            "1.5.0mbit",
            "0.5bit",
            "99999999999tbit",
            "20M/s",
            "20ki",
            "20 mb it",
            "20mbit/h",
        ] {
            let e = bad.parse::<Rate>().unwrap_err();
            assert_eq!(e.what, "rate");
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!("78mbitz"
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
    fn serde_uses_text_and_refuses_integers_but_zero() {
        let r: Rate = serde_json::from_str("\"78mbit\"").unwrap();
        assert_eq!(r, Rate::from_mbit(78));
        let z: Rate = serde_json::from_str("0").unwrap();
        assert_eq!(z, Rate::ZERO);
        let e = serde_json::from_str::<Rate>("20000")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("20000kbit (SQM's unit)") && e.contains("20mbit"),
            "{e}"
        );
        let e = serde_json::from_str::<Rate>("19.95")
            .unwrap_err()
            .to_string();
        assert!(e.contains("19.95mbit"), "{e}");
        let e = serde_json::from_str::<Rate>("\"20mbps\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("160mbit"), "{e}");
        assert!(serde_json::from_str::<Rate>("-1").is_err());
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"78mbit\"");
    }

    /// The prefixes a unit may carry, as a user may type them, with their factor.
    fn prefix() -> impl Strategy<Value = (&'static str, u64)> {
        prop::sample::select(vec![
            ("", 1),
            ("k", 1_000),
            ("K", 1_000),
            ("m", 1_000_000),
            ("M", 1_000_000),
            ("g", 1_000_000_000),
            ("G", 1_000_000_000),
            ("Ki", 1 << 10),
            ("mi", 1 << 20),
        ])
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

        /// `N`, `N `, `/s`, `/sec`, `bit`, `bits`, any case: always N times the prefix in bits.
        #[test]
        fn every_bit_spelling_means_bits(
            n in 1u64..100_000,
            (p, factor) in prefix(),
            space in prop::bool::ANY,
            bits in prop::sample::select(vec!["bit", "bits", "Bit", "BITS"]),
            per in prop::sample::select(vec!["", "/s", "/sec", "/S"]),
        ) {
            let sp = if space { " " } else { "" };
            let text = format!("{n}{sp}{p}{bits}{per}");
            prop_assert_eq!(bps(&text), Ok(n * factor), "{}", text);
        }

        /// A bare number other than 0 is refused with a kbit and an mbit reading, each of which
        /// parses to what it says.
        #[test]
        fn a_bare_number_is_refused_with_readings(n in 1u64..100_000_000) {
            let m = n.to_string().parse::<Rate>().unwrap_err().to_string();
            prop_assert!(m.contains(&format!("{n}kbit (SQM's unit)")), "{}", m);
            prop_assert!(m.contains("mbit"), "{}", m);
            let e = serde_json::from_str::<Rate>(&n.to_string()).unwrap_err().to_string();
            prop_assert!(e.contains(&format!("{n}kbit")), "{}", e);
        }

        /// Every `bps` and `b` spelling is refused with the bits reading and 8 times it.
        #[test]
        fn bytes_or_bits_is_refused_with_both_readings(
            n in 1u64..100_000,
            (p, factor) in prefix(),
            unit in prop::sample::select(vec!["bps", "Bps", "BPS", "b", "B", "b/s", "B/s"]),
            space in prop::bool::ANY,
        ) {
            let sp = if space { " " } else { "" };
            let text = format!("{n}{sp}{p}{unit}");
            let m = text.parse::<Rate>().unwrap_err().to_string();
            let bits = Rate::from_bits_per_sec(n * factor).to_string();
            let bytes = Rate::from_bits_per_sec(n * factor * 8).to_string();
            prop_assert!(m.contains(&format!("{bits} if you mean")), "{}", m);
            prop_assert!(m.contains(&format!("{bytes} if you mean")), "{}", m);
        }
    }
}
