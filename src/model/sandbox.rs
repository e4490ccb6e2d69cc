//! Pod sandbox records: immutable metadata and mutable status, stored apart.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use crate::cri;
use serde::{Deserialize, Serialize};

use super::ids::SandboxId;

/// A state this build does not know (written by a newer one) reads as NotReady: nothing is
/// started in a pod whose state is in doubt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SandboxState {
    Ready,
    #[default]
    #[serde(other)]
    NotReady,
}

impl SandboxState {
    pub fn can_start_containers(self) -> bool {
        self == SandboxState::Ready
    }
}

/// What a sandbox is; written once at creation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxMeta {
    pub id: SandboxId,
    /// `<name>_<namespace>_<uid>_<attempt>`, unique among sandboxes.
    #[serde(default)]
    pub name: String,
    pub config: cri::PodSandboxConfig,
    #[serde(default)]
    pub runtime_handler: String,
    /// The cgroup parent containers go under (kubelet's, or one swapcri owns).
    #[serde(default)]
    pub cgroup_parent: String,
    /// True when swapcri created `cgroup_parent` and removes it with the sandbox.
    #[serde(default)]
    pub owns_cgroup_parent: bool,
    /// The driver the pod was placed with: `cgroup_parent` is a slice name under systemd.
    #[serde(default = "cgroupfs")]
    pub cgroup_driver: super::cgroup_layout::CgroupDriver,
    #[serde(default)]
    pub created_at: i64,
    /// Where the sandbox's namespaces, shm and files live.
    pub dir: PathBuf,
}

fn cgroupfs() -> super::cgroup_layout::CgroupDriver {
    super::cgroup_layout::CgroupDriver::Cgroupfs
}

impl SandboxMeta {
    pub fn cgroup_layout(&self) -> super::cgroup_layout::Layout {
        super::cgroup_layout::Layout { driver: self.cgroup_driver }
    }

    /// The pod's cgroup directory, relative to the cgroup root.
    pub fn cgroup_path(&self) -> String {
        self.cgroup_layout().parent_path(&self.cgroup_parent)
    }
}

/// What changes over a sandbox's life.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxStatus {
    #[serde(default)]
    pub state: SandboxState,
    /// The PID-namespace holder (pod-shared PID namespace only), with its start time to
    /// detect pid reuse.
    #[serde(default)]
    pub holder: Option<ProcessRef>,
    /// The pod's addresses from CNI; none for host-network pods and before networking.
    #[serde(default, deserialize_with = "crate::store::tolerant")]
    pub addresses: Option<PodAddresses>,
    /// Pod-level resources from the latest UpdatePodSandboxResources (in-place pod resize).
    #[serde(default, deserialize_with = "crate::store::tolerant")]
    pub resized: Option<PodResources>,
    /// Why the pod turned NotReady when nobody stopped it (its namespaces were lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The pod-level resources kubelet reported after resizing the pod cgroup.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodResources {
    pub overhead: Option<cri::LinuxContainerResources>,
    pub resources: Option<cri::LinuxContainerResources>,
    /// When kubelet reported them (nanoseconds since the epoch).
    pub updated_at: i64,
}

/// A process identified by pid and start time (clock ticks since boot), so a recycled
/// pid is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRef {
    pub pid: i32,
    pub start_time: u64,
}

impl ProcessRef {
    /// Reads the start time of a live process.
    pub fn of(pid: i32) -> Option<ProcessRef> {
        process_start_time(pid).map(|start_time| ProcessRef { pid, start_time })
    }

    /// Running, and not a zombie: a killed process whose parent (often PID 1 of the host)
    /// has not reaped it yet is gone for every purpose of ours.
    pub fn is_alive(&self) -> bool {
        self.live_stat().is_some()
    }

    /// In its exit, not yet a zombie: the kernel marks a process exiting first thing
    /// (`PF_EXITING`), before it releases its namespaces and leaves its cgroup. The init of a
    /// PID namespace stays so until every other process of the namespace is reaped (an exec
    /// killed half-way in, say); nothing can join its namespaces any more.
    pub fn is_exiting(&self) -> bool {
        self.live_stat().is_some_and(|stat| {
            stat.flags & PF_EXITING != 0 || std::fs::read_link(format!("/proc/{}/ns/pid", self.pid)).is_err()
        })
    }

    /// Its /proc stat while it is this process and not a zombie.
    fn live_stat(&self) -> Option<ProcStat> {
        process_stat(self.pid).filter(|stat| stat.start_time == self.start_time && !stat.is_zombie())
    }

    /// The live child `pid` of this live process: a pid whose parent is a process of ours
    /// (a subreaper that has not reaped it) cannot have been taken by another process.
    pub fn child(&self, pid: i32) -> Option<ProcessRef> {
        let stat = process_stat(pid)?;
        (stat.parent == self.pid && !stat.is_zombie() && self.is_alive())
            .then_some(ProcessRef { pid, start_time: stat.start_time })
    }
}

impl ProcessRef {
    /// A pidfd for this process, opened and then checked against the start time: it names
    /// this process, never one that took its pid later. None when it is gone (or a zombie),
    /// and on kernels without pidfds (before 5.3).
    pub fn pidfd(&self) -> Option<OwnedFd> {
        open_pidfd(self.pid).ok().filter(|_| self.is_alive())
    }

    /// Sends `signal` to this process and to no other: through a checked pidfd, so a pid
    /// the process left behind (and another process took) is never signalled. Where pidfds
    /// are missing, the start time is checked just before the signal. Returns whether it
    /// was sent.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> bool {
        match open_pidfd(self.pid) {
            Ok(fd) if self.is_alive() => {
                // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
                let sent = unsafe {
                    nix::libc::syscall(
                        nix::libc::SYS_pidfd_send_signal,
                        fd.as_raw_fd(),
                        signal as i32,
                        std::ptr::null::<nix::libc::siginfo_t>(),
                        0,
                    )
                };
                sent == 0
            }
            Err(nix::errno::Errno::ENOSYS) => {
                self.is_alive() && nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid), signal).is_ok()
            }
            _ => false,
        }
    }
}

fn open_pidfd(pid: i32) -> Result<OwnedFd, nix::errno::Errno> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(nix::errno::Errno::last());
    }
    // SAFETY: the descriptor was just returned to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn process_start_time(pid: i32) -> Option<u64> {
    process_stat(pid).map(|stat| stat.start_time)
}

/// The kernel's per-task flag of a process in its exit (include/linux/sched.h).
const PF_EXITING: u32 = 0x4;

/// What swapcri reads of /proc/<pid>/stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcStat {
    state: char,
    parent: i32,
    flags: u32,
    start_time: u64,
}

impl ProcStat {
    fn is_zombie(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

fn process_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Fields 3 (state), 4 (parent pid), 9 (flags) and 22 (start time) of a /proc/<pid>/stat
/// line; the command name may contain spaces and parentheses.
fn parse_stat(stat: &str) -> Option<ProcStat> {
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    let flags = fields.nth(4)?.parse().ok()?;
    Some(ProcStat { state, parent, flags, start_time: fields.nth(12)?.parse().ok()? })
}

pub fn sandbox_name(metadata: &cri::PodSandboxMetadata) -> String {
    format!("{}_{}_{}_{}", metadata.name, metadata.namespace, metadata.uid, metadata.attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines() {
        let line = |comm: &str, state: &str, flags: u32| {
            format!("4242 ({comm}) {state} 17 4242 4242 0 -1 {flags} 120 0 0 0 3 1 0 0 20 0 1 0 987654 1 2 3")
        };
        let stat = |state, parent, flags, start_time| Some(ProcStat { state, parent, flags, start_time });
        let cases = [
            (line("sleep", "S", 0x400000), stat('S', 17, 0x400000, 987654)),
            (line("a) (b c", "R", 0x400140), stat('R', 17, 0x400140, 987654)),
            (line("exiting", "R", 0x400144), stat('R', 17, 0x400144, 987654)),
            (line("zombie", "Z", 0x40044c), stat('Z', 17, 0x40044c, 987654)),
            ("4242 (cut".to_string(), None),
            ("4242 (short) S 17".to_string(), None),
            (String::new(), None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_stat(&text), want, "{text}");
        }
        let exiting = parse_stat(&line("exiting", "R", 0x400144)).unwrap();
        assert!(exiting.flags & PF_EXITING != 0 && !exiting.is_zombie());
        assert!(parse_stat(&line("zombie", "Z", 0)).unwrap().is_zombie());
    }

    #[test]
    fn own_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessRef::of(std::process::id() as i32).unwrap();
        assert!(me.is_alive());
        assert!(!me.is_exiting(), "a running process holds its namespaces");
        assert!(!ProcessRef { start_time: me.start_time + 1, ..me }.is_alive());
    }

    #[test]
    fn a_signal_reaches_the_recorded_process_and_never_a_pid_reuser() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let sleeper = ProcessRef::of(child.id() as i32).unwrap();
        // The same pid with another start time stands for a process that took the pid later.
        let reused = ProcessRef { start_time: sleeper.start_time + 1, ..sleeper };
        assert!(!reused.signal(nix::sys::signal::Signal::SIGKILL));
        assert!(sleeper.is_alive(), "a stale reference signals nothing");
        assert!(sleeper.signal(nix::sys::signal::Signal::SIGKILL));
        let status = child.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
        assert!(!sleeper.signal(nix::sys::signal::Signal::SIGKILL), "gone");
    }

    #[test]
    fn a_child_is_named_only_through_its_live_parent() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        let me = ProcessRef::of(std::process::id() as i32).unwrap();
        assert_eq!(me.child(pid), ProcessRef::of(pid));
        // Another parent, a stale parent, no such process.
        assert_eq!(ProcessRef::of(pid).unwrap().child(pid), None);
        assert_eq!(ProcessRef { start_time: me.start_time + 1, ..me }.child(pid), None);
        assert_eq!(me.child(i32::MAX), None);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(me.child(pid), None, "reaped");
    }

    #[test]
    fn an_unreaped_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let zombie = ProcessRef::of(child.id() as i32).unwrap();
        // Not reaped yet: the process stays a zombie until wait().
        for _ in 0..500 {
            if !zombie.is_alive() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(!zombie.is_alive());
        assert!(process_start_time(zombie.pid).is_some(), "still in /proc until reaped");
        child.wait().unwrap();
        assert!(ProcessRef::of(i32::MAX).is_none());
    }
}

/// A pod's addresses, as PodSandboxStatus reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodAddresses {
    pub network: String,
    pub ip: String,
    pub additional_ips: Vec<String>,
}
