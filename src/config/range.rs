//! The one check of a setting against its range: each section lists its settings' ranges,
//! and every error names the key and reads the same way.

use std::fmt::Display;
use std::ops::RangeInclusive;

/// A setting out of its range: its key and why.
pub type Invalid = (&'static str, String);

/// `value` within `range`, both ends included (NaN never is).
pub fn within<T: PartialOrd + Display>(key: &'static str, value: T, range: RangeInclusive<T>) -> Result<(), Invalid> {
    if range.contains(&value) {
        return Ok(());
    }
    Err((key, format!("{value} is not in {}..={}", range.start(), range.end())))
}

/// A share of time in percent: above 0, at most 100.
pub fn percent(key: &'static str, value: f64) -> Result<(), Invalid> {
    if value > 0.0 && value <= 100.0 {
        return Ok(());
    }
    Err((key, format!("{value} is not in (0, 100]")))
}

/// A finite figure, 0 or more (a rate, or a percent that may pass 100).
pub fn non_negative(key: &'static str, value: f64) -> Result<(), Invalid> {
    if value >= 0.0 && value.is_finite() {
        return Ok(());
    }
    Err((key, format!("{value} is not a finite figure of 0 or more")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_check_takes_its_bounds_and_refuses_the_rest() {
        let cases: &[(Result<(), Invalid>, bool)] = &[
            (within("k", 1u64, 1..=10), true),
            (within("k", 10u64, 1..=10), true),
            (within("k", 0u64, 1..=10), false),
            (within("k", 11u64, 1..=10), false),
            (within("k", f64::NAN, 0.0..=1.0), false),
            (percent("k", 100.0), true),
            (percent("k", 0.0), false),
            (percent("k", 100.5), false),
            (percent("k", f64::NAN), false),
            (non_negative("k", 0.0), true),
            (non_negative("k", 250.0), true),
            (non_negative("k", -1.0), false),
            (non_negative("k", f64::INFINITY), false),
        ];
        for (i, (result, ok)) in cases.iter().enumerate() {
            assert_eq!(result.is_ok(), *ok, "case {i}: {result:?}");
        }
        assert_eq!(within("a.b", 0u64, 1..=10), Err(("a.b", "0 is not in 1..=10".to_string())));
    }
}
