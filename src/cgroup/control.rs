//! The swap supervisor's reads and writes of a container's cgroup v2 files (thrash
//! detection, the guard's throttle, the offload's reclaim), each a typed function over the
//! names in `model::cgroup_files`.

use std::path::Path;

use super::files;
use crate::model::cgroup_files::{
    CPU_WEIGHT, IO_WEIGHT, MEMORY_CURRENT, MEMORY_PRESSURE, MEMORY_RECLAIM, MEMORY_STAT, MEMORY_SWAP_CURRENT,
    MEMORY_SWAP_HIGH, MEMORY_SWAP_MAX,
};
use crate::policy::guard::Current;

/// The knobs a throttle lowers, as the files hold them now (None: the file is absent).
pub fn knobs(dir: &Path) -> Current {
    Current {
        swap_current: files::number(dir, MEMORY_SWAP_CURRENT),
        swap_high: files::read(dir, MEMORY_SWAP_HIGH),
        io_weight: files::read(dir, IO_WEIGHT),
        cpu_weight: files::read(dir, CPU_WEIGHT),
    }
}

/// Whether `file` is one of the knobs a throttle may write.
fn is_knob(file: &str) -> bool {
    [MEMORY_SWAP_HIGH, IO_WEIGHT, CPU_WEIGHT].contains(&file)
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
        swap_current: files::number(dir, MEMORY_SWAP_CURRENT)?,
        swap_max,
    })
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
        assert_eq!((f.some_us, f.refaults, f.memory_current, f.swap_max), (7000, 7, 100 << 20, 256 << 20));
        assert_eq!(memory_and_swap(dir.path()), (100 << 20) + 4096);
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
}
