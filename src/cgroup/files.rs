//! Reading a cgroup's interface files: whole files, single numbers, limits and the
//! `key value` lines of `memory.stat`, `cpu.stat` and the `*.events` files. A file that is
//! missing or does not parse is None.

use std::path::Path;

/// `key value` lines (memory.stat, cpu.stat, memory.swap.events).
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

pub fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file)).ok()
}

pub fn number(dir: &Path, file: &str) -> Option<u64> {
    read(dir, file)?.trim().parse().ok()
}

/// A limit file: `max` (v2) or a huge page-aligned value (v1 unlimited) are no limit.
pub fn limit(dir: &Path, file: &str) -> Option<u64> {
    number(dir, file).filter(|v| *v < (1 << 62))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_numbers_and_limits() {
        let text = "anon 10\nanon_thp 20\nfile x\n";
        assert_eq!((keyed(text, "anon"), keyed(text, "anon_thp")), (Some(10), Some(20)));
        assert_eq!((keyed(text, "file"), keyed(text, "an")), (None, None));
        let dir = tempfile::tempdir().unwrap();
        for (f, v) in [("a", "42\n"), ("max", "max\n"), ("v1", "9223372036854771712\n")] {
            std::fs::write(dir.path().join(f), v).unwrap();
        }
        assert_eq!((number(dir.path(), "a"), limit(dir.path(), "a")), (Some(42), Some(42)));
        assert_eq!((limit(dir.path(), "max"), limit(dir.path(), "v1"), limit(dir.path(), "none")), (None, None, None));
    }
}
