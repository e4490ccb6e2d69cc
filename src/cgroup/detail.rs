//! The figures of one cgroup beyond CPU, memory and swap usage, for the cadvisor-named CRI
//! metrics: CPU time split and CFS throttling, CPU and memory settings, memory breakdown and
//! failures, OOM kills, processes, threads, open files and I/O per device. Read from cgroup v2
//! files, or from the v1 controllers' own hierarchies. A figure the node does not have is None.

use std::path::{Path, PathBuf};

use super::files::{keyed, number, read};
use super::Hierarchy;
use crate::model::cgroup_files::{cpu_max, CPU_MAX};
use crate::model::cgroup_stats::{Detail, DeviceIo};

/// Where one cgroup's files are, per controller (all the same directory on cgroup v2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetailDirs {
    pub v2: bool,
    pub memory: PathBuf,
    pub cpuacct: PathBuf,
    pub cpu: PathBuf,
    pub pids: Option<PathBuf>,
    pub blkio: Option<PathBuf>,
}

impl DetailDirs {
    pub fn locate(rel: &str, unified_root: Option<&Path>, hierarchies: &[Hierarchy]) -> Option<DetailDirs> {
        let rel = rel.trim_start_matches('/');
        if let Some(root) = unified_root {
            let dir = root.join(rel);
            return Some(DetailDirs {
                v2: true,
                memory: dir.clone(),
                cpuacct: dir.clone(),
                cpu: dir.clone(),
                pids: Some(dir.clone()),
                blkio: Some(dir),
            });
        }
        let v1 = |controller: &str| super::v1_dir(hierarchies, controller, rel);
        Some(DetailDirs {
            v2: false,
            memory: v1("memory")?,
            cpuacct: v1("cpuacct")?,
            cpu: v1("cpu")?,
            pids: v1("pids"),
            blkio: v1("blkio"),
        })
    }
}

/// Processes in the cgroup itself (`cgroup.procs`), without the figures `read_detail`
/// adds (open files, I/O): what pod statistics count.
pub fn process_count(dirs: &DetailDirs) -> Option<u64> {
    count_lines(&dirs.memory, "cgroup.procs")
}

/// Lines in a file (cgroup.procs, tasks).
fn count_lines(dir: &Path, file: &str) -> Option<u64> {
    Some(read(dir, file)?.lines().filter(|l| !l.trim().is_empty()).count() as u64)
}

/// File descriptors and sockets of the processes listed in `cgroup.procs`.
fn open_files(dir: &Path) -> (Option<u64>, Option<u64>) {
    let Some(procs) = read(dir, "cgroup.procs") else { return (None, None) };
    let (mut fds, mut sockets) = (0u64, 0u64);
    for pid in procs.lines().filter(|l| !l.is_empty()) {
        let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for entry in entries.flatten() {
            fds += 1;
            if std::fs::read_link(entry.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:")) {
                sockets += 1;
            }
        }
    }
    (Some(fds), Some(sockets))
}

/// cgroup v2 `io.stat`: `MAJ:MIN rbytes=… wbytes=… rios=… wios=… …` per line.
pub fn parse_io_stat(text: &str) -> Vec<DeviceIo> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let (major, minor) = words.next()?.split_once(':')?;
            let mut io = DeviceIo { major: major.parse().ok()?, minor: minor.parse().ok()?, ..Default::default() };
            for w in words {
                let (k, v) = w.split_once('=')?;
                let v = v.parse().unwrap_or(0);
                match k {
                    "rbytes" => io.read_bytes = v,
                    "wbytes" => io.write_bytes = v,
                    "rios" => io.reads = v,
                    "wios" => io.writes = v,
                    _ => {}
                }
            }
            Some(io)
        })
        .collect()
}

/// cgroup v1 blkio: `MAJ:MIN Read N` / `Write N` lines of the bytes and operations files.
pub fn parse_blkio(bytes: &str, ops: &str) -> Vec<DeviceIo> {
    let mut out: Vec<DeviceIo> = Vec::new();
    let mut add = |text: &str, is_bytes: bool| {
        for l in text.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [dev, op, value] = f[..] else { continue };
            let Some((major, minor)) = dev.split_once(':') else { continue };
            let (Ok(major), Ok(minor), Ok(value)) = (major.parse(), minor.parse(), value.parse::<u64>()) else {
                continue;
            };
            let pos = match out.iter().position(|d| d.major == major && d.minor == minor) {
                Some(p) => p,
                None => {
                    out.push(DeviceIo { major, minor, ..Default::default() });
                    out.len() - 1
                }
            };
            let d = &mut out[pos];
            match (op, is_bytes) {
                ("Read", true) => d.read_bytes = value,
                ("Write", true) => d.write_bytes = value,
                ("Read", false) => d.reads = value,
                ("Write", false) => d.writes = value,
                _ => {}
            }
        }
    };
    add(bytes, true);
    add(ops, false);
    out
}

/// cgroup v2 cpu.weight (1–10000) back to v1 shares (2–262144), the inverse of the
/// conversion runc and kubelet use.
fn weight_to_shares(weight: u64) -> u64 {
    2 + (weight.saturating_sub(1) * 262142) / 9999
}

pub fn read_detail(dirs: &DetailDirs) -> Detail {
    if dirs.v2 {
        read_v2(dirs)
    } else {
        read_v1(dirs)
    }
}

fn read_v2(dirs: &DetailDirs) -> Detail {
    let dir = &dirs.memory;
    let cpu_stat = read(dir, "cpu.stat").unwrap_or_default();
    let us = |key: &str| keyed(&cpu_stat, key).map(|v| v * 1000);
    let stat = read(dir, "memory.stat");
    let mem = |key: &str| stat.as_deref().and_then(|s| keyed(s, key));
    let events = read(dir, "memory.events");
    let event = |key: &str| events.as_deref().and_then(|s| keyed(s, key));
    let (cpu_quota_us, cpu_period_us) = read(dir, CPU_MAX).as_deref().map_or((None, None), cpu_max);
    let (file_descriptors, sockets) = open_files(dir);
    Detail {
        cpu_user_ns: us("user_usec"),
        cpu_system_ns: us("system_usec"),
        cfs_periods: keyed(&cpu_stat, "nr_periods"),
        cfs_throttled_periods: keyed(&cpu_stat, "nr_throttled"),
        cfs_throttled_ns: us("throttled_usec"),
        cpu_period_us,
        cpu_quota_us,
        cpu_shares: number(dir, "cpu.weight").map(weight_to_shares),
        memory_cache: mem("file"),
        memory_mapped_file: mem("file_mapped"),
        memory_kernel: mem("kernel").or_else(|| Some(mem("kernel_stack")? + mem("slab")? + mem("sock").unwrap_or(0))),
        memory_max_usage: number(dir, "memory.peak"),
        memory_failcnt: event("max"),
        // v2 memory.stat is hierarchical: the same figure for both scopes.
        pgfault: mem("pgfault").map(|v| (v, v)),
        pgmajfault: mem("pgmajfault").map(|v| (v, v)),
        oom_kills: event("oom_kill"),
        processes: count_lines(dir, "cgroup.procs"),
        threads: number(dir, "pids.current").or_else(|| count_lines(dir, "cgroup.threads")),
        threads_max: read(dir, "pids.max").map(|v| v.trim().parse().unwrap_or(0)),
        file_descriptors,
        sockets,
        io: read(dir, "io.stat").map(|t| parse_io_stat(&t)).unwrap_or_default(),
        v1_swap: None,
    }
}

fn read_v1(dirs: &DetailDirs) -> Detail {
    let mem_dir = &dirs.memory;
    let stat = read(mem_dir, "memory.stat");
    let mem = |key: &str| stat.as_deref().and_then(|s| keyed(s, key));
    let both = |own: &str, total: &str| Some((mem(own)?, mem(total)?));
    let cpuacct = read(&dirs.cpuacct, "cpuacct.stat").unwrap_or_default();
    // cpuacct.stat is in USER_HZ ticks (100 a second on Linux).
    let ticks = |key: &str| keyed(&cpuacct, key).map(|t| t * 10_000_000);
    let cpu_stat = read(&dirs.cpu, "cpu.stat").unwrap_or_default();
    let oom = read(mem_dir, "memory.oom_control");
    let (file_descriptors, sockets) = open_files(mem_dir);
    Detail {
        cpu_user_ns: ticks("user"),
        cpu_system_ns: ticks("system"),
        cfs_periods: keyed(&cpu_stat, "nr_periods"),
        cfs_throttled_periods: keyed(&cpu_stat, "nr_throttled"),
        cfs_throttled_ns: keyed(&cpu_stat, "throttled_time"),
        cpu_period_us: number(&dirs.cpu, "cpu.cfs_period_us"),
        cpu_quota_us: read(&dirs.cpu, "cpu.cfs_quota_us")
            .and_then(|q| q.trim().parse::<i64>().ok())
            .and_then(|q| u64::try_from(q).ok()),
        cpu_shares: number(&dirs.cpu, "cpu.shares"),
        memory_cache: mem("total_cache"),
        memory_mapped_file: mem("total_mapped_file"),
        memory_kernel: number(mem_dir, "memory.kmem.usage_in_bytes"),
        memory_max_usage: number(mem_dir, "memory.max_usage_in_bytes"),
        memory_failcnt: number(mem_dir, "memory.failcnt"),
        pgfault: both("pgfault", "total_pgfault"),
        pgmajfault: both("pgmajfault", "total_pgmajfault"),
        oom_kills: oom.as_deref().and_then(|s| keyed(s, "oom_kill")),
        processes: count_lines(mem_dir, "cgroup.procs"),
        threads: count_lines(mem_dir, "tasks"),
        threads_max: dirs.pids.as_deref().and_then(|d| read(d, "pids.max")).map(|v| v.trim().parse().unwrap_or(0)),
        file_descriptors,
        sockets,
        io: dirs
            .blkio
            .as_deref()
            .map(|d| {
                parse_blkio(
                    &read(d, "blkio.throttle.io_service_bytes_recursive").unwrap_or_default(),
                    &read(d, "blkio.throttle.io_serviced_recursive").unwrap_or_default(),
                )
            })
            .unwrap_or_default(),
        v1_swap: v1_swap(mem_dir),
    }
}

fn v1_swap(dir: &Path) -> Option<(u64, Option<u64>)> {
    let usage = number(dir, "memory.memsw.usage_in_bytes")?.saturating_sub(number(dir, "memory.usage_in_bytes")?);
    let unlimited = |v: u64| v >= (1 << 62);
    let limit = match (number(dir, "memory.memsw.limit_in_bytes"), number(dir, "memory.limit_in_bytes")) {
        (Some(sw), Some(mem)) if !unlimited(sw) && !unlimited(mem) => Some(sw.saturating_sub(mem)),
        _ => None,
    };
    Some((usage, limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_v2_files() {
        let dir = tempfile::tempdir().unwrap();
        for (f, text) in [
            (
                "cpu.stat",
                "usage_usec 3000\nuser_usec 2000\nsystem_usec 1000\nnr_periods 7\nnr_throttled 2\nthrottled_usec 500\n",
            ),
            ("cpu.max", "20000 100000\n"),
            ("cpu.weight", "100\n"),
            ("memory.stat", "anon 1\nfile 4096\nkernel 8192\nfile_mapped 1024\npgfault 9\npgmajfault 1\n"),
            ("memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"),
            ("memory.peak", "65536\n"),
            ("cgroup.procs", ""),
            ("pids.current", "4\n"),
            ("pids.max", "max\n"),
            ("io.stat", "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n"),
        ] {
            std::fs::write(dir.path().join(f), text).unwrap();
        }
        let p = dir.path().to_path_buf();
        let dirs = DetailDirs {
            v2: true,
            memory: p.clone(),
            cpuacct: p.clone(),
            cpu: p.clone(),
            pids: Some(p.clone()),
            blkio: Some(p),
        };
        let d = read_detail(&dirs);
        assert_eq!((d.cpu_user_ns, d.cpu_system_ns), (Some(2_000_000), Some(1_000_000)));
        assert_eq!((d.cfs_periods, d.cfs_throttled_periods, d.cfs_throttled_ns), (Some(7), Some(2), Some(500_000)));
        assert_eq!(
            (d.cpu_quota_us, d.cpu_period_us, d.cpu_shares),
            (Some(20000), Some(100000), Some(2 + 99 * 262142 / 9999))
        );
        assert_eq!((d.memory_cache, d.memory_mapped_file, d.memory_kernel), (Some(4096), Some(1024), Some(8192)));
        assert_eq!((d.memory_max_usage, d.memory_failcnt, d.oom_kills), (Some(65536), Some(3), Some(1)));
        assert_eq!((d.pgfault, d.pgmajfault), (Some((9, 9)), Some((1, 1))));
        assert_eq!((d.processes, d.threads, d.threads_max), (Some(0), Some(4), Some(0)));
        assert_eq!(
            d.io,
            vec![DeviceIo { major: 8, minor: 0, read_bytes: 4096, write_bytes: 8192, reads: 1, writes: 2 }]
        );
        assert_eq!((d.file_descriptors, d.sockets), (Some(0), Some(0)));
    }

    #[test]
    fn cgroup_v1_blkio_and_weights() {
        let io = parse_blkio("8:0 Read 10\n8:0 Write 20\n8:16 Read 5\nTotal 35\n", "8:0 Read 1\n8:0 Write 2\n");
        assert_eq!(io[0], DeviceIo { major: 8, minor: 0, read_bytes: 10, write_bytes: 20, reads: 1, writes: 2 });
        assert_eq!(io[1].read_bytes, 5);
        assert_eq!(weight_to_shares(1), 2);
        assert_eq!(weight_to_shares(10000), 262144);
        assert!(parse_io_stat("garbage\n").is_empty());
    }
}
