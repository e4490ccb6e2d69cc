//! The runtime's side of a Prometheus scrape: per-container swap and memory series.

use crate::metrics::{ContainerLabels, ContainerSeries, MetricsSource};

use super::PodService;

impl MetricsSource for PodService {
    fn container_series(&self) -> Vec<ContainerSeries> {
        let mut out = Vec::new();
        for sample in self.list_container_stats(None) {
            let c = &sample.container;
            let Ok(sandbox) = self.registry.find_sandbox(c.meta.sandbox_id.as_str()) else { continue };
            let pod = sandbox.meta.config.metadata.clone().unwrap_or_default();
            let stats = &sample.sample.stats;
            out.push(ContainerSeries {
                labels: ContainerLabels {
                    container: c.meta.config.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default(),
                    pod: pod.name,
                    namespace: pod.namespace,
                    id: c.meta.id.to_string(),
                },
                swap_usage_bytes: stats.swap.as_ref().map(|s| s.usage_bytes),
                swap_limit_bytes: stats.swap.as_ref().and_then(|s| s.limit_bytes),
                working_set_bytes: stats.memory.as_ref().map(|m| m.working_set_bytes),
            });
        }
        out
    }

    fn memory_counters(&self) -> (u64, u64) {
        self.memory.counter_values()
    }
}
