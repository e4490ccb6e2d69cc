//! Probes the node's memory facts from /proc and the cgroup filesystem. Roots are
//! parameters so tests run on fixture files.

use std::path::Path;

use crate::model::node::CgroupMode;
use crate::model::node::{AllocatableSource, KernelVersion, MemoryFacts};

/// Reads the `<key>: <n> kB` lines of /proc/meminfo, in bytes.
pub fn meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        let mut words = rest.split_whitespace();
        let value: u64 = words.next()?.parse().ok()?;
        match words.next() {
            Some("kB") => value.checked_mul(1024),
            None => Some(value),
            Some(_) => None,
        }
    })
}

/// Whether the v2 hierarchy under `cgroup_root` has swap accounting: a cgroup with the
/// memory controller shows `memory.swap.max`. On a fresh node no such cgroup may exist yet
/// (the root cgroup has no memory files), so a scratch child is made to look.
pub fn swap_accounting(cgroup_root: &Path, mode: CgroupMode) -> bool {
    if mode != CgroupMode::Unified {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(cgroup_root) else { return false };
    if entries.flatten().any(|e| e.path().join("memory.swap.max").exists()) {
        return true;
    }
    let controllers = std::fs::read_to_string(cgroup_root.join("cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "memory") {
        return false;
    }
    // runc enables the controller for containers anyway.
    let _ = std::fs::write(cgroup_root.join("cgroup.subtree_control"), "+memory");
    let probe = cgroup_root.join(format!("swapcri-probe-{}", std::process::id()));
    if std::fs::create_dir(&probe).is_err() {
        return false;
    }
    let found = probe.join("memory.swap.max").exists();
    let _ = std::fs::remove_dir(&probe);
    found
}

/// The memory.max of kubelet's top cgroup (cgroupfs or systemd spelling, also under kind's
/// `cgroupRoot: /kubelet`), when numeric.
fn kubepods_memory_max(cgroup_root: &Path) -> Option<u64> {
    ["kubepods", "kubepods.slice", "kubelet/kubepods", "kubelet.slice/kubelet-kubepods.slice"]
        .iter()
        .find_map(|dir| std::fs::read_to_string(cgroup_root.join(dir).join("memory.max")).ok())
        .and_then(|s| s.trim().parse().ok())
}

pub fn probe(
    proc_root: &Path,
    cgroup_root: &Path,
    mode: CgroupMode,
    page_size: u64,
    allocatable_override: Option<u64>,
) -> MemoryFacts {
    let meminfo = std::fs::read_to_string(proc_root.join("meminfo")).unwrap_or_default();
    let mem_total = meminfo_bytes(&meminfo, "MemTotal").unwrap_or(0);
    let swap_total = meminfo_bytes(&meminfo, "SwapTotal").unwrap_or(0);
    let kernel_release =
        std::fs::read_to_string(proc_root.join("sys/kernel/osrelease")).unwrap_or_default().trim().to_string();
    let (allocatable, allocatable_source) = match allocatable_override {
        Some(bytes) => (bytes, AllocatableSource::Config),
        None => match kubepods_memory_max(cgroup_root) {
            Some(bytes) => (bytes, AllocatableSource::KubepodsMemoryMax),
            None => (mem_total, AllocatableSource::MemTotal),
        },
    };
    MemoryFacts {
        mem_total,
        swap_total,
        page_size,
        kernel: KernelVersion::parse(&kernel_release),
        kernel_release,
        swap_accounting: swap_accounting(cgroup_root, mode),
        allocatable,
        allocatable_source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:       16384000 kB\nMemFree:         1000 kB\nSwapTotal:       8388608 kB\nSwapFree:        8388608 kB\nHugePages_Total:       0\n";

    #[test]
    fn meminfo_values() {
        assert_eq!(meminfo_bytes(MEMINFO, "MemTotal"), Some(16384000 * 1024));
        assert_eq!(meminfo_bytes(MEMINFO, "SwapTotal"), Some(8 << 30));
        assert_eq!(meminfo_bytes(MEMINFO, "HugePages_Total"), Some(0));
        assert_eq!(meminfo_bytes(MEMINFO, "Swap"), None, "a key prefix is not a key");
        assert_eq!(meminfo_bytes("MemTotal: x kB", "MemTotal"), None);
    }

    fn fixture(kubepods_max: Option<&str>, swap_file: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        std::fs::create_dir_all(proc.join("sys/kernel")).unwrap();
        std::fs::write(proc.join("meminfo"), MEMINFO).unwrap();
        std::fs::write(proc.join("sys/kernel/osrelease"), "6.1.0-28-amd64\n").unwrap();
        let cg = dir.path().join("cgroup");
        std::fs::create_dir_all(cg.join("kubepods")).unwrap();
        if let Some(max) = kubepods_max {
            std::fs::write(cg.join("kubepods/memory.max"), max).unwrap();
        }
        if swap_file {
            std::fs::write(cg.join("kubepods/memory.swap.max"), "max\n").unwrap();
        }
        dir
    }

    #[test]
    fn probe_reads_fixture_roots() {
        let dir = fixture(Some("15000000000\n"), true);
        let (proc, cg) = (dir.path().join("proc"), dir.path().join("cgroup"));
        let facts = probe(&proc, &cg, CgroupMode::Unified, 4096, None);
        assert_eq!(facts.mem_total, 16384000 * 1024);
        assert_eq!(facts.swap_total, 8 << 30);
        assert_eq!(facts.kernel, Some(KernelVersion { major: 6, minor: 1 }));
        assert_eq!(facts.kernel_release, "6.1.0-28-amd64");
        assert!(facts.swap_accounting);
        assert_eq!((facts.allocatable, facts.allocatable_source), (15000000000, AllocatableSource::KubepodsMemoryMax));

        let configured = probe(&proc, &cg, CgroupMode::Unified, 4096, Some(1 << 30));
        assert_eq!((configured.allocatable, configured.allocatable_source), (1 << 30, AllocatableSource::Config));
        let hybrid = probe(&proc, &cg, CgroupMode::Hybrid, 4096, None);
        assert!(!hybrid.swap_accounting, "swap limits need cgroup v2");
    }

    #[test]
    fn kubepods_under_a_cgroup_root_of_either_driver() {
        for top in ["kubelet/kubepods", "kubelet.slice/kubelet-kubepods.slice", "kubepods.slice"] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join(top)).unwrap();
            std::fs::write(dir.path().join(top).join("memory.max"), "8589934592\n").unwrap();
            assert_eq!(kubepods_memory_max(dir.path()), Some(8 << 30), "{top}");
        }
    }

    #[test]
    fn allocatable_falls_back_to_mem_total() {
        for kubepods_max in [None, Some("max\n")] {
            let dir = fixture(kubepods_max, false);
            let facts = probe(&dir.path().join("proc"), &dir.path().join("cgroup"), CgroupMode::Unified, 4096, None);
            assert_eq!((facts.allocatable, facts.allocatable_source), (facts.mem_total, AllocatableSource::MemTotal));
            assert!(!facts.swap_accounting);
        }
    }
}
