//! Namespaces for a pod, created by a short-lived helper process of our own binary
//! (`swapcri sandbox-ns`): it unshares, sets the hostname, brings loopback up and
//! bind-mounts its namespace files where the sandbox keeps them. For a pod-shared PID
//! namespace it leaves a holder behind as that namespace's PID 1, reaping zombies.
//!
//! A pod with its own user namespace gets it first: a child of the helper enters a new user
//! namespace, the helper (still in the host's) writes its id maps, and the child makes the
//! other namespaces there, so they belong to the pod's user namespace (the container's root
//! may then mount /proc, sysfs and mqueue). The helper pins the child's namespaces.

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
use crate::model::userns::PodUserns;

/// A user namespace to create and where to pin it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserNsRequest {
    pub path: PathBuf,
    pub map: PodUserns,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NsRequest {
    pub user: Option<UserNsRequest>,
    pub net: Option<PathBuf>,
    pub ipc: Option<PathBuf>,
    pub uts: Option<PathBuf>,
    pub hostname: Option<String>,
    pub pid_holder: bool,
}

#[derive(Debug, Serialize, Deserialize)]
enum NsReport {
    Ready { holder_pid: Option<i32> },
    Failed { error: String },
}

/// The helper's request, in the sandbox's run directory; also names the helper's processes.
const REQUEST_FILE: &str = "namespaces.json";

/// The subcommand that runs the helper: `swapcri sandbox-ns REQUEST`.
pub const HELPER_COMMAND: &str = "sandbox-ns";

/// Runs the helper and returns the PID-namespace holder, if one was asked for.
pub fn create(request: &NsRequest, work_dir: &Path) -> Result<Option<ProcessRef>, String> {
    let path = work_dir.join(REQUEST_FILE);
    std::fs::write(&path, serde_json::to_vec(request).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let mut child = Command::new(crate::SELF_EXE)
        .arg0("swapcri")
        .arg(HELPER_COMMAND)
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
    let user = request.user.as_ref().map(|u| &u.path);
    for path in [&request.net, &request.ipc, &request.uts, &user.cloned()].into_iter().flatten() {
        if let Err(e) = super::tmpfs::unmount(path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot unmount namespace");
        }
        let _ = std::fs::remove_file(path);
    }
    if let Some(holder) = holder {
        stop_holder(holder);
    }
}

/// The live PID-namespace holders started for the sandbox whose run directory is
/// `work_dir`, found by their command line (for a sandbox whose record is lost).
pub fn holders_of(work_dir: &Path) -> Vec<ProcessRef> {
    let request = work_dir.join(REQUEST_FILE);
    let wanted = [b"swapcri".as_slice(), HELPER_COMMAND.as_bytes(), request.as_os_str().as_encoded_bytes()];
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).eq(wanted.iter().copied())
        })
        .filter_map(ProcessRef::of)
        .filter(ProcessRef::is_alive)
        .collect()
}

/// SIGKILLs a holder (and with it every process of its PID namespace) and waits for it.
pub fn stop_holder(holder: ProcessRef) {
    if holder.signal(nix::sys::signal::Signal::SIGKILL) {
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
    match &request.user {
        None => {
            let holder = enter(request)?;
            pin(request, "self")?;
            Ok(holder)
        }
        Some(user) => make_in_userns(request, user),
    }
}

/// Unshares the pod's namespaces in this process, names the host, brings loopback up, and
/// starts the PID-namespace holder when asked (returning its PID).
fn enter(request: &NsRequest) -> Result<Option<i32>, String> {
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
    if !request.pid_holder {
        return Ok(None);
    }
    unshare(CloneFlags::CLONE_NEWPID).map_err(|e| format!("unshare pid: {e}"))?;
    // SAFETY: single-threaded process.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Parent { child } => Ok(Some(child.as_raw())),
        ForkResult::Child => hold(),
    }
}

/// Bind-mounts the namespaces of `/proc/<pid>` onto the request's files.
fn pin(request: &NsRequest, pid: &str) -> Result<(), String> {
    let user = request.user.as_ref().map(|u| u.path.clone());
    for (path, kind) in [(&user, "user"), (&request.net, "net"), (&request.ipc, "ipc"), (&request.uts, "uts")] {
        if let Some(path) = path {
            std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let source = format!("/proc/{pid}/ns/{kind}");
            mount(Some(source.as_str()), path, None::<&str>, MsFlags::MS_BIND, None::<&str>)
                .map_err(|e| format!("pinning the {kind} namespace at {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// A child enters a new user namespace and makes the others there; this process maps it
/// and pins its namespaces. The pipes carry one step each way.
fn make_in_userns(request: &NsRequest, user: &UserNsRequest) -> Result<Option<i32>, String> {
    let (to_child_r, to_child_w) = nix::unistd::pipe().map_err(|e| format!("pipe: {e}"))?;
    let (to_parent_r, to_parent_w) = nix::unistd::pipe().map_err(|e| format!("pipe: {e}"))?;
    let mut to_child = std::fs::File::from(to_child_w);
    let mut from_child = BufReader::new(std::fs::File::from(to_parent_r));
    // SAFETY: single-threaded process.
    let child = match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Child => {
            drop(to_child);
            drop(from_child);
            userns_child(request, std::fs::File::from(to_child_r), std::fs::File::from(to_parent_w))
        }
        ForkResult::Parent { child } => child,
    };
    drop(to_child_r);
    drop(to_parent_w);
    let mut step = |line: &mut String| -> Result<(), String> {
        line.clear();
        from_child.read_line(line).map_err(|e| e.to_string())?;
        match line.trim().strip_prefix("error ") {
            Some(why) => Err(why.to_string()),
            None if line.is_empty() => Err("the user namespace child exited".into()),
            None => Ok(()),
        }
    };
    let mut line = String::new();
    let result = step(&mut line)
        .and_then(|()| write_maps(child.as_raw(), &user.map))
        .and_then(|()| writeln!(to_child, "mapped").map_err(|e| e.to_string()))
        .and_then(|()| step(&mut line))
        .and_then(|()| {
            let holder = line.trim().strip_prefix("ready ").and_then(|p| p.parse::<i32>().ok()).filter(|&p| p > 0);
            pin(request, &child.as_raw().to_string()).map(|()| holder)
        });
    // Whatever happened, the child's work is over: closing its pipe lets it exit.
    drop(to_child);
    let _ = waitpid(child, None);
    result
}

/// Takes the namespace's root ids (host ids of the pod's range), so the PID-namespace
/// holder runs as the pod's root rather than the host's.
fn become_root() -> Result<(), String> {
    let root_gid = nix::unistd::Gid::from_raw(0);
    let root_uid = nix::unistd::Uid::from_raw(0);
    nix::unistd::setgroups(&[]).map_err(|e| format!("setgroups: {e}"))?;
    nix::unistd::setresgid(root_gid, root_gid, root_gid).map_err(|e| format!("setresgid: {e}"))?;
    nix::unistd::setresuid(root_uid, root_uid, root_uid).map_err(|e| format!("setresuid: {e}"))
}

/// The host's side of a new user namespace: the id maps of the process that entered it.
fn write_maps(pid: i32, map: &PodUserns) -> Result<(), String> {
    for (file, range) in [("uid_map", &map.uids), ("gid_map", &map.gids)] {
        let path = format!("/proc/{pid}/{file}");
        std::fs::write(&path, range.map_line()).map_err(|e| format!("writing {path}: {e}"))?;
    }
    Ok(())
}

fn userns_child(request: &NsRequest, from_parent: std::fs::File, mut to_parent: std::fs::File) -> ! {
    let mut from_parent = BufReader::new(from_parent);
    let mut line = String::new();
    let outcome = unshare(CloneFlags::CLONE_NEWUSER)
        .map_err(|e| format!("unshare user: {e}"))
        .and_then(|()| writeln!(to_parent, "entered").map_err(|e| e.to_string()))
        .and_then(|()| match from_parent.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(()),
            _ => Err("the helper did not map the user namespace".to_string()),
        })
        .and_then(|()| become_root())
        .and_then(|()| enter(request));
    let _ = match &outcome {
        Ok(holder) => writeln!(to_parent, "ready {}", holder.unwrap_or(0)),
        Err(why) => writeln!(to_parent, "error {}", why.replace('\n', " ")),
    };
    // Stay until the helper has pinned the namespaces (it closes the pipe).
    line.clear();
    let _ = from_parent.read_line(&mut line);
    std::process::exit(if outcome.is_ok() { 0 } else { 1 })
}

/// PID 1 of the pod's PID namespace: reaps orphans until killed.
fn hold() -> ! {
    let _ = nix::unistd::setsid();
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
