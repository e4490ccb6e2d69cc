//! The runtime's side of a Prometheus scrape: per-container and per-pod memory and swap
//! series, read from the cgroups without touching the samples kubelet's CPU rates come from.

use crate::metrics::{GroupSeries, MetricsSource};
use crate::model::container::ContainerState;

use crate::service::owners::objects::Sandbox;
use crate::service::pod_service::PodService;

fn pod_names(sandbox: &Sandbox) -> (String, String) {
    let pod = sandbox.meta.config.metadata.clone().unwrap_or_default();
    (pod.name, pod.namespace)
}

impl MetricsSource for PodService {
    fn container_series(&self) -> Vec<GroupSeries> {
        let mut out = Vec::new();
        for c in self
            .list_containers(None)
            .into_iter()
            .filter(|c| matches!(c.status.state, ContainerState::Running | ContainerState::Created))
        {
            let Ok(sandbox) = self.registry.find_sandbox(c.meta.sandbox_id.as_str()) else { continue };
            let (pod, namespace) = pod_names(&sandbox);
            let name = c.meta.config.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default();
            let stats = self.cgroups.stats(&c.cgroup(&sandbox));
            let mut series = GroupSeries::container(&name, &pod, &namespace, c.meta.id.as_str(), stats);
            let running = c.status.state == ContainerState::Running;
            series.thrashing = running
                .then(|| self.swap.thrash_state(&c.meta.id))
                .flatten()
                .map(|r| r.state == crate::policy::thrash::ThrashState::Thrashing);
            out.push(series);
        }
        out
    }

    fn pod_series(&self) -> Vec<GroupSeries> {
        let sandboxes: Vec<Sandbox> = self.registry.read().sandboxes.values().cloned().collect();
        sandboxes
            .iter()
            .filter(|s| s.status.state.can_start_containers())
            .map(|s| {
                let (pod, namespace) = pod_names(s);
                GroupSeries::pod(&pod, &namespace, s.meta.id.as_str(), self.cgroups.stats(&s.meta.cgroup_path()))
            })
            .collect()
    }

    fn memory_counters(&self) -> (u64, u64) {
        self.memory.counter_values()
    }

    fn nri_plugins(&self) -> Vec<crate::nri::PluginStats> {
        self.nri.plugin_stats()
    }

    fn swap_actions(&self) -> crate::metrics::SwapActions {
        self.swap.counts()
    }
}
