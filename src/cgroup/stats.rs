//! CPU, memory and swap statistics of one cgroup, read from its files: cgroup v2
//! (`cpu.stat`, `memory.current`, `memory.stat`, `memory.max`, the swap files of
//! [`super::swap`], the `*.pressure` files) or the v1 equivalents (no swap, no PSI).
//! No process is spawned.

use std::path::{Path, PathBuf};

use super::files::{keyed, limit, number, read};
use super::pressure;
use super::swap::read_swap;
use super::Hierarchy;
use crate::model::cgroup_stats::{CgroupStats, MemoryStats, PressureSet};

/// Where one cgroup's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupDirs {
    pub v2: bool,
    pub memory: PathBuf,
    pub cpu: PathBuf,
}

impl CgroupDirs {
    /// The directories of cgroup `rel` (e.g. `/kubepods/burstable/pod1/<id>`).
    pub fn locate(rel: &str, unified_root: Option<&Path>, hierarchies: &[Hierarchy]) -> Option<CgroupDirs> {
        let rel = rel.trim_start_matches('/');
        if let Some(root) = unified_root {
            let dir = root.join(rel);
            return Some(CgroupDirs { v2: true, memory: dir.clone(), cpu: dir });
        }
        let v1 = |controller: &str| super::v1_dir(hierarchies, controller, rel);
        Some(CgroupDirs { v2: false, memory: v1("memory")?, cpu: v1("cpuacct")? })
    }
}

/// The files and memory.stat keys of one cgroup version.
struct MemoryFiles {
    usage: &'static str,
    limit: &'static str,
    /// inactive_file, rss, pgfault, pgmajfault.
    keys: [&'static str; 4],
}

const V2: MemoryFiles = MemoryFiles {
    usage: "memory.current",
    limit: "memory.max",
    keys: ["inactive_file", "anon", "pgfault", "pgmajfault"],
};
const V1: MemoryFiles = MemoryFiles {
    usage: "memory.usage_in_bytes",
    limit: "memory.limit_in_bytes",
    keys: ["total_inactive_file", "total_rss", "total_pgfault", "total_pgmajfault"],
};

/// `stat`: the group's memory.stat, read once per sample and shared with the swap figures.
fn memory_stats(dir: &Path, files: &MemoryFiles, stat: &str) -> Option<MemoryStats> {
    let usage = number(dir, files.usage)?;
    let key = |i: usize| keyed(stat, files.keys[i]).unwrap_or(0);
    Some(MemoryStats {
        usage_bytes: usage,
        working_set_bytes: usage.saturating_sub(key(0)),
        rss_bytes: key(1),
        page_faults: key(2),
        major_page_faults: key(3),
        limit_bytes: limit(dir, files.limit),
    })
}

pub fn read_stats(dirs: &CgroupDirs) -> CgroupStats {
    let stat = read(&dirs.memory, "memory.stat").unwrap_or_default();
    if dirs.v2 {
        let cpu = read(&dirs.cpu, "cpu.stat").and_then(|s| keyed(&s, "usage_usec")).map(|us| us * 1000);
        CgroupStats {
            cpu_usage_ns: cpu,
            memory: memory_stats(&dirs.memory, &V2, &stat),
            swap: read_swap(&dirs.memory, &stat),
            pressure: pressure::read_set(&dirs.memory),
        }
    } else {
        CgroupStats {
            cpu_usage_ns: number(&dirs.cpu, "cpuacct.usage"),
            memory: memory_stats(&dirs.memory, &V1, &stat),
            swap: None,
            pressure: PressureSet::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(files: &[(&str, &str)]) -> (tempfile::TempDir, CgroupDirs) {
        let dir = tempfile::tempdir().unwrap();
        for (f, text) in files {
            std::fs::write(dir.path().join(f), text).unwrap();
        }
        let dirs = CgroupDirs { v2: true, memory: dir.path().into(), cpu: dir.path().into() };
        (dir, dirs)
    }

    const MEMORY_STAT: &str = "anon 40960000\nfile 8192000\ninactive_file 4096000\nactive_file 4096000\npgfault 12345\npgmajfault 7\nswapcached 0\n";

    #[test]
    fn cgroup_v2_with_swap() {
        let (_d, dirs) = v2(&[
            ("cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"),
            ("memory.current", "52428800\n"),
            ("memory.stat", MEMORY_STAT),
            ("memory.max", "104857600\n"),
            ("memory.swap.current", "1048576\n"),
            ("memory.swap.max", "536870912\n"),
        ]);
        let stats = read_stats(&dirs);
        assert_eq!(stats.cpu_usage_ns, Some(1_500_000));
        let m = stats.memory.unwrap();
        assert_eq!(
            m,
            MemoryStats {
                usage_bytes: 52428800,
                working_set_bytes: 52428800 - 4096000,
                rss_bytes: 40960000,
                page_faults: 12345,
                major_page_faults: 7,
                limit_bytes: Some(104857600),
            }
        );
        assert_eq!(m.available_bytes(), Some(104857600 - 48332800));
        let s = stats.swap.unwrap();
        assert_eq!((s.usage_bytes, s.available_bytes()), (1048576, Some(536870912 - 1048576)));
    }

    #[test]
    fn cgroup_v2_unlimited_without_swap_files_and_missing_files() {
        let (_d, dirs) = v2(&[("memory.current", "100\n"), ("memory.max", "max\n"), ("memory.swap.max", "max\n")]);
        let stats = read_stats(&dirs);
        let m = stats.memory.unwrap();
        assert_eq!((m.working_set_bytes, m.limit_bytes, m.available_bytes()), (100, None, None));
        assert_eq!(stats.swap, None, "no memory.swap.current: swap omitted");
        assert_eq!(stats.cpu_usage_ns, None);
        let (_d, dirs) = v2(&[("memory.swap.current", "0\n"), ("memory.swap.max", "max\n")]);
        let stats = read_stats(&dirs);
        assert_eq!(stats.swap.unwrap().available_bytes(), None, "unlimited swap has no available figure");
        assert_eq!(stats.memory, None);
        let (_d, dirs) = v2(&[]);
        assert_eq!(read_stats(&dirs), CgroupStats::default());
    }

    #[test]
    fn cgroup_v1() {
        let dir = tempfile::tempdir().unwrap();
        let (mem, cpu) = (dir.path().join("memory"), dir.path().join("cpuacct"));
        std::fs::create_dir_all(&mem).unwrap();
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(mem.join("memory.usage_in_bytes"), "8192000\n").unwrap();
        std::fs::write(mem.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(
            mem.join("memory.stat"),
            "cache 0\nrss 1\ntotal_rss 4096000\ntotal_inactive_file 1000\ntotal_pgfault 9\ntotal_pgmajfault 1\n",
        )
        .unwrap();
        std::fs::write(cpu.join("cpuacct.usage"), "123456789\n").unwrap();
        let stats = read_stats(&CgroupDirs { v2: false, memory: mem, cpu });
        assert_eq!(stats.cpu_usage_ns, Some(123456789));
        let m = stats.memory.unwrap();
        assert_eq!((m.usage_bytes, m.working_set_bytes, m.rss_bytes, m.limit_bytes), (8192000, 8191000, 4096000, None));
        assert_eq!((m.page_faults, m.major_page_faults), (9, 1));
        assert_eq!(stats.swap, None);
    }

    #[test]
    fn locates_v1_and_v2_dirs() {
        let h = |m: &str, v2: bool, o: &[&str]| Hierarchy {
            mountpoint: m.into(),
            v2,
            options: o.iter().map(|s| s.to_string()).collect(),
        };
        let hs = [
            h("/sys/fs/cgroup/memory", false, &["rw", "memory"]),
            h("/sys/fs/cgroup/cpu,cpuacct", false, &["cpu", "cpuacct"]),
        ];
        let d = CgroupDirs::locate("/swapcri/p/c", None, &hs).unwrap();
        assert_eq!(d.memory, PathBuf::from("/sys/fs/cgroup/memory/swapcri/p/c"));
        assert_eq!(d.cpu, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/swapcri/p/c"));
        let d = CgroupDirs::locate("/k/p", Some(Path::new("/sys/fs/cgroup")), &[]).unwrap();
        assert!(d.v2 && d.memory == Path::new("/sys/fs/cgroup/k/p"));
        assert_eq!(CgroupDirs::locate("/x", None, &[]), None);
    }
}
