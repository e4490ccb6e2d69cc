//! Pressure stall information of a cgroup v2 group (`cpu.pressure`, `memory.pressure`,
//! `io.pressure`). A file that is missing (cgroup v1, a kernel without PSI, or
//! `psi=0`) gives no figures at all rather than zeros.

use std::path::Path;

use crate::model::cgroup_stats::{Pressure, PressureSet, PsiLine};

fn line(fields: &str) -> Option<PsiLine> {
    let mut out = PsiLine::default();
    for field in fields.split_whitespace() {
        let (key, value) = field.split_once('=')?;
        match key {
            "avg10" => out.avg10 = value.parse().ok()?,
            "avg60" => out.avg60 = value.parse().ok()?,
            "avg300" => out.avg300 = value.parse().ok()?,
            "total" => out.total_ns = value.parse::<u64>().ok()?.saturating_mul(1000),
            _ => {}
        }
    }
    Some(out)
}

/// Parses a pressure file. A `some` line is required; `full` is absent for cpu on
/// kernels before 5.13 and is then reported as zero stall.
pub fn parse(text: &str) -> Option<Pressure> {
    let mut some = None;
    let mut full = None;
    for l in text.lines() {
        match l.split_once(' ') {
            Some(("some", rest)) => some = Some(line(rest)?),
            Some(("full", rest)) => full = Some(line(rest)?),
            _ => {}
        }
    }
    Some(Pressure { some: some?, full: full.unwrap_or_default() })
}

fn read(dir: &Path, file: &str) -> Option<Pressure> {
    parse(&std::fs::read_to_string(dir.join(file)).ok()?)
}

/// Reads the pressure files of a cgroup v2 directory.
pub fn read_set(dir: &Path) -> PressureSet {
    PressureSet { cpu: read(dir, "cpu.pressure"), memory: read(dir, "memory.pressure"), io: read(dir, "io.pressure") }
}

/// Arms a PSI trigger on the group's `memory.pressure`: the kernel marks the descriptor
/// readable with priority (POLLPRI) when some task of the group stalled on memory for
/// `stall_us` within a `window_us` window (at most once per window). It lasts as long as
/// the descriptor, and is an error where the kernel has no PSI or the group is gone.
pub fn memory_trigger(dir: &Path, stall_us: u64, window_us: u64) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(dir.join(crate::model::cgroup_files::MEMORY_PRESSURE))?;
    file.write_all(format!("some {stall_us} {window_us}").as_bytes())?;
    Ok(file.into())
}

/// The running totals thrash detection reads each second: memory stall (some, full) in
/// microseconds and anonymous refaults; None where a file is missing.
pub fn memory_totals(dir: &Path) -> Option<(u64, u64, u64)> {
    use crate::model::cgroup_files::{MEMORY_PRESSURE, MEMORY_STAT};
    let p = read(dir, MEMORY_PRESSURE)?;
    let stat = std::fs::read_to_string(dir.join(MEMORY_STAT)).ok()?;
    let refaults = super::files::keyed(&stat, "workingset_refault_anon")?;
    Some((p.some.total_ns / 1000, p.full.total_ns / 1000, refaults))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_format() {
        let text =
            "some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\nfull avg10=0.10 avg60=0.00 avg300=0.00 total=42\n";
        let p = parse(text).unwrap();
        assert_eq!(p.some, PsiLine { total_ns: 123_456_000, avg10: 1.5, avg60: 0.25, avg300: 0.0 });
        assert_eq!(p.full, PsiLine { total_ns: 42_000, avg10: 0.1, avg60: 0.0, avg300: 0.0 });
    }

    #[test]
    fn table_of_odd_inputs() {
        let cases: &[(&str, Option<u64>)] = &[
            ("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", Some(7000)),
            ("full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", None),
            ("", None),
            ("some avg10=x avg60=0.00 avg300=0.00 total=7\n", None),
            ("some avg10=0.00 avg60=0.00 avg300=0.00 total=-1\n", None),
        ];
        for (text, some_total) in cases {
            assert_eq!(parse(text).map(|p| p.some.total_ns), *some_total, "{text:?}");
        }
        assert_eq!(parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n").unwrap().full, PsiLine::default());
    }

    #[test]
    fn totals_for_thrash_detection() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(memory_totals(dir.path()), None);
        std::fs::write(
            dir.path().join("memory.pressure"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=5000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("memory.stat"), "anon 1\nworkingset_refault_anon 42\n").unwrap();
        assert_eq!(memory_totals(dir.path()), Some((5000, 1000, 42)));
        // A regular file takes no trigger text as the kernel's file does, but the call is made.
        assert!(memory_trigger(&dir.path().join("gone"), 100_000, 1_000_000).is_err());
    }

    #[test]
    fn missing_files_are_absent_not_zero() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("memory.pressure"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
        )
        .unwrap();
        let set = read_set(dir.path());
        assert_eq!(set.cpu, None);
        assert_eq!(set.io, None);
        assert_eq!(set.memory.unwrap().full.total_ns, 1000);
    }
}
