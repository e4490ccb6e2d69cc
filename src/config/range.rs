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

/// A count or a size that must not be 0 (seconds, bytes, connections).
pub fn positive(key: &'static str, value: u64) -> Result<(), Invalid> {
    if value > 0 {
        return Ok(());
    }
    Err((key, "must be at least 1".to_string()))
}

/// A share of a whole: above 0, at most 1.
pub fn fraction(key: &'static str, value: f64) -> Result<(), Invalid> {
    if value > 0.0 && value <= 1.0 {
        return Ok(());
    }
    Err((key, format!("{value} is not in (0, 1]")))
}

/// Tests: the key a section's check refuses once `change` is made to its defaults (None:
/// accepted).
#[cfg(test)]
pub fn refused<S: Default>(check: fn(&S) -> Result<(), Invalid>, change: impl FnOnce(&mut S)) -> Option<&'static str> {
    let mut section = S::default();
    change(&mut section);
    check(&section).err().map(|(key, _)| key)
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
            (positive("k", 1), true),
            (positive("k", 0), false),
            (fraction("k", 1.0), true),
            (fraction("k", 0.0), false),
            (fraction("k", 1.5), false),
            (fraction("k", f64::NAN), false),
        ];
        for (i, (result, ok)) in cases.iter().enumerate() {
            assert_eq!(result.is_ok(), *ok, "case {i}: {result:?}");
        }
        assert_eq!(within("a.b", 0u64, 1..=10), Err(("a.b", "0 is not in 1..=10".to_string())));
    }
}
