use crate::error::Error;
use crate::model::container::ContainerState;
use tracing::Instrument;

use crate::model::sandbox::ProcessRef;
use crate::oci::RestoreFrom;
use crate::service::adapters::nri_domain::{nri_container, nri_sandbox};
use crate::service::owners::objects::now_nanos;
use crate::service::owners::objects::{Container, Sandbox};
use crate::service::pod_service::PodService;
use crate::service::steps::criu::find_criu;
use crate::service::steps::rollback::Rollback;
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
        let mut status = container.status.clone();
        match &container.meta.restore {
            // A restored container: its monitor brings the checkpoint's processes back, running.
            Some(images) => {
                let (monitor, pid) = self.restore_processes(&container, &sandbox, images).await?;
                (status.monitor, status.pid) = (Some(monitor), Some(pid));
                status.cgroup = self.cgroups.cgroup_of(pid);
            }
            None => handler.runtime.start(container.meta.id.as_str()).instrument(span::step("runtime start")).await?,
        }
        status.state = ContainerState::Running;
        status.started_at = started_at;
        if let Some(plan) = &status.memory_plan {
            let mismatches = span::step("plan read back").in_scope(|| {
                self.memory.check(&container.cgroup(&sandbox), &container.meta.id, plan, status.live_init())
            });
            status.memory_mismatches = mismatches;
        }
        span::step("record").in_scope(|| self.registry.save_container_status(&container.meta.id, status))?;
        // A process that exits at once may already have an exit record.
        self.registry.refresh(&container.meta.id);
        tracing::info!(container = %container.meta.id, "container started");
        self.nri.post_start_container(&pod, &nri_ctr).await;
        Ok(())
    }
}

impl PodService {
    /// Starts the restored container's monitor, which has the runtime restore CRIU's images.
    async fn restore_processes(
        &self,
        container: &Container,
        sandbox: &Sandbox,
        images: &std::path::Path,
    ) -> Result<(ProcessRef, i32), Error> {
        let criu = find_criu(&self.config.checkpoint.criu)?;
        let from = RestoreFrom { image_dir: images.to_path_buf(), criu };
        let run_dir = self.registry.container_run_dir(&container.meta.id);
        let mut rollback = Rollback::new();
        let (meta, log_path) = (&container.meta, &container.meta.log_path);
        let started = self
            .start_monitor(&meta.id, sandbox, &meta.config, &run_dir, log_path, Some(from), &mut rollback)
            .instrument(span::step("monitor and runtime restore"))
            .await?;
        rollback.commit();
        // Restored: CRIU's images (as large as the container's memory) are done with.
        if let Some(kept) = images.parent() {
            let kept = kept.to_path_buf();
            crate::blocking::spawn(move || std::fs::remove_dir_all(kept));
        }
        Ok(started)
    }
}
