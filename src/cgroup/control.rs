//! The swap supervisor's reads and writes of a container's cgroup v2 files (thrash
//! detection, the guard's throttle, the offload's reclaim), each a typed function over the
//! names in `model::cgroup_files`.

use std::path::Path;

use super::files;
use super::systemd::Property;
use crate::model::cgroup_files::{
    cpu_max, CGROUP_PROCS, CPU_MAX, CPU_PERIOD_DEFAULT_US, CPU_STAT, CPU_WEIGHT, IO_MAX, IO_WEIGHT, MEMORY_CURRENT,
    MEMORY_PRESSURE, MEMORY_RECLAIM, MEMORY_STAT, MEMORY_SWAP_CURRENT, MEMORY_SWAP_HIGH, MEMORY_SWAP_MAX,
};
use crate::policy::guard::Current;

/// The knobs a throttle lowers, as the files hold them now (None: the file is absent).
pub fn knobs(dir: &Path) -> Current {
    Current {
        swap_current: files::number(dir, MEMORY_SWAP_CURRENT),
        swap_high: files::read(dir, MEMORY_SWAP_HIGH),
        io_weight: files::read(dir, IO_WEIGHT),
        cpu_weight: files::read(dir, CPU_WEIGHT),
        io_max: files::read(dir, IO_MAX),
        cpu_max: files::read(dir, CPU_MAX),
    }
}

/// Whether `file` is one of the knobs a throttle may write.
fn is_knob(file: &str) -> bool {
    [MEMORY_SWAP_HIGH, IO_WEIGHT, CPU_WEIGHT, IO_MAX, CPU_MAX].contains(&file)
}

/// A knob's text now; None for a missing file or a name that is no knob.
pub fn read_knob(dir: &Path, file: &str) -> Option<String> {
    is_knob(file).then(|| files::read(dir, file)).flatten()
}

/// Writes a knob; a name that is no knob is refused (a record names the file).
pub fn write_knob(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    if !is_knob(file) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{file} is not a throttle knob")));
    }
    std::fs::write(dir.join(file), value)
}

/// The systemd unit and property that set a knob of `dir` where systemd owns the file: a
/// scope's or a slice's (a pod's) directory is named after its unit, and systemd writes `cpu.weight` (CPUWeight),
/// `io.weight` (IOWeight) and `cpu.max` (CPUQuotaPerSecUSec, over the unit's period) from
/// the unit's properties again at every daemon-reload. None for a file systemd has no
/// property for (`memory.swap.high`, `io.max` of a device the unit does not name), a group
/// that is no unit's, or a value out of the property's range.
pub fn knob_property(dir: &Path, file: &str, value: &str) -> Option<(String, Property)> {
    let unit = dir.file_name()?.to_str().filter(|n| n.ends_with(".scope") || n.ends_with(".slice"))?;
    let weight = |v: &str| v.trim().parse::<u64>().ok().filter(|w| (1..=10_000).contains(w));
    let property = match file {
        CPU_WEIGHT => Property::CpuWeight(weight(value)?),
        IO_WEIGHT => Property::IoWeight(weight(value.trim().strip_prefix("default ")?)?),
        CPU_MAX => match cpu_max(value) {
            (_, Some(0)) => return None,
            (None, _) => Property::CpuQuotaPerSecUSec(u64::MAX),
            (Some(quota), period) => {
                Property::CpuQuotaPerSecUSec(quota.checked_mul(1_000_000)? / period.unwrap_or(CPU_PERIOD_DEFAULT_US))
            }
        },
        _ => return None,
    };
    Some((unit.to_string(), property))
}

/// Memory and swap in use, bytes (0 for what cannot be read).
pub fn memory_and_swap(dir: &Path) -> u64 {
    let number = |f| files::number(dir, f).unwrap_or(0);
    number(MEMORY_CURRENT) + number(MEMORY_SWAP_CURRENT)
}

/// What the offload looks at; None when the group has no swap share (`memory.swap.max` 0
/// or "max") or a file is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffloadFigures {
    /// `memory.pressure` some total, microseconds.
    pub some_us: u64,
    /// Refaulted pages, anonymous and file.
    pub refaults: u64,
    pub memory_current: u64,
    /// Anonymous memory (`memory.stat` anon).
    pub anon: u64,
    pub swap_current: u64,
    pub swap_max: u64,
}

pub fn offload_figures(dir: &Path) -> Option<OffloadFigures> {
    let swap_max = files::number(dir, MEMORY_SWAP_MAX).filter(|m| *m > 0)?;
    let some_us = super::pressure::parse(&files::read(dir, MEMORY_PRESSURE)?)?.some.total_ns / 1000;
    let stat = files::read(dir, MEMORY_STAT)?;
    let refaults = files::keyed(&stat, "workingset_refault_anon")? + files::keyed(&stat, "workingset_refault_file")?;
    Some(OffloadFigures {
        some_us,
        refaults,
        memory_current: files::number(dir, MEMORY_CURRENT)?,
        anon: files::keyed(&stat, "anon")?,
        swap_current: files::number(dir, MEMORY_SWAP_CURRENT)?,
        swap_max,
    })
}

/// CPU time the group and the groups below it have used, microseconds (`cpu.stat`
/// usage_usec, present with or without the cpu controller).
pub fn cpu_usage_us(dir: &Path) -> Option<u64> {
    files::keyed(&files::read(dir, CPU_STAT)?, "usage_usec")
}

/// The processes in the group and the groups below it, at most `limit` (None past it, or
/// when the group is gone): a container that nests groups of its own is still seen whole.
pub fn processes(dir: &Path, limit: usize) -> Option<Vec<i32>> {
    let mut pids = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for line in files::read(&d, CGROUP_PROCS)?.lines() {
            pids.push(line.trim().parse().ok()?);
        }
        if pids.len() > limit {
            return None;
        }
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
        if dirs.len() > limit {
            return None;
        }
    }
    Some(pids)
}

/// Asks the kernel to reclaim `bytes` from the group. EAGAIN (less could be taken) is not
/// an error: the next look sees what moved.
pub fn reclaim(dir: &Path, bytes: u64) -> std::io::Result<()> {
    match std::fs::write(dir.join(MEMORY_RECLAIM), bytes.to_string()) {
        Err(e) if e.raw_os_error() == Some(nix::libc::EAGAIN) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_knobs_and_reclaim_on_a_fixture_group() {
        let dir = tempfile::tempdir().unwrap();
        let write = |f: &str, v: &str| std::fs::write(dir.path().join(f), v).unwrap();
        write(
            MEMORY_PRESSURE,
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=7000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
        );
        write(MEMORY_STAT, "anon 1\nworkingset_refault_anon 3\nworkingset_refault_file 4\n");
        write(MEMORY_CURRENT, "104857600\n");
        write(MEMORY_SWAP_CURRENT, "4096\n");
        for (swap_max, share) in [("268435456\n", true), ("0\n", false), ("max\n", false)] {
            write(MEMORY_SWAP_MAX, swap_max);
            assert_eq!(offload_figures(dir.path()).is_some(), share, "{swap_max}");
        }
        write(MEMORY_SWAP_MAX, "268435456\n");
        let f = offload_figures(dir.path()).unwrap();
        assert_eq!((f.some_us, f.refaults, f.memory_current, f.anon, f.swap_max), (7000, 7, 100 << 20, 1, 256 << 20));
        assert_eq!(memory_and_swap(dir.path()), (100 << 20) + 4096);
        assert_eq!(cpu_usage_us(dir.path()), None);
        write(CPU_STAT, "usage_usec 52000\nuser_usec 50000\nsystem_usec 2000\n");
        assert_eq!(cpu_usage_us(dir.path()), Some(52000));
        // Knobs: read and written by name; other files are refused.
        write(CPU_WEIGHT, "100\n");
        assert_eq!(knobs(dir.path()).cpu_weight.as_deref(), Some("100\n"));
        assert_eq!(knobs(dir.path()).swap_high, None);
        write_knob(dir.path(), CPU_WEIGHT, "10").unwrap();
        assert_eq!(read_knob(dir.path(), CPU_WEIGHT).as_deref(), Some("10"));
        assert!(write_knob(dir.path(), MEMORY_CURRENT, "1").is_err());
        assert_eq!(read_knob(dir.path(), MEMORY_STAT), None);
        // memory.reclaim on a plain file takes the write; a missing group is an error.
        write(MEMORY_RECLAIM, "");
        assert!(reclaim(dir.path(), 4096).is_ok());
        assert!(reclaim(&dir.path().join("gone"), 4096).is_err());
    }

    #[test]
    fn knobs_systemd_owns_go_through_the_scopes_properties() {
        let scope = Path::new("/sys/fs/cgroup/kubepods.slice/swapcri-abc.scope");
        let cases = [
            (scope, CPU_WEIGHT, "10", Some(Property::CpuWeight(10))),
            (scope, CPU_WEIGHT, "100\n", Some(Property::CpuWeight(100))),
            (scope, IO_WEIGHT, "default 10", Some(Property::IoWeight(10))),
            (scope, IO_WEIGHT, "default 0", None),
            (scope, IO_WEIGHT, "8:0 10", None),
            (scope, CPU_WEIGHT, "20000", None),
            (scope, MEMORY_SWAP_HIGH, "4096", None),
            (scope, CPU_MAX, "10000 100000", Some(Property::CpuQuotaPerSecUSec(100_000))),
            (scope, CPU_MAX, "5000 50000\n", Some(Property::CpuQuotaPerSecUSec(100_000))),
            (scope, CPU_MAX, "max 100000\n", Some(Property::CpuQuotaPerSecUSec(u64::MAX))),
            (scope, CPU_MAX, "1000 0", None),
            (Path::new("/sys/fs/cgroup/kubepods/burstable/pod1/abc"), CPU_WEIGHT, "10", None),
            (Path::new("/sys/fs/cgroup/kubepods/burstable/pod1"), IO_WEIGHT, "default 10", None),
        ];
        for (dir, file, value, want) in cases {
            let got = knob_property(dir, file, value);
            assert_eq!(got.as_ref().map(|(_, p)| p), want.as_ref(), "{file}={value} in {}", dir.display());
            if let Some((unit, _)) = got {
                assert_eq!(unit, "swapcri-abc.scope");
            }
        }
        // A pod's slice, for the pod's part of a throttle.
        let pod = Path::new("/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice");
        assert_eq!(
            knob_property(pod, IO_WEIGHT, "default 10"),
            Some(("kubepods-burstable-pod1.slice".to_string(), Property::IoWeight(10)))
        );
    }

    #[test]
    fn processes_of_a_group_and_the_groups_below_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(CGROUP_PROCS), "10\n11\n").unwrap();
        std::fs::create_dir_all(root.join("inner/deeper")).unwrap();
        std::fs::write(root.join("inner").join(CGROUP_PROCS), "").unwrap();
        std::fs::write(root.join("inner/deeper").join(CGROUP_PROCS), "12\n").unwrap();
        let mut pids = processes(root, 8).unwrap();
        pids.sort();
        assert_eq!(pids, [10, 11, 12]);
        assert_eq!(processes(root, 2), None, "past the limit");
        assert_eq!(processes(&root.join("gone"), 8), None);
        std::fs::write(root.join(CGROUP_PROCS), "10\nx\n").unwrap();
        assert_eq!(processes(root, 8), None, "a line that is no pid");
    }
}
