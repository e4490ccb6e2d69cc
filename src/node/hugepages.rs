//! The huge page sizes the kernel offers, named as hugetlb cgroup files and the CRI name them
//! (`2MB`, `1GB`, `64KB`): a container's hugepage limits may name only these.

use std::path::Path;

use crate::cgroup::Hierarchy;
use crate::model::node::CgroupMode;

/// Reads `<sys>/kernel/mm/hugepages/hugepages-<N>kB`; none when the kernel has no hugetlbfs.
pub fn probe(sys: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sys.join("kernel/mm/hugepages")) else { return Vec::new() };
    let mut sizes: Vec<(u64, String)> =
        entries.flatten().filter_map(|e| size_name(&e.file_name().to_string_lossy())).collect();
    sizes.sort();
    sizes.into_iter().map(|(_, name)| name).collect()
}

/// Whether a container's hugepage limits can be set where runc sets them: the hugetlb controller
/// listed in the root's `cgroup.controllers` on cgroup v2, mounted as a v1 hierarchy otherwise
/// (a hybrid node may have it in neither, and runc then fails every create that names one).
pub fn controller(mode: CgroupMode, cgroup_root: &Path, hierarchies: &[Hierarchy]) -> bool {
    match mode {
        CgroupMode::Unified => std::fs::read_to_string(cgroup_root.join("cgroup.controllers"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == "hugetlb")),
        CgroupMode::Hybrid | CgroupMode::Legacy => crate::cgroup::v1_dir(hierarchies, "hugetlb", "").is_some(),
    }
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

    #[test]
    fn the_controller_where_runc_looks_for_it() {
        let root = tempfile::tempdir().unwrap();
        let v1 = |mountpoint: &str, options: &[&str]| Hierarchy {
            mountpoint: mountpoint.into(),
            v2: false,
            options: options.iter().map(|o| o.to_string()).collect(),
        };
        let v2 = Hierarchy { mountpoint: root.path().into(), v2: true, options: vec![] };
        let mounted =
            [v1("/sys/fs/cgroup/memory", &["rw", "memory"]), v1("/sys/fs/cgroup/hugetlb", &["rw", "hugetlb"])];
        let unmounted = [v1("/sys/fs/cgroup/memory", &["rw", "memory"]), v2.clone()];
        std::fs::write(root.path().join("cgroup.controllers"), "cpuset cpu io memory hugetlb pids\n").unwrap();
        for (mode, hierarchies, want) in [
            (CgroupMode::Hybrid, &mounted[..], true),
            (CgroupMode::Legacy, &mounted[..], true),
            // On a hybrid node hugetlb in the v2 hierarchy is not where runc's v1 manager looks.
            (CgroupMode::Hybrid, &unmounted[..], false),
            (CgroupMode::Legacy, &[][..], false),
            (CgroupMode::Unified, &[v2.clone()][..], true),
        ] {
            assert_eq!(controller(mode, root.path(), hierarchies), want, "{mode:?} {hierarchies:?}");
        }
        std::fs::write(root.path().join("cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
        assert!(!controller(CgroupMode::Unified, root.path(), &[v2.clone()]), "not enabled at the root");
        std::fs::remove_file(root.path().join("cgroup.controllers")).unwrap();
        assert!(!controller(CgroupMode::Unified, root.path(), &[v2]), "no cgroup.controllers");
    }
}
