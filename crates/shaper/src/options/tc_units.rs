//! Values in option strings read as tc reads them (iproute2 `tc/tc_util.c`): `get_rate64` (a
//! bare number is bit/s, `bps` units are BYTES per second), `get_time` (a bare number is
//! microseconds), `get_unsigned`. sqm-scripts hands its option strings to tc unchanged, so this is
//! what they meant; the results are unbloat's typed units, written back with explicit units.

use unbloat_units::{Rate, Time};

/// A number with no unit after it (and not 0, which means the same in every unit).
pub fn bare(v: &str) -> bool {
    v.chars().all(|c| c.is_ascii_digit() || c == '.')
        && v.chars().any(|c| c.is_ascii_digit() && c != '0')
}

/// tc's `get_unsigned` (strtoul with base 0: decimal, `0x` hex).
pub fn tc_unsigned(v: &str) -> Option<u32> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

fn split_number(v: &str) -> (&str, String) {
    let at = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    (&v[..at], v[at..].to_ascii_lowercase())
}

/// tc's `get_rate64`: a bare number is bit/s, `bit` units are bits, `bps` units are BYTES.
pub fn tc_rate(v: &str) -> Result<Rate, String> {
    let (num, unit) = split_number(v);
    let bad = || format!("`{v}` is not a rate tc reads");
    if num.is_empty() {
        return Err(bad());
    }
    let (text, bytes) = if unit.is_empty() {
        (format!("{num}bit"), false)
    } else if let Some(prefix) = unit.strip_suffix("bps") {
        (format!("{num}{prefix}bit"), true)
    } else if unit.ends_with("bit") {
        (format!("{num}{unit}"), false)
    } else {
        return Err(bad());
    };
    let r: Rate = text.parse().map_err(|_| bad())?;
    Ok(match bytes {
        true => Rate::from_bits_per_sec(r.bits_per_sec().saturating_mul(8)),
        false => r,
    })
}

/// tc's `get_time`: a bare number is microseconds; s, ms, us and their long forms.
pub fn tc_time(v: &str) -> Result<Time, String> {
    let (num, unit) = split_number(v);
    let ok = matches!(
        unit.as_str(),
        "" | "s" | "sec" | "secs" | "ms" | "msec" | "msecs" | "us" | "usec" | "usecs"
    );
    if num.is_empty() || !ok {
        return Err(format!("`{v}` is not a time tc reads"));
    }
    let unit = if unit.is_empty() {
        "us".to_string()
    } else {
        unit
    };
    format!("{num}{unit}")
        .parse()
        .map_err(|_| format!("`{v}` is not a time tc reads"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqm_tc_units() {
        assert_eq!(tc_rate("20000"), Ok(Rate::from_kbit(20)));
        assert_eq!(tc_rate("20Mbit"), Ok(Rate::from_mbit(20)));
        assert_eq!(tc_rate("1kbps"), Ok(Rate::from_kbit(8)));
        assert!(tc_rate("fast").is_err() && tc_rate("20mb").is_err());
        assert_eq!(tc_time("5"), Ok(Time::from_micros(5)));
        assert_eq!(tc_time("5msec"), Ok(Time::from_millis(5)));
        assert!(tc_time("5min").is_err());
    }
}
