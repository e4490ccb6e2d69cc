//! What the supervisor needs of the runtime: the running containers and their cgroups, what
//! it weighs about one, and a way to end one.

use std::collections::HashMap;
use std::path::PathBuf;

use async_trait::async_trait;

use crate::model::ids::ContainerId;
use crate::model::memory::MemoryPlan;

#[async_trait]
pub trait Pods: Send + Sync {
    /// Running containers and their cgroup v2 directories, from the records in memory.
    fn running(&self) -> HashMap<ContainerId, PathBuf>;
    /// What the supervisor weighs about a container; None once it is gone.
    fn facts(&self, id: &ContainerId) -> Option<ContainerFacts>;
    /// Ends a container at once (StopContainer with no grace period).
    async fn kill(&self, id: &ContainerId) -> Result<(), String>;
}

/// A container as the supervisor sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerFacts {
    /// Its memory plan (QoS class, request, critical); None when it has none.
    pub plan: Option<MemoryPlan>,
    /// Its pod as `namespace/name`, and its own name: for the log.
    pub pod: String,
    pub name: String,
    /// The pod's priority annotation (`policy::guard::PRIORITY_ANNOTATION`), if set.
    pub priority: Option<String>,
}
