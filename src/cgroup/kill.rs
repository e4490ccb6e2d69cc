//! Ending every process of a cgroup from the daemon itself, without exec'ing the runtime:
//! cgroup v2's `cgroup.kill` ends the group and the groups below it in one write; on cgroup
//! v1 the freezer holds the group still (no fork slips past, no listed pid exits and is
//! reused), each listed process gets SIGKILL, and the thaw lets them die.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::control;

const CGROUP_KILL: &str = "cgroup.kill";
const FREEZER_STATE: &str = "freezer.state";
/// How long a v1 freeze may take before the kill is left to the runtime (a process stuck in
/// the kernel keeps its group FREEZING).
const FREEZE_WAIT: Duration = Duration::from_millis(100);
/// More processes than a container plausibly has: past it the kill is left to the runtime.
const MAX_PROCESSES: usize = 1 << 16;

#[derive(Debug, thiserror::Error)]
pub enum KillError {
    /// This kernel or hierarchy cannot do it (no `cgroup.kill` before 5.14, no freezer, a
    /// freeze that did not settle): the caller asks the runtime instead.
    #[error("not possible here: {0}")]
    Unsupported(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// SIGKILL to every process of the cgroup v2 group `dir` and the groups below it.
pub fn kill_v2(dir: &Path) -> Result<(), KillError> {
    let path = dir.join(CGROUP_KILL);
    // Never created: a file missing means a kernel before 5.14 (or a group gone).
    let opened = std::fs::OpenOptions::new().write(true).open(&path);
    let mut file = opened.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => KillError::Unsupported(format!("{} missing", path.display())),
        _ => KillError::Io { what: format!("opening {}", path.display()), source: e },
    })?;
    file.write_all(b"1").map_err(|e| KillError::Io { what: format!("writing {}", path.display()), source: e })
}

/// SIGKILL to every process of the cgroup v1 group `freezer` (its directory in the freezer
/// hierarchy) and the groups below it: frozen, signalled, thawed. Returns how many were
/// signalled.
pub fn kill_v1(freezer: &Path) -> Result<usize, KillError> {
    if !freezer.join(FREEZER_STATE).exists() {
        return Err(KillError::Unsupported(format!("{} missing", freezer.join(FREEZER_STATE).display())));
    }
    set_state(freezer, "FROZEN")?;
    let signalled = frozen(freezer).and_then(|()| signal_all(freezer));
    // Thawed whatever happened: a group left frozen would hang its processes for good.
    let thawed = set_state(freezer, "THAWED");
    let signalled = signalled?;
    thawed?;
    Ok(signalled)
}

fn set_state(dir: &Path, state: &str) -> Result<(), KillError> {
    let path = dir.join(FREEZER_STATE);
    std::fs::write(&path, state)
        .map_err(|e| KillError::Io { what: format!("writing {state} to {}", path.display()), source: e })
}

/// Waits for the freeze to settle.
fn frozen(dir: &Path) -> Result<(), KillError> {
    let deadline = Instant::now() + FREEZE_WAIT;
    loop {
        let state = super::files::read(dir, FREEZER_STATE).unwrap_or_default();
        if state.trim() == "FROZEN" {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(KillError::Unsupported(format!("{} still {:?}", dir.display(), state.trim())));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn signal_all(dir: &Path) -> Result<usize, KillError> {
    let pids = control::processes(dir, MAX_PROCESSES)
        .ok_or_else(|| KillError::Unsupported(format!("the processes of {} cannot be listed", dir.display())))?;
    let mut signalled = 0;
    for pid in pids {
        // Frozen, a listed process cannot exit, so its pid names it still; one gone
        // meanwhile (ESRCH) needs nothing.
        match kill(Pid::from_raw(pid), Signal::SIGKILL) {
            Ok(()) => signalled += 1,
            Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => return Err(KillError::Io { what: format!("SIGKILL to {pid}"), source: std::io::Error::from(e) }),
        }
    }
    Ok(signalled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sandbox::ProcessRef;

    #[test]
    fn v2_writes_the_kill_file_and_never_creates_it() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(kill_v2(dir.path()), Err(KillError::Unsupported(_))));
        assert!(!dir.path().join(CGROUP_KILL).exists());
        std::fs::write(dir.path().join(CGROUP_KILL), "").unwrap();
        kill_v2(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join(CGROUP_KILL)).unwrap(), "1");
    }

    #[test]
    fn v1_freezes_kills_each_listed_process_and_thaws() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(kill_v1(dir.path()), Err(KillError::Unsupported(_))), "no freezer");
        let children: Vec<_> =
            (0..2).map(|_| std::process::Command::new("sleep").arg("100").spawn().unwrap()).collect();
        let listed: String = children.iter().map(|c| format!("{}\n", c.id())).collect();
        std::fs::write(dir.path().join(FREEZER_STATE), "THAWED\n").unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), listed).unwrap();
        std::fs::create_dir(dir.path().join("nested")).unwrap();
        std::fs::write(dir.path().join("nested/cgroup.procs"), "").unwrap();
        let refs: Vec<_> = children.iter().map(|c| ProcessRef::of(c.id() as i32).unwrap()).collect();
        assert_eq!(kill_v1(dir.path()).unwrap(), 2);
        // Watched in /proc: other tests of this process may reap any child.
        let deadline = Instant::now() + Duration::from_secs(10);
        while refs.iter().any(|r| r.is_alive()) {
            assert!(Instant::now() < deadline, "a listed process outlived its SIGKILL");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(std::fs::read_to_string(dir.path().join(FREEZER_STATE)).unwrap(), "THAWED");
    }

    #[test]
    fn v1_thaws_and_hands_over_when_the_processes_cannot_be_listed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FREEZER_STATE), "THAWED\n").unwrap();
        assert!(matches!(kill_v1(dir.path()), Err(KillError::Unsupported(_))), "no cgroup.procs");
        assert_eq!(std::fs::read_to_string(dir.path().join(FREEZER_STATE)).unwrap(), "THAWED");
    }
}
