//! Values as `tc -j` prints them, read into unbloat's types: rates in BYTES per second, times in
//! microseconds, cake's `"unlimited"`, numbers some versions print as text (`"0x12"`). Shared by
//! the kinds' read-back structs (`CakeOptions`, `FqCodelOptions`, ...) and [`crate::tcjson`].

use crate::linklayer::Framing;
use serde::de::{self, Deserializer};
use serde::Deserialize;
use serde_json::Value;
use unbloat_units::{Rate, Time};

/// A rate in bytes per second as tc -j prints it.
pub fn bytes_per_sec<'de, D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
    u64::deserialize(d).map(Rate::from_bytes_per_sec)
}

/// A time in microseconds as tc -j prints it. Not `Time`'s own serde, which reads what a user
/// typed and refuses a bare number (issue 19).
pub fn micros<'de, D: Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
    u64::deserialize(d).map(Time::from_micros)
}

pub fn opt_micros<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    Option::<u64>::deserialize(d).map(|t| t.map(Time::from_micros))
}

/// cake's `bandwidth`: bytes per second, or `"unlimited"`.
pub fn bandwidth_or_unlimited<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rate>, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) => n
            .as_u64()
            .map(|b| Some(Rate::from_bytes_per_sec(b)))
            .ok_or_else(|| de::Error::custom(format!("bandwidth {n} is not a byte rate"))),
        Value::String(s) if s == "unlimited" => Ok(None),
        other => Err(de::Error::custom(format!(
            "bandwidth {other} is neither bytes/s nor \"unlimited\""
        ))),
    }
}

/// cake's `atm` key: "noatm" | "atm" | "ptm".
pub fn framing<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Framing>, D::Error> {
    let s = String::deserialize(d)?;
    match s.as_str() {
        "noatm" => Ok(Some(Framing::None)),
        "atm" => Ok(Some(Framing::Atm)),
        "ptm" => Ok(Some(Framing::Ptm)),
        _ => Err(de::Error::custom(format!(
            "atm {s:?} is not noatm, atm or ptm"
        ))),
    }
}

/// A number tc prints as a string (`"0x12"`, `"0"`) or, in other versions, as a number.
pub fn number_or_text<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| de::Error::custom(format!("{n} is not a whole number"))),
        Value::String(s) => {
            parse_c_number(&s).ok_or_else(|| de::Error::custom(format!("{s:?} is not a number")))
        }
        other => Err(de::Error::custom(format!("{other} is not a number"))),
    }
}

/// `0x12` (hex), `12` (decimal), as C's strtoul with base 0 reads what tc printed.
pub fn parse_c_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}
