//! The memory plan's files in a cgroup v2 directory: read back and compared with the plan,
//! and the pod-level reservations written on parents swapcri owns.

use std::io;
use std::path::Path;

use crate::model::memory::CgroupValue;

/// A plan value that the kernel does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub file: String,
    pub expected: String,
    pub found: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: expected {} (page-rounded), found {}", self.file, self.expected, self.found)
    }
}

/// What reading a plan back found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadBack {
    /// The planned values the kernel does not hold (none: the plan holds).
    Compared(Vec<Mismatch>),
    /// The cgroup is not there: the kernel removes a cgroup only once no process is left in
    /// it (systemd does so for a scope as soon as it empties), or it was never made.
    Missing,
}

/// Reads each planned file of `dir` and compares it with the plan's value rounded down to
/// whole pages, as the kernel stores it.
pub fn compare(dir: &Path, planned: &[(&str, CgroupValue)], page_size: u64) -> ReadBack {
    let mut vanished = false;
    let mismatches = planned
        .iter()
        .filter_map(|(file, value)| {
            let expected = value.page_rounded(page_size);
            let found = match std::fs::read_to_string(dir.join(file)) {
                Ok(text) => text.trim().to_string(),
                Err(e) => {
                    // ENOENT, or ENODEV from a cgroup being removed under the read.
                    vanished = true;
                    format!("unreadable ({e})")
                }
            };
            (CgroupValue::parse(&found) != Some(expected)).then(|| Mismatch {
                file: file.to_string(),
                expected: expected.render(),
                found,
            })
        })
        .collect();
    if vanished && !dir.exists() {
        return ReadBack::Missing;
    }
    ReadBack::Compared(mismatches)
}

/// Enables the memory controller on the way from `root` down to `rel` (exclusive) and
/// creates missing directories, so `rel` has memory files.
pub fn ensure_memory_path(root: &Path, rel: &str) -> io::Result<()> {
    let mut dir = root.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        let controllers = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        if !controllers.split_whitespace().any(|c| c == "memory") {
            std::fs::write(dir.join("cgroup.subtree_control"), "+memory")?;
        }
        dir.push(part);
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_back_compares_page_rounded_values() {
        let dir = tempfile::tempdir().unwrap();
        let write = |f: &str, v: &str| std::fs::write(dir.path().join(f), v).unwrap();
        write("memory.swap.max", "536866816\n"); // 536870000 rounded down to pages
        write("memory.min", "0\n");
        write("memory.high", "max\n");
        let planned = [
            ("memory.swap.max", CgroupValue::Bytes(536870000)),
            ("memory.min", CgroupValue::Bytes(1 << 20)),
            ("memory.high", CgroupValue::Max),
            ("memory.low", CgroupValue::Bytes(4096)),
        ];
        let ReadBack::Compared(mismatches) = compare(dir.path(), &planned, 4096) else {
            panic!("the directory is there")
        };
        assert_eq!(mismatches.len(), 2, "{mismatches:?}");
        assert_eq!(
            mismatches[0],
            Mismatch { file: "memory.min".into(), expected: "1048576".into(), found: "0".into() }
        );
        assert_eq!(mismatches[1].file, "memory.low");
        assert!(mismatches[1].found.starts_with("unreadable"), "{}", mismatches[1]);
        assert_eq!(compare(dir.path(), &planned[..1], 4096), ReadBack::Compared(Vec::new()));
        assert_ne!(compare(dir.path(), &[("memory.swap.max", CgroupValue::Max)], 4096), ReadBack::Compared(Vec::new()));
    }

    #[test]
    fn a_cgroup_that_is_gone_is_missing_not_mismatched() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("swapcri-abc.scope");
        let planned = [("memory.swap.max", CgroupValue::Bytes(0))];
        assert_eq!(compare(&gone, &planned, 4096), ReadBack::Missing);
        // A file missing from a cgroup that is there is a mismatch (a kernel without it).
        std::fs::create_dir(&gone).unwrap();
        let ReadBack::Compared(m) = compare(&gone, &planned, 4096) else { panic!("the directory is there") };
        assert!(m[0].found.starts_with("unreadable"), "{m:?}");
    }

    #[test]
    fn memory_path_enables_the_controller_on_the_way_down() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.subtree_control"), "cpu io\n").unwrap();
        ensure_memory_path(root.path(), "/swapcri/pod1").unwrap();
        assert_eq!(std::fs::read_to_string(root.path().join("cgroup.subtree_control")).unwrap(), "+memory");
        assert_eq!(std::fs::read_to_string(root.path().join("swapcri/cgroup.subtree_control")).unwrap(), "+memory");
        assert!(root.path().join("swapcri/pod1").is_dir());
        assert!(!root.path().join("swapcri/pod1/cgroup.subtree_control").exists(), "the leaf is left alone");
    }
}
