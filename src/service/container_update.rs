use crate::cri;

use crate::error::Error;
use crate::policy::spec;

use super::PodService;

impl PodService {
    /// Applies new resources to a running or created container (in-place resize).
    pub async fn update_container(
        &self,
        id: &str,
        resources: Option<cri::LinuxContainerResources>,
    ) -> Result<(), Error> {
        let Some(resources) = resources else { return Ok(()) };
        let container = self.registry.find_container(id)?;
        let _guard = self.registry.locks.lock(container.meta.id.as_str()).await;
        let container = self.registry.find_container(container.meta.id.as_str())?;
        if !container.status.state.needs_stop()
            && container.status.state != crate::model::container::ContainerState::Created
        {
            return Err(Error::FailedPrecondition(format!("container {} is not running", container.meta.id)));
        }
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str())?;
        // Requests and limits change in place: the plan follows them.
        let plan = self.memory.plan(&sandbox, &container.meta.config, &resources)?;
        // The same resources step as at create: create and update cannot drift.
        let mut warnings = Vec::new();
        let linux = spec::linux_resources(&resources, &plan.unified(), &self.node, &mut warnings);
        for warning in &warnings {
            tracing::warn!(container = %container.meta.id, "{warning}");
        }
        let document = spec::update_document(&linux);
        let runtime = self.runtimes.runtime(&sandbox.meta.runtime_handler)?;
        runtime.update(container.meta.id.as_str(), document.to_string().as_bytes()).await?;
        let mut status = container.status.clone();
        status.resources = Some(resources);
        if status.state == crate::model::container::ContainerState::Running {
            status.memory_mismatches = self.memory.check(&container.cgroup(&sandbox), &container.meta.id, &plan);
        }
        status.memory_plan = Some(plan);
        self.registry.save_container_status(&container.meta.id, status)?;
        // The pod's reservation sums follow the new plan (pod cgroups swapcri owns only).
        self.memory.apply_pod_reservations(&sandbox, &self.registry.owned_pod_reservations(), None).await?;
        tracing::info!(container = %container.meta.id, "container resources updated");
        Ok(())
    }
}
