//! UpdatePodSandboxResources: kubelet reports a pod's new resources after it resized the
//! pod cgroup itself. The call is informational: swapcri records the figures (verbose
//! status shows them) and refreshes only what it owns, the memory reservation sums of a
//! pod cgroup it created.

use crate::cri;

use crate::error::Error;
use crate::model::sandbox::PodResources;

use crate::service::adapters::nri_domain;
use crate::service::owners::objects::now_nanos;
use crate::service::pod_service::PodService;

impl PodService {
    pub async fn update_sandbox_resources(
        &self,
        id: &str,
        overhead: Option<cri::LinuxContainerResources>,
        resources: Option<cri::LinuxContainerResources>,
    ) -> Result<(), Error> {
        let sandbox = self.registry.find_sandbox(id)?;
        let _guard = self.registry.lock(sandbox.meta.id.as_str()).await;
        let sandbox = self.registry.find_sandbox(sandbox.meta.id.as_str())?;
        if self.nri.enabled() {
            let pod = nri_domain::nri_sandbox(&sandbox);
            let to_nri = |r: &Option<cri::LinuxContainerResources>| r.as_ref().map(nri_domain::resources_of);
            self.nri.update_pod_sandbox(&pod, to_nri(&overhead), to_nri(&resources)).await?;
        }
        let mut status = sandbox.status.clone();
        status.resized = Some(PodResources { overhead, resources, updated_at: now_nanos() });
        self.registry.save_sandbox_status(&sandbox.meta.id, status)?;
        self.memory.apply_pod_reservations(&sandbox, &self.registry.owned_pod_reservations(), None).await?;
        tracing::info!(pod = %sandbox.meta.id, "pod resources recorded");
        Ok(())
    }
}
