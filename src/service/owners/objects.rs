//! The pod and container objects as the service holds them: the immutable metadata shared,
//! the status owned; and the small helpers every RPC file uses on them.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::container::{ContainerMeta, ContainerStatus};
use crate::model::ids::ContainerId;
use crate::model::sandbox::{SandboxMeta, SandboxStatus};

#[derive(Debug, Clone)]
pub struct Sandbox {
    pub meta: Arc<SandboxMeta>,
    pub status: SandboxStatus,
}

impl Sandbox {
    /// The cgroup path a container of this pod is created at (the OCI spec's cgroupsPath),
    /// relative to the cgroup root.
    pub fn container_cgroup(&self, id: &ContainerId) -> String {
        self.meta.cgroup_layout().container_path(&self.meta.cgroup_parent, id.as_str())
    }
}

impl Container {
    /// Where the container's cgroup is: as found at creation, else where it was asked for.
    pub fn cgroup(&self, sandbox: &Sandbox) -> String {
        self.status.cgroup.clone().unwrap_or_else(|| sandbox.container_cgroup(&self.meta.id))
    }
}

#[derive(Debug, Clone)]
pub struct Container {
    pub meta: Arc<ContainerMeta>,
    pub status: ContainerStatus,
}

pub(in crate::service) fn now_nanos() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// Labels match a selector when every selector pair is present.
pub(in crate::service) fn labels_match(labels: &HashMap<String, String>, selector: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}
