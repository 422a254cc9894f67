//! Typed units for traffic control, parsed from what a user types and formatted as `tc` reads them.
//!
//! Every quantity that reaches the kernel passes through one of these types, so a rate can never be
//! mistaken for a size, and a typo is caught at the edge with a message that names the value:
//!
//! - [`Rate`]: bits per second as an integer (`78mbit`, `19950kbit`, `20M`), tc's `get_rate`.
//! - [`Size`]: bytes (`1514`, `64k`, `2kbit`), tc's `get_size`.
//! - [`Time`]: microseconds (`5ms`, `100000us`, `30s`), tc's `get_time`; [`duration`] reads the
//!   length of a test or a lab, where a bare number is seconds.
//! - [`Dscp`]: a 6-bit DiffServ code point by number or name (`EF`, `CS1`, `AF41`, `46`).
//! - [`IfName`]: a Linux interface name (1 to 15 bytes, `IFNAMSIZ` - 1).
//!
//! Parsing accepts tc's own spellings (case-insensitive, as tc's `strcasecmp`), and `Display`
//! writes an exact, canonical form that tc parses back to the same value: the round trip
//! `x.to_string().parse() == x` holds for every value (property-tested).
//!
//! # No guessed units
//!
//! This crate is the one place the rule is written; every flag, config key (a TOML integer or
//! float is read as the number typed without a unit) and option-string word goes through it. A
//! spelling another tool reads differently is refused with its readings, never guessed:
//!
//! | typed | read as | why |
//! |---|---|---|
//! | `78mbit`, `20M`, `20 Mbit/s`, `94.1 Mbits/sec`, `19950kbit`, `1.5G` | bits per second | no other reading |
//! | `0` (a rate or a time) | 0: for a rate, that direction is not shaped | 0 in every unit |
//! | `20000` (a rate) | refused: "write 20000kbit (SQM's unit) or 20mbit" | tc: 20000 bit/s; SQM: kbit/s |
//! | `20mbps`, `20Mbps`, `20 MB/s`, `20Mb` | refused: "20mbit if you mean megabits ...; 160mbit if you mean megabytes" | tc: bytes/s; speed tests: bits/s |
//! | `2mbyte/s` | refused: "write 16mbit" | rates are written in bits only |
//! | `100` (a qdisc time: rtt, target, interval) | refused: "write 100ms, or 100us as tc would read it" | tc: microseconds |
//! | `60` (a test or lab duration, [`duration`]) | 60 s | iperf3, flent and ping |
//! | `1514` (a size) | 1514 bytes | tc, and no tool reads it otherwise |
//!
//! ```
//! use unbloat_units::{Rate, Time};
//! let up: Rate = "19950kbit".parse().unwrap();
//! assert_eq!(up.bits_per_sec(), 19_950_000);
//! assert_eq!(up.to_string(), "19950kbit");
//! assert_eq!("0.5ms".parse::<Time>().unwrap().micros(), 500);
//! ```

mod dscp;
pub mod duration;
mod ifname;
mod number;
mod rate;
mod size;
mod time;

pub use dscp::Dscp;
pub use ifname::IfName;
pub use rate::Rate;
pub use size::Size;
pub use time::Time;

/// Why a piece of user text is not a valid quantity. The message names the kind of value, the
/// text as typed, and what would have been accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {input:?}: {reason}")]
pub struct UnitError {
    /// "rate", "size", "time", "DSCP" or "interface name".
    pub what: &'static str,
    pub input: String,
    pub reason: String,
}

impl UnitError {
    pub(crate) fn new(what: &'static str, input: &str, reason: impl Into<String>) -> Self {
        UnitError {
            what,
            input: input.to_string(),
            reason: reason.into(),
        }
    }
}

/// Implements serde for a type through its `FromStr`/`Display` text, so config files use the
/// same spellings as the command line. An integer goes through `$from_int`; a float is read as the
/// text it would be typed as.
macro_rules! serde_via_text {
    ($t:ty, $from_int:expr) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        write!(f, "a {} as tc writes it", stringify!($t))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$t, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<$t, E> {
                        // As if the number had been typed: `19.95` is refused like "19.95".
                        self.visit_str(&format!("{v}"))
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$t, E> {
                        let f: fn(u64) -> Result<$t, $crate::UnitError> = $from_int;
                        f(v).map_err(E::custom)
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$t, E> {
                        match u64::try_from(v) {
                            Ok(u) => self.visit_u64(u),
                            Err(_) => Err(E::custom(format!(
                                "{} may not be negative: {v}",
                                stringify!($t)
                            ))),
                        }
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}
pub(crate) use serde_via_text;
