use serde_json::json;

use crate::error::Error;
use crate::model::container::ContainerState;

use crate::service::owners::objects::Container;
use crate::service::pod_service::PodService;

impl PodService {
    /// The container as its record is kept (the exit watch keeps it current) and, when
    /// verbose, its OCI spec, pid, cgroup and notes as JSON.
    pub fn container_status(&self, id: &str, verbose: bool) -> Result<(Container, Option<String>), Error> {
        let container = self.registry.resolve_container(id)?;
        let info = if verbose {
            let cgroup =
                self.registry.find_sandbox(container.meta.sandbox_id.as_str()).ok().map(|s| container.cgroup(&s));
            let spec_path = self.registry.container_run_dir(&container.meta.id).join("bundle/config.json");
            let spec: serde_json::Value = std::fs::read(&spec_path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(serde_json::Value::Null);
            Some(
                json!({
                    "sandboxID": container.meta.sandbox_id,
                    "pid": container.status.pid,
                    "monitor": container.status.monitor,
                    "cgroup": cgroup,
                    "imageID": container.meta.image_id,
                    "runtimeSpec": spec,
                    "warnings": container.meta.warnings,
                    "memoryPlan": container.status.memory_plan,
                    "memoryMismatches": container.status.memory_mismatches,
                    "usage": self.current_usage(&container),
                    "swapState": (container.status.state == ContainerState::Running)
                        .then(|| self.swap.thrash_state(&container.meta.id))
                        .flatten(),
                    "offload": self.swap.offload_report(&container.meta.id),
                    "nri": container.status.nri_owners,
                })
                .to_string(),
            )
        } else {
            None
        };
        Ok((container, info))
    }
}
