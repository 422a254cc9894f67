//! Splitting "19.95mbit" into an exact decimal number and a unit suffix.
//!
//! Numbers are kept as an integer mantissa and a count of decimal places, never as floats, so
//! `19.95mbit` is exactly 19 950 000 bit/s and not 19 949 999.

/// A non-negative decimal number as typed: `mantissa / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decimal {
    pub mantissa: u128,
    pub scale: u32,
}

impl Decimal {
    /// Multiplies by `factor / divisor` and returns the result if it is a whole number that fits.
    pub fn scaled(self, factor: u128, divisor: u128) -> Result<u64, &'static str> {
        let num = self.mantissa.checked_mul(factor).ok_or("too large")?;
        let den = 10u128
            .checked_pow(self.scale)
            .ok_or("too many decimal places")?
            * divisor;
        if num % den != 0 {
            return Err("not a whole number in the base unit");
        }
        u64::try_from(num / den).map_err(|_| "too large")
    }

    /// The whole part: 19 for `19.95`.
    pub fn whole(self) -> u128 {
        10u128
            .checked_pow(self.scale)
            .map_or(0, |d| self.mantissa / d)
    }

    pub fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    /// The number divided by `10^places`, exactly (`19950` shifted by 3 is `19.95`).
    pub fn shifted(self, places: u32) -> Decimal {
        Decimal {
            mantissa: self.mantissa,
            scale: self.scale + places,
        }
    }
}

impl std::fmt::Display for Decimal {
    /// The shortest exact decimal: `19.95`, `20`, `0.5` (no trailing zeros, no exponent).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digits = self.mantissa.to_string();
        let scale = self.scale as usize;
        let (int, frac) = if digits.len() > scale {
            let (i, r) = digits.split_at(digits.len() - scale);
            (i.to_string(), r.to_string())
        } else {
            (
                "0".to_string(),
                format!("{}{digits}", "0".repeat(scale - digits.len())),
            )
        };
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            f.write_str(&int)
        } else {
            write!(f, "{int}.{frac}")
        }
    }
}

/// Splits text into a decimal number and the (lower-cased) unit after it.
pub(crate) fn split(text: &str) -> Result<(Decimal, String), String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty".into());
    }
    if t.starts_with('-') {
        return Err("may not be negative".into());
    }
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    if num.is_empty() {
        return Err("must start with a number".into());
    }
    let mut parts = num.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next().unwrap_or("");
    if frac.contains('.') || (int.is_empty() && frac.is_empty()) {
        return Err(format!("{num:?} is not a number"));
    }
    if frac.len() > 18 {
        return Err("too many decimal places".into());
    }
    let digits = format!("{int}{frac}");
    let mantissa: u128 = digits.parse().map_err(|_| "too large".to_string())?;
    let dec = Decimal {
        mantissa,
        scale: frac.len() as u32,
    };
    Ok((dec, unit.trim().to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_number_and_unit() {
        let (d, u) = split("19.95mbit").unwrap();
        assert_eq!((d.mantissa, d.scale, u.as_str()), (1995, 2, "mbit"));
        assert_eq!(d.scaled(1_000_000, 1), Ok(19_950_000));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "-5mbit", "mbit", "1.2.3mbit", ".", "1..2"] {
            assert!(split(bad).is_err(), "{bad:?} should not split");
        }
    }

    #[test]
    fn decimals_print_exactly() {
        for (text, shift, want) in [
            ("19950", 3, "19.95"),
            ("20000", 3, "20"),
            ("0.5", 0, "0.5"),
            ("5", 2, "0.05"),
            ("1.50", 0, "1.5"),
            ("0", 3, "0"),
        ] {
            let (d, _) = split(text).unwrap();
            assert_eq!(d.shifted(shift).to_string(), want, "{text}");
        }
    }

    #[test]
    fn fractions_that_do_not_divide_are_refused() {
        let (d, _) = split("0.3").unwrap();
        assert!(d.scaled(1, 1).is_err());
        assert_eq!(d.scaled(10, 1), Ok(3));
    }
}
