use crate::cri;

use crate::error::Error;
use crate::model::container::ContainerState;
use crate::nri::{Adjustment, PluginId};
use crate::policy::spec;

use crate::service::adapters::nri_domain::{nri_container, nri_sandbox, resources_of};
use crate::service::pod_service::PodService;

/// Who asks for an update: kubelet (plugins see it and may change it), or a plugin.
enum Asker<'a> {
    Kubelet(cri::LinuxContainerResources),
    Plugin(&'a PluginId, &'a crate::nri::api::LinuxResources),
}

impl PodService {
    /// Applies new resources to a running or created container (in-place resize).
    pub async fn update_container(
        &self,
        id: &str,
        resources: Option<cri::LinuxContainerResources>,
    ) -> Result<(), Error> {
        let Some(resources) = resources else { return Ok(()) };
        self.update_resources(id, Asker::Kubelet(resources)).await
    }

    /// An NRI plugin's update of a container: its values on top of the container's current
    /// resources, through the swap policy like any plugin's.
    pub(in crate::service) async fn update_from_plugin(
        &self,
        plugin: &PluginId,
        id: &str,
        resources: &crate::nri::api::LinuxResources,
    ) -> Result<(), Error> {
        self.update_resources(id, Asker::Plugin(plugin, resources)).await
    }

    async fn update_resources(&self, id: &str, asker: Asker<'_>) -> Result<(), Error> {
        let container = self.registry.find_container(id)?;
        let _guard = self.registry.lock(container.meta.id.as_str()).await;
        let container = self.registry.find_container(container.meta.id.as_str())?;
        if !container.status.state.needs_stop() && container.status.state != ContainerState::Created {
            return Err(Error::FailedPrecondition(format!("container {} is not running", container.meta.id)));
        }
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str())?;
        let (resources, mut adjustment, from_kubelet) = match asker {
            Asker::Kubelet(r) => (r, Adjustment::default(), true),
            Asker::Plugin(plugin, asked) => {
                let mut a = Adjustment::default();
                a.merge_resources(plugin, asked)?;
                (container.status.resources.clone().unwrap_or_default(), a, false)
            }
        };
        // Requests and limits change in place: the plan follows them.
        let mut plan = self.memory.plan(&sandbox, &container.meta.config, &resources)?;
        let (pod, nri_ctr) = (nri_sandbox(&sandbox), nri_container(&container, None));
        let mut others = Vec::new();
        if from_kubelet && self.nri.enabled() {
            let (own, asked) = self.nri.update_container(&pod, &nri_ctr, &resources_of(&resources)).await?;
            (adjustment, others) = (own, asked);
        }
        if !adjustment.is_empty() {
            plan = self.review_plan(&plan, &adjustment)?;
        }
        // The same resources step as at create: create and update cannot drift.
        let mut warnings = Vec::new();
        let mut linux = spec::linux_resources(&resources, &plan.unified(), &self.node, &mut warnings);
        if !adjustment.is_empty() {
            let more = crate::nri::apply_to_resources(&mut linux, &adjustment, &plan.unified(), &self.node)
                .map_err(|e| Error::FailedPrecondition(format!("NRI update: {e}")))?;
            warnings.extend(more);
        }
        for warning in &warnings {
            tracing::warn!(container = %container.meta.id, "{warning}");
        }
        let document = spec::update_document(&linux);
        let runtime = self.runtimes.runtime(&sandbox.meta.runtime_handler)?;
        runtime.update(container.meta.id.as_str(), document.to_string().as_bytes()).await?;
        let mut status = container.status.clone();
        status.resources = Some(resources);
        if status.state == ContainerState::Running {
            let mismatches =
                self.memory.check(&container.cgroup(&sandbox), &container.meta.id, &plan, status.live_init());
            status.memory_mismatches = mismatches;
        }
        status.memory_plan = Some(plan);
        status.nri_owners.extend(adjustment.owners);
        self.registry.save_container_status(&container.meta.id, status)?;
        // The pod's reservation sums follow the new plan (pod cgroups swapcri owns only).
        self.memory.apply_pod_reservations(&sandbox, &self.registry.owned_pod_reservations(), None).await?;
        tracing::info!(container = %container.meta.id, "container resources updated");
        if from_kubelet && self.nri.enabled() {
            self.nri.post_update_container(&pod, &nri_ctr).await;
            for (plugin, update) in others {
                if let Err(e) = crate::nri::Domain::update_container(self, &plugin, &update).await {
                    tracing::warn!(plugin = %plugin, container = %update.container_id, error = %e, "NRI update failed");
                }
            }
        }
        Ok(())
    }
}
