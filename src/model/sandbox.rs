//! Pod sandbox records: immutable metadata and mutable status, stored apart.

use std::path::PathBuf;

use crate::cri;
use serde::{Deserialize, Serialize};

use super::ids::SandboxId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SandboxState {
    Ready,
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
    pub name: String,
    pub config: cri::PodSandboxConfig,
    pub runtime_handler: String,
    /// The cgroup parent containers go under (kubelet's, or one swapcri owns).
    pub cgroup_parent: String,
    /// True when swapcri created `cgroup_parent` and removes it with the sandbox.
    pub owns_cgroup_parent: bool,
    pub created_at: i64,
    /// Where the sandbox's namespaces, shm and files live.
    pub dir: PathBuf,
}

/// What changes over a sandbox's life.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxStatus {
    pub state: SandboxState,
    /// The PID-namespace holder (pod-shared PID namespace only), with its start time to
    /// detect pid reuse.
    pub holder: Option<ProcessRef>,
    /// The pod's addresses from CNI; none for host-network pods and before networking.
    #[serde(default)]
    pub addresses: Option<PodAddresses>,
    /// Pod-level resources from the latest UpdatePodSandboxResources (in-place pod resize).
    #[serde(default)]
    pub resized: Option<PodResources>,
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

    pub fn is_alive(&self) -> bool {
        process_start_time(self.pid) == Some(self.start_time)
    }
}

/// Field 22 of /proc/<pid>/stat; the command name may contain spaces and parentheses.
fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    // after_name starts at field 3 (state); start time is field 22.
    after_name.split_whitespace().nth(19)?.parse().ok()
}

pub fn sandbox_name(metadata: &cri::PodSandboxMetadata) -> String {
    format!("{}_{}_{}_{}", metadata.name, metadata.namespace, metadata.uid, metadata.attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessRef::of(std::process::id() as i32).unwrap();
        assert!(me.is_alive());
        assert!(!ProcessRef { start_time: me.start_time + 1, ..me }.is_alive());
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
