//! Namespaces for a pod, created by a short-lived helper process of our own binary
//! (`swapcri sandbox-ns`): it unshares, sets the hostname, brings loopback up and
//! bind-mounts its namespace files where the sandbox keeps them. For a pod-shared PID
//! namespace it leaves a holder behind as that namespace's PID 1, reaping zombies.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::wait::waitpid;
use nix::unistd::{fork, ForkResult};
use serde::{Deserialize, Serialize};

use crate::model::sandbox::ProcessRef;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NsRequest {
    pub net: Option<PathBuf>,
    pub ipc: Option<PathBuf>,
    pub uts: Option<PathBuf>,
    pub hostname: Option<String>,
    pub pid_holder: bool,
    /// cgroup (relative) for the holder, away from the daemon's.
    pub cgroup: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
enum NsReport {
    Ready { holder_pid: Option<i32> },
    Failed { error: String },
}

/// Runs the helper and returns the PID-namespace holder, if one was asked for.
pub fn create(request: &NsRequest, work_dir: &Path) -> Result<Option<ProcessRef>, String> {
    let path = work_dir.join("namespaces.json");
    std::fs::write(&path, serde_json::to_vec(request).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let mut child = Command::new(crate::SELF_EXE)
        .arg0("swapcri")
        .arg("sandbox-ns")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the namespace helper: {e}"))?;
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line);
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    match serde_json::from_str::<NsReport>(line.trim()) {
        Ok(NsReport::Ready { holder_pid: Some(pid) }) => {
            ProcessRef::of(pid).map(Some).ok_or_else(|| "the PID namespace holder exited".to_string())
        }
        Ok(NsReport::Ready { holder_pid: None }) => Ok(None),
        Ok(NsReport::Failed { error }) => Err(error),
        Err(_) => Err(format!("namespace helper failed: {}", String::from_utf8_lossy(&output.stderr).trim())),
    }
}

/// Unpins the namespaces and stops the holder. Idempotent.
pub fn release(request: &NsRequest, holder: Option<ProcessRef>) {
    for path in [&request.net, &request.ipc, &request.uts].into_iter().flatten() {
        if let Err(e) = super::unmount(path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot unmount namespace");
        }
        let _ = std::fs::remove_file(path);
    }
    if let Some(holder) = holder.filter(ProcessRef::is_alive) {
        let pid = nix::unistd::Pid::from_raw(holder.pid);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        // The holder is not our child once its helper exited; wait until it is gone.
        for _ in 0..100 {
            if !holder.is_alive() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `swapcri sandbox-ns REQUEST`: single-threaded on purpose (unshare and fork).
pub fn helper_main(request_path: &Path) -> ! {
    let report = match std::fs::read(request_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice::<NsRequest>(&b).map_err(|e| e.to_string()))
        .and_then(|r| make(&r))
    {
        Ok(holder_pid) => NsReport::Ready { holder_pid },
        Err(error) => NsReport::Failed { error },
    };
    let failed = matches!(report, NsReport::Failed { .. });
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", serde_json::to_string(&report).unwrap_or_default());
    let _ = out.flush();
    std::process::exit(if failed { 1 } else { 0 })
}

fn make(request: &NsRequest) -> Result<Option<i32>, String> {
    let mut flags = CloneFlags::empty();
    for (wanted, flag) in [
        (request.net.is_some(), CloneFlags::CLONE_NEWNET),
        (request.ipc.is_some(), CloneFlags::CLONE_NEWIPC),
        (request.uts.is_some(), CloneFlags::CLONE_NEWUTS),
    ] {
        if wanted {
            flags |= flag;
        }
    }
    unshare(flags).map_err(|e| format!("unshare: {e}"))?;
    if request.uts.is_some() {
        if let Some(name) = &request.hostname {
            nix::unistd::sethostname(name).map_err(|e| format!("sethostname {name:?}: {e}"))?;
        }
    }
    if request.net.is_some() {
        loopback_up().map_err(|e| format!("bringing loopback up: {e}"))?;
    }
    for (path, kind) in [(&request.net, "net"), (&request.ipc, "ipc"), (&request.uts, "uts")] {
        if let Some(path) = path {
            std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let source = format!("/proc/self/ns/{kind}");
            mount(Some(source.as_str()), path, None::<&str>, MsFlags::MS_BIND, None::<&str>)
                .map_err(|e| format!("pinning the {kind} namespace at {}: {e}", path.display()))?;
        }
    }
    if !request.pid_holder {
        return Ok(None);
    }
    unshare(CloneFlags::CLONE_NEWPID).map_err(|e| format!("unshare pid: {e}"))?;
    // SAFETY: single-threaded process.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Parent { child } => Ok(Some(child.as_raw())),
        ForkResult::Child => hold(request.cgroup.as_deref()),
    }
}

/// PID 1 of the pod's PID namespace: reaps orphans until killed.
fn hold(cgroup: Option<&str>) -> ! {
    let _ = nix::unistd::setsid();
    if let Some(rel) = cgroup {
        let _ = crate::cgroup::move_to(rel, std::process::id(), &crate::cgroup::hierarchies());
    }
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
    loop {
        if waitpid(None::<nix::unistd::Pid>, None).is_err() {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// `ip link set lo up`, by ioctl on a socket in the new network namespace.
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: plain socket and ioctl calls on a zeroed ifreq naming "lo".
    unsafe {
        let fd = nix::libc::socket(nix::libc::AF_INET, nix::libc::SOCK_DGRAM | nix::libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut req: nix::libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as nix::libc::c_char;
        }
        let result = if nix::libc::ioctl(fd, nix::libc::SIOCGIFFLAGS, &mut req) < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            req.ifr_ifru.ifru_flags |= nix::libc::IFF_UP as nix::libc::c_short;
            if nix::libc::ioctl(fd, nix::libc::SIOCSIFFLAGS, &req) < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        nix::libc::close(fd);
        result
    }
}
