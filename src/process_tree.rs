//! Processes on the node, from /proc: a process's descendants, a pid file's process, killing a
//! tree (what an exec left behind), the memory a process touched lately. Every process is held by its pid and start time, so one
//! that ended meanwhile is never mistaken for the process that took its pid.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::model::sandbox::ProcessRef;

/// All descendants of `root` (not `root` itself).
pub fn descendants(root: i32) -> Vec<ProcessRef> {
    let mut children: HashMap<i32, Vec<ProcessRef>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some((ppid, start_time)) = parent_and_start(pid) {
                children.entry(ppid).or_default().push(ProcessRef { pid, start_time });
            }
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            out.push(*c);
            stack.push(c.pid);
        }
    }
    out
}

/// Fields 4 (parent) and 22 (start time) of /proc/<pid>/stat.
fn parent_and_start(pid: i32) -> Option<(i32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// The process a runtime's pid file names, unless that pid now belongs to a process that
/// started after the file was written: the process it named is gone and its pid was reused.
pub fn named_by(pid_file: &Path) -> Option<ProcessRef> {
    let pid = std::fs::read_to_string(pid_file).ok()?.trim().parse::<i32>().ok()?;
    let process = ProcessRef::of(pid)?;
    let written = std::fs::metadata(pid_file).ok()?.modified().ok()?;
    let age = SystemTime::now().duration_since(written).unwrap_or_default();
    let since_boot = boot_clock()?;
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) }.max(1) as u64;
    let written_ticks = since_boot.saturating_sub(age).as_millis() as u64 * ticks / 1000;
    // Two ticks of slack for the rounding of both clocks.
    (process.start_time <= written_ticks + 2).then_some(process)
}

/// Time since boot, suspend included: the clock /proc's start times count in.
fn boot_clock() -> Option<Duration> {
    let mut now = nix::libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec.
    if unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_BOOTTIME, &mut now) } != 0 {
        return None;
    }
    Some(Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
}

/// SIGKILLs `root` and everything below it (found before the kill, so the children a
/// killed parent leaves to others are still reached).
pub fn kill_tree(root: ProcessRef) {
    let below = descendants(root.pid);
    root.signal(nix::sys::signal::Signal::SIGKILL);
    for process in below {
        process.signal(nix::sys::signal::Signal::SIGKILL);
    }
}

/// Bytes of the process's mapped pages the kernel saw accessed since their accessed bits were
/// last cleared (`Referenced` of /proc/<pid>/smaps_rollup); None when the process is gone.
pub fn referenced(pid: i32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = rollup.lines().find(|l| l.starts_with("Referenced:"))?;
    let kib: u64 = line.trim_start_matches("Referenced:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// Clears the accessed bits of the process's pages (`1` to /proc/<pid>/clear_refs), so that
/// `referenced` counts from now. A process that is gone is no error: it touches nothing.
pub fn clear_referenced(pid: i32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "1");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_kills_a_process_tree() {
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 30 & sleep 30 & wait"]).spawn().unwrap();
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while descendants(pid).len() < 2 {
            assert!(std::time::Instant::now() < deadline, "children did not appear");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let below = descendants(pid);
        kill_tree(ProcessRef::of(pid).unwrap());
        child.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        for p in below {
            assert!(!p.is_alive(), "{} still running", p.pid);
        }
    }

    #[test]
    fn a_pid_file_names_its_process_and_not_a_later_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pid");
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(&file, child.id().to_string()).unwrap();
        assert_eq!(named_by(&file).map(|p| p.pid), Some(child.id() as i32));
        // A file written before the process started names someone else's pid.
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(old).unwrap();
        assert!(named_by(&file).is_none(), "the process started after the file was written");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(named_by(&file).is_none());
    }

    #[test]
    fn what_a_process_touched_since_its_bits_were_cleared() {
        const SIZE: usize = 64 << 20;
        let me = std::process::id() as i32;
        let mut buffer = vec![0u8; SIZE];
        let touch = |b: &mut Vec<u8>, v: u8| b.iter_mut().step_by(4096).for_each(|x| *x = v);
        touch(&mut buffer, 1);
        clear_referenced(me);
        let cleared = referenced(me).expect("smaps_rollup of this process");
        touch(&mut buffer, 2);
        let touched = referenced(me).unwrap();
        // Only a clear that worked leaves the buffer out of the first figure.
        assert!(touched >= cleared + (SIZE as u64) * 15 / 16, "{cleared} then {touched}");
        assert_eq!(buffer.iter().step_by(4096).filter(|x| **x == 2).count(), SIZE / 4096);
        assert_eq!(referenced(i32::MAX), None);
    }
}
