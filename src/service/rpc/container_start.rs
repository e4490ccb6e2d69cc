use crate::error::Error;
use crate::model::container::ContainerState;
use tracing::Instrument;

use crate::service::adapters::nri_domain::{nri_container, nri_sandbox};
use crate::service::owners::objects::now_nanos;
use crate::service::pod_service::PodService;
use crate::service::steps::span;

impl PodService {
    pub async fn start_container(&self, id: &str) -> Result<(), Error> {
        let container = self.registry.find_container(id)?;
        let _guard = self.registry.lock(container.meta.id.as_str()).await;
        let container = self.registry.find_container(container.meta.id.as_str())?;
        if !container.status.state.can_start() {
            return Err(Error::FailedPrecondition(format!(
                "container {} is {:?}, not created",
                container.meta.id, container.status.state
            )));
        }
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str())?;
        let handler = self.runtimes.get(&sandbox.meta.runtime_handler)?;
        // Taken before the process runs: one that exits at once then still finishes after it
        // started.
        let (pod, nri_ctr) = (nri_sandbox(&sandbox), nri_container(&container, None));
        self.nri.start_container(&pod, &nri_ctr).instrument(span::step("nri")).await?;
        let started_at = now_nanos();
        handler.runtime.start(container.meta.id.as_str()).instrument(span::step("runtime start")).await?;
        let mut status = container.status.clone();
        status.state = ContainerState::Running;
        status.started_at = started_at;
        if let Some(plan) = &status.memory_plan {
            let mismatches =
                self.memory.check(&container.cgroup(&sandbox), &container.meta.id, plan, status.live_init());
            status.memory_mismatches = mismatches;
        }
        self.registry.save_container_status(&container.meta.id, status)?;
        // A process that exits at once may already have an exit record.
        self.registry.refresh(&container.meta.id);
        tracing::info!(container = %container.meta.id, "container started");
        self.nri.post_start_container(&pod, &nri_ctr).await;
        Ok(())
    }
}
