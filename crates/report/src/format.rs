//! How numbers are spelled for people: "12.3 ms", "18.9 Mbit/s", "0.4 %". Shared by the
//! terminal summary and the plots so both say the same thing the same way.

/// Milliseconds with one decimal ("12.3 ms"), three significant digits from 100 ms on
/// ("153 ms"); "-" when absent.
pub fn ms(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() && v.abs() >= 100.0 => format!("{v:.0} ms"),
        Some(v) if v.is_finite() => format!("{v:.1} ms"),
        _ => "-".to_string(),
    }
}

/// A rate in bit/s with an SI prefix chosen so the number is below 1000 ("18.9 Mbit/s");
/// "-" when absent.
pub fn rate(bps: Option<f64>) -> String {
    let Some(v) = bps.filter(|v| v.is_finite()) else {
        return "-".to_string();
    };
    let (scale, unit) = rate_unit(v);
    let x = v / scale;
    if x.abs() >= 100.0 {
        format!("{x:.0} {unit}")
    } else {
        format!("{x:.1} {unit}")
    }
}

/// The (divisor, unit) that shows `bps` with fewer than four integer digits.
pub fn rate_unit(bps: f64) -> (f64, &'static str) {
    let a = bps.abs();
    if a >= 1e9 {
        (1e9, "Gbit/s")
    } else if a >= 1e6 {
        (1e6, "Mbit/s")
    } else if a >= 1e3 {
        (1e3, "kbit/s")
    } else {
        (1.0, "bit/s")
    }
}

/// A ratio 0..=1 as a percentage ("0.4 %"); "-" when absent.
pub fn percent(ratio: Option<f64>) -> String {
    match ratio {
        Some(r) if r.is_finite() => format!("{:.1} %", r * 100.0),
        _ => "-".to_string(),
    }
}

/// A plain number with `decimals` decimals; "-" when absent.
pub fn number(value: Option<f64>, decimals: usize) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".to_string(),
    }
}

/// Unix time as flent's UTC timestamp, `%Y-%m-%dT%H:%M:%S.%fZ` (also the results files' names).
pub fn iso_utc(unix: f64) -> String {
    let unix = if unix.is_finite() { unix } else { 0.0 };
    let micros_total = (unix * 1e6).round() as i64;
    let secs = micros_total.div_euclid(1_000_000);
    let micros = micros_total.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days: days since 1970-01-01 to a proleptic Gregorian date.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spells_units() {
        assert_eq!(ms(Some(12.34)), "12.3 ms");
        assert_eq!(ms(Some(153.4)), "153 ms");
        assert_eq!(ms(None), "-");
        assert_eq!(ms(Some(f64::NAN)), "-");
        assert_eq!(rate(Some(18.94e6)), "18.9 Mbit/s");
        assert_eq!(rate(Some(940e6)), "940 Mbit/s");
        assert_eq!(rate(Some(1.5e9)), "1.5 Gbit/s");
        assert_eq!(rate(Some(64e3)), "64.0 kbit/s");
        assert_eq!(rate(Some(0.0)), "0.0 bit/s");
        assert_eq!(rate(None), "-");
        assert_eq!(percent(Some(0.004)), "0.4 %");
        assert_eq!(number(Some(0.98765), 2), "0.99");
    }
}
