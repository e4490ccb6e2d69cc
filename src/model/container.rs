//! Container records and the container state machine.

use std::collections::BTreeMap;

use crate::cri;
use serde::{Deserialize, Serialize};

use super::ids::{ContainerId, SandboxId};
use super::image::ImageId;
use super::sandbox::ProcessRef;
use crate::model::memory::MemoryPlan;

/// created --start--> running --exit/stop--> exited; unknown when the runtime cannot tell.
/// A state this build does not know (written by a newer one) reads as Unknown, which the
/// exit record and the runtime then settle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    #[default]
    #[serde(other)]
    Unknown,
}

impl ContainerState {
    pub fn can_start(self) -> bool {
        self == ContainerState::Created
    }

    /// Created or running: its exit is still to come.
    pub fn is_live(self) -> bool {
        matches!(self, ContainerState::Created | ContainerState::Running)
    }

    pub fn can_exec(self) -> bool {
        self == ContainerState::Running
    }

    /// Stopping a container that is not running is a no-op, not an error.
    pub fn needs_stop(self) -> bool {
        matches!(self, ContainerState::Running | ContainerState::Unknown)
    }

    pub fn to_cri(self) -> cri::ContainerState {
        match self {
            ContainerState::Created => cri::ContainerState::ContainerCreated,
            ContainerState::Running => cri::ContainerState::ContainerRunning,
            ContainerState::Exited => cri::ContainerState::ContainerExited,
            ContainerState::Unknown => cri::ContainerState::ContainerUnknown,
        }
    }
}

/// What a container is; written once at creation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerMeta {
    pub id: ContainerId,
    pub sandbox_id: SandboxId,
    /// `<name>_<attempt>` within the sandbox.
    #[serde(default)]
    pub name: String,
    pub config: cri::ContainerConfig,
    /// The image's name (`ImageRecord::status_name`), and the id it resolved to.
    #[serde(default)]
    pub image_ref: String,
    #[serde(default)]
    pub image_id: ImageId,
    /// Absolute log path, empty when kubelet gave none.
    #[serde(default)]
    pub log_path: String,
    #[serde(default)]
    pub created_at: i64,
    /// Signal sent first by StopContainer: the request's stop_signal, else the image's
    /// StopSignal, else SIGTERM.
    #[serde(default = "sigterm")]
    pub stop_signal: String,
    /// The uid, gid and groups the first process started with (ContainerStatus.user).
    #[serde(default, deserialize_with = "crate::store::tolerant")]
    pub user: Option<crate::model::user::ResolvedUser>,
    /// Bind mounts made so volume sources propagate; unmounted with the last container
    /// that needs them.
    #[serde(default)]
    pub shared_binds: Vec<std::path::PathBuf>,
    /// Notes about what could not be applied as asked (shown in verbose status).
    #[serde(default, deserialize_with = "crate::store::tolerant")]
    pub warnings: Vec<String>,
    /// Restored from a checkpoint: the CRIU images (under its state directory) that its
    /// start restores instead of running a process of the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<std::path::PathBuf>,
}

fn sigterm() -> String {
    "SIGTERM".into()
}

/// What changes over a container's life.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerStatus {
    #[serde(default)]
    pub state: ContainerState,
    #[serde(default)]
    pub monitor: Option<ProcessRef>,
    #[serde(default)]
    pub pid: Option<i32>,
    #[serde(default)]
    pub started_at: i64,
    #[serde(default)]
    pub finished_at: i64,
    #[serde(default)]
    pub exit_code: i32,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    /// Current resources (in-place updates included).
    #[serde(default)]
    pub resources: Option<cri::LinuxContainerResources>,
    /// The cgroup the runtime put the container in (read from its init's /proc/<pid>/cgroup
    /// at creation), relative to the cgroup root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The memory and swap plan applied (recomputed on resource updates).
    #[serde(default, deserialize_with = "crate::store::tolerant")]
    pub memory_plan: Option<MemoryPlan>,
    /// Plan values the kernel did not hold when read back (empty: all matched or unchecked).
    #[serde(default, deserialize_with = "crate::store::tolerant")]
    pub memory_mismatches: Vec<String>,
    /// What NRI plugins set: field ("env:X", "memory.limit", "unified:memory.swap.max", ...)
    /// -> the plugin ("10-swapper").
    #[serde(
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty",
        deserialize_with = "crate::store::tolerant"
    )]
    pub nri_owners: std::collections::BTreeMap<String, String>,
}

impl ContainerStatus {
    /// The container's init while it runs: the live child of the live monitor that reaps it
    /// as a subreaper, so a pid another process took since is never named.
    pub fn live_init(&self) -> Option<ProcessRef> {
        let (pid, monitor) = self.pid.zip(self.monitor)?;
        monitor.child(pid)
    }

    pub fn created(monitor: ProcessRef, pid: i32, resources: Option<cri::LinuxContainerResources>) -> Self {
        ContainerStatus { monitor: Some(monitor), pid: Some(pid), ..Self::awaiting_restore(resources) }
    }

    /// Created with no process yet: a restored container's start brings its processes back.
    pub fn awaiting_restore(resources: Option<cri::LinuxContainerResources>) -> Self {
        ContainerStatus {
            state: ContainerState::Created,
            monitor: None,
            pid: None,
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            resources,
            cgroup: None,
            memory_plan: None,
            memory_mismatches: Vec::new(),
            nri_owners: Default::default(),
        }
    }
}

/// Beside the exit record: the monitor deleted the container from the runtime after it
/// recorded the exit (a container with a PID namespace of its own has its exit recorded
/// before the delete).
const RUNTIME_DELETED_MARK: &str = "runtime-deleted";

/// Where the monitor marks a done runtime delete, beside the container's exit record.
pub fn runtime_deleted_mark(exit_file: &std::path::Path) -> std::path::PathBuf {
    exit_file.with_file_name(RUNTIME_DELETED_MARK)
}

/// What the monitor writes when the container's process exits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExitRecord {
    pub exit_code: i32,
    /// Nanoseconds since the epoch.
    pub finished_at: i64,
    pub oom_killed: bool,
    /// The monitor has since deleted the container from the OCI runtime (as a shim does
    /// on exit), so removing it needs no runtime call.
    #[serde(default)]
    pub runtime_deleted: bool,
}

impl ExitRecord {
    /// CRI reasons: OOMKilled, Completed (exit 0) or Error.
    pub fn reason(&self) -> &'static str {
        if self.oom_killed {
            "OOMKilled"
        } else if self.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        }
    }
}

pub type Labels = BTreeMap<String, String>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_machine() {
        use ContainerState::*;
        let table = [
            (Created, true, false, false),
            (Running, false, true, true),
            (Exited, false, false, false),
            (Unknown, false, false, true),
        ];
        for (state, start, exec, stop) in table {
            assert_eq!((state.can_start(), state.can_exec(), state.needs_stop()), (start, exec, stop), "{state:?}");
        }
        let exit = |code, oom| ExitRecord { exit_code: code, finished_at: 0, oom_killed: oom, runtime_deleted: false };
        assert_eq!(exit(0, false).reason(), "Completed");
        assert_eq!(exit(1, false).reason(), "Error");
        assert_eq!(exit(137, true).reason(), "OOMKilled");
    }
}

/// The name a CRI signal is sent by: `SIGKILL`; the real-time ones as numbers
/// (SIGRTMIN is 34 and SIGRTMAX 64 on Linux), which every runtime's `kill` accepts.
pub fn signal_name(signal: cri::Signal) -> String {
    let name = signal.as_str_name();
    if let Some(n) = name.strip_prefix("SIGRTMINPLUS") {
        return (34 + n.parse::<i32>().unwrap_or(0)).to_string();
    }
    if let Some(n) = name.strip_prefix("SIGRTMAXMINUS") {
        return (64 - n.parse::<i32>().unwrap_or(0)).to_string();
    }
    match signal {
        cri::Signal::Sigrtmin => "34".into(),
        cri::Signal::Sigrtmax => "64".into(),
        _ => name.to_string(),
    }
}

/// The CRI signal a stop signal name stands for (ContainerStatus.stop_signal); the
/// runtime default when the name is not one the CRI lists.
pub fn cri_signal(name: &str) -> cri::Signal {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") { upper } else { format!("SIG{upper}") };
    if let Some(s) = cri::Signal::from_str_name(&full) {
        return s;
    }
    match name.parse::<i32>() {
        Ok(34) => cri::Signal::Sigrtmin,
        Ok(64) => cri::Signal::Sigrtmax,
        Ok(n @ 35..=49) => cri::Signal::from_str_name(&format!("SIGRTMINPLUS{}", n - 34)).unwrap_or_default(),
        Ok(n @ 50..=63) => cri::Signal::from_str_name(&format!("SIGRTMAXMINUS{}", 64 - n)).unwrap_or_default(),
        Ok(n) => nix::sys::signal::Signal::try_from(n)
            .ok()
            .and_then(|s| cri::Signal::from_str_name(s.as_str()))
            .unwrap_or_default(),
        Err(_) => cri::Signal::RuntimeDefault,
    }
}

#[cfg(test)]
mod signal_tests {
    use super::*;

    #[test]
    fn signal_names_round_trip() {
        for (signal, name) in [
            (cri::Signal::Sigkill, "SIGKILL"),
            (cri::Signal::Sigusr1, "SIGUSR1"),
            (cri::Signal::Sigrtmin, "34"),
            (cri::Signal::Sigrtminplus3, "37"),
            (cri::Signal::Sigrtmaxminus2, "62"),
            (cri::Signal::Sigrtmax, "64"),
        ] {
            assert_eq!(signal_name(signal), name);
            assert_eq!(cri_signal(name), signal, "{name}");
        }
        assert_eq!(cri_signal("TERM"), cri::Signal::Sigterm);
        assert_eq!(cri_signal("15"), cri::Signal::Sigterm);
        assert_eq!(cri_signal("bogus"), cri::Signal::RuntimeDefault);
    }
}
