//! The huge page sizes the kernel offers, named as hugetlb cgroup files and the CRI name them
//! (`2MB`, `1GB`, `64KB`): a container's hugepage limits may name only these.

use std::path::Path;

/// Reads `<sys>/kernel/mm/hugepages/hugepages-<N>kB`; none when the kernel has no hugetlbfs.
pub fn probe(sys: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sys.join("kernel/mm/hugepages")) else { return Vec::new() };
    let mut sizes: Vec<(u64, String)> =
        entries.flatten().filter_map(|e| size_name(&e.file_name().to_string_lossy())).collect();
    sizes.sort();
    sizes.into_iter().map(|(_, name)| name).collect()
}

/// `hugepages-2048kB` → (2048, `2MB`): the largest unit that divides the size.
fn size_name(dir: &str) -> Option<(u64, String)> {
    let kb: u64 = dir.strip_prefix("hugepages-")?.strip_suffix("kB")?.parse().ok()?;
    if kb == 0 {
        return None;
    }
    let name = match kb {
        k if k % (1 << 20) == 0 => format!("{}GB", k >> 20),
        k if k % (1 << 10) == 0 => format!("{}MB", k >> 10),
        k => format!("{k}KB"),
    };
    Some((kb, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_hugetlb_controller() {
        for (dir, want) in [
            ("hugepages-2048kB", Some("2MB")),
            ("hugepages-1048576kB", Some("1GB")),
            ("hugepages-64kB", Some("64KB")),
            ("hugepages-32768kB", Some("32MB")),
            ("hugepages-16777216kB", Some("16GB")),
            ("hugepages-0kB", None),
            ("hugepages-2048", None),
            ("other", None),
        ] {
            assert_eq!(size_name(dir).map(|(_, n)| n), want.map(String::from), "{dir}");
        }
    }

    #[test]
    fn probes_a_sysfs_tree_smallest_first() {
        let sys = tempfile::tempdir().unwrap();
        assert!(probe(sys.path()).is_empty(), "no hugepages directory: no sizes");
        for d in ["hugepages-1048576kB", "hugepages-2048kB", "not-a-size"] {
            std::fs::create_dir_all(sys.path().join("kernel/mm/hugepages").join(d)).unwrap();
        }
        assert_eq!(probe(sys.path()), ["2MB", "1GB"]);
    }
}
