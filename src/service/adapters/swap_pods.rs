//! What the swap supervisor (swap/) sees of the pods: the running containers and their
//! cgroups from the records in memory, a container's plan, names and priority, and
//! StopContainer with no grace period for the guard's kill.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;

use crate::model::container::ContainerState;
use crate::model::ids::ContainerId;
use crate::policy::guard::PRIORITY_ANNOTATION;
use crate::swap::{ContainerFacts, Pods};

use crate::service::pod_service::PodService;

#[async_trait]
impl Pods for PodService {
    /// Exits are picked up by the exit watcher; nothing is read here.
    fn running(&self) -> HashMap<ContainerId, PathBuf> {
        let running: Vec<_> = self
            .registry
            .read()
            .containers
            .values()
            .filter(|c| c.status.state == ContainerState::Running)
            .cloned()
            .collect();
        let mut out = HashMap::new();
        for c in running {
            let Ok(sandbox) = self.registry.find_sandbox(c.meta.sandbox_id.as_str()) else { continue };
            if let Some(dir) = self.cgroups.unified_dir(&c.cgroup(&sandbox)) {
                out.insert(c.meta.id.clone(), dir);
            }
        }
        out
    }

    fn facts(&self, id: &ContainerId) -> Option<ContainerFacts> {
        let c = self.registry.find_container(id.as_str()).ok()?;
        let sandbox = self.registry.find_sandbox(c.meta.sandbox_id.as_str()).ok();
        let pod = sandbox.as_ref().and_then(|s| s.meta.config.metadata.as_ref());
        Some(ContainerFacts {
            plan: c.status.memory_plan.clone(),
            pod: pod.map(|m| format!("{}/{}", m.namespace, m.name)).unwrap_or_default(),
            name: c.meta.config.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default(),
            priority: sandbox.and_then(|s| s.meta.config.annotations.get(PRIORITY_ANNOTATION).cloned()),
        })
    }

    async fn kill(&self, id: &ContainerId) -> Result<(), String> {
        self.stop_container(id.as_str(), Duration::ZERO).await.map_err(|e| e.to_string())
    }
}
