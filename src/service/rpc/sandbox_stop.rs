use std::time::Duration;
use tracing::Instrument;

use crate::error::Error;
use crate::model::sandbox::SandboxState;

use crate::service::adapters::nri_domain;
use crate::service::pod_service::PodService;
use crate::service::steps::span;

impl PodService {
    /// Kills the pod's containers and releases its namespaces and shm. Idempotent; an
    /// unknown sandbox is already stopped.
    pub async fn stop_sandbox(&self, id: &str) -> Result<(), Error> {
        let sandbox = match self.registry.find_sandbox(id) {
            Ok(s) => s,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let _guard = self.registry.lock(sandbox.meta.id.as_str()).await;
        for container in self.registry.containers_of(&sandbox.meta.id) {
            self.stop_container(container.as_str(), Duration::ZERO).instrument(span::step("stop container")).await?;
        }
        let sandbox = self.registry.find_sandbox(sandbox.meta.id.as_str())?;
        crate::crash::point("sandbox-stop-after-containers");
        // Plugins hear of the stop once, with the containers stopped and the pod still there.
        if sandbox.status.state != SandboxState::NotReady {
            self.nri.stop_pod_sandbox(&nri_domain::nri_sandbox(&sandbox)).instrument(span::step("nri")).await;
        }
        // DEL while the namespace still exists; on failure nothing is released, so the
        // retry kubelet makes repeats it.
        self.network.teardown(sandbox.meta.id.as_str()).instrument(span::step("cni del")).await?;
        let request = self.ns_request(&sandbox.meta.id, &sandbox.meta.config);
        let holder = sandbox.status.holder;
        let (shm, host) = (sandbox.meta.dir.join("shm"), self.host.clone());
        crate::blocking::spawn(move || {
            span::step("release namespaces").in_scope(|| {
                host.release_namespaces(&request, holder);
                let _ = host.unmount(&shm);
            })
        })
        .await?;
        if sandbox.status.state != SandboxState::NotReady {
            let mut status = sandbox.status.clone();
            status.state = SandboxState::NotReady;
            status.holder = None;
            status.addresses = None;
            span::step("record").in_scope(|| self.registry.save_sandbox_status(&sandbox.meta.id, status))?;
            tracing::info!(sandbox = %sandbox.meta.id, "pod sandbox stopped");
        }
        Ok(())
    }
}
