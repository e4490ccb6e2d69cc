use crate::error::Error;

use crate::service::adapters::nri_domain;
use crate::service::pod_service::PodService;

impl PodService {
    /// Stops the pod if needed, removes its containers, directories, records and the cgroup
    /// parent swapcri created. Idempotent.
    pub async fn remove_sandbox(&self, id: &str) -> Result<(), Error> {
        let sandbox = match self.registry.find_sandbox(id) {
            Ok(s) => s,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        self.stop_sandbox(sandbox.meta.id.as_str()).await?;
        let _guard = self.registry.lock(sandbox.meta.id.as_str()).await;
        for container in self.registry.containers_of(&sandbox.meta.id) {
            self.remove_container(container.as_str()).await?;
        }
        if sandbox.meta.owns_cgroup_parent && sandbox.meta.cgroup_driver == crate::config::CgroupDriver::Systemd {
            self.stop_pod_slice(&sandbox.meta.id, &sandbox.meta.cgroup_parent, true).await;
        } else if sandbox.meta.owns_cgroup_parent {
            if let Err(e) = self.cgroups.remove(&sandbox.meta.cgroup_parent) {
                tracing::warn!(sandbox = %sandbox.meta.id, error = %e, "cannot remove the pod cgroup");
            }
        }
        let _ = crate::blocking::run(|| std::fs::remove_dir_all(&sandbox.meta.dir));
        self.registry.remove_sandbox(&sandbox.meta.id)?;
        tracing::info!(sandbox = %sandbox.meta.id, "pod sandbox removed");
        self.nri.remove_pod_sandbox(&nri_domain::nri_sandbox(&sandbox)).await;
        Ok(())
    }
}
