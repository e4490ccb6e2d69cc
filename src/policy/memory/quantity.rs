//! Kubernetes resource quantities for memory, as crictl users write them in annotations.

/// `1073741824`, `512Mi`, `1Gi`, `1G`, `100M`, `64k` → bytes. Fractions and other suffixes
/// are refused.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffix) = s.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let unit: u64 = match suffix {
        "" => 1,
        "k" => 1000,
        "M" => 1000u64.pow(2),
        "G" => 1000u64.pow(3),
        "T" => 1000u64.pow(4),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for (s, expected) in [
            ("1073741824", Some(1 << 30)),
            ("512Mi", Some(512 << 20)),
            ("1Gi", Some(1 << 30)),
            ("1G", Some(1_000_000_000)),
            ("64k", Some(64_000)),
            (" 2Ki ", Some(2048)),
            ("1.5Gi", None),
            ("", None),
            ("Gi", None),
            ("1gb", None),
            ("-1", None),
            ("99999999999Ti", None),
        ] {
            assert_eq!(parse_bytes(s), expected, "{s:?}");
        }
    }
}
