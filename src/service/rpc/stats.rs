//! Container and pod statistics from their cgroups (one reader, no process per container),
//! with CPU rates computed from the previous sample.

use crate::cri;

use crate::error::Error;
use crate::model::cgroup_stats::CgroupStats;
use crate::model::container::ContainerState;

use crate::service::owners::objects::{labels_match, now_nanos, Container, Sandbox};
use crate::service::owners::samples::{ContainerSample, PodSample, Sample};
use crate::service::pod_service::PodService;
use crate::service::rpc::cri_metrics;

impl PodService {
    /// A container's current CPU, memory and swap figures, without touching the CPU rate
    /// samples kubelet's stats calls rely on (for verbose status).
    pub(in crate::service) fn current_usage(&self, container: &Container) -> Option<CgroupStats> {
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str()).ok()?;
        Some(self.cgroups.stats(&container.cgroup(&sandbox)))
    }

    /// `fresh`: walk the writable layer now (one container asked for) rather than take the
    /// background walk's figure (a listing).
    fn container_sample(&self, container: Container, fresh: bool) -> ContainerSample {
        let id = container.meta.id.clone();
        let sample = match (container.status.state, self.registry.find_sandbox(container.meta.sandbox_id.as_str())) {
            (ContainerState::Running | ContainerState::Created, Ok(sandbox)) => {
                self.cgroups.sample(&container.cgroup(&sandbox), id.as_str(), now_nanos())
            }
            _ => {
                self.cgroups.forget(id.as_str());
                Sample { timestamp: now_nanos(), ..Default::default() }
            }
        };
        ContainerSample {
            writable: if fresh { self.walk_writable_layer(&id) } else { self.writable_usage(&id) },
            writable_mountpoint: self.config.state_root.join("containers").display().to_string(),
            container,
            sample,
        }
    }

    pub fn container_stats(&self, id: &str) -> Result<ContainerSample, Error> {
        let container = self.registry.find_container(id)?;
        Ok(self.container_sample(container, true))
    }

    pub fn list_container_stats(&self, filter: Option<&cri::ContainerStatsFilter>) -> Vec<ContainerSample> {
        let containers: Vec<Container> = self
            .list_containers(None)
            .into_iter()
            .filter(|c| match filter {
                None => true,
                Some(f) => {
                    (f.id.is_empty() || c.meta.id.as_str().starts_with(&f.id))
                        && (f.pod_sandbox_id.is_empty() || c.meta.sandbox_id.as_str().starts_with(&f.pod_sandbox_id))
                        && labels_match(&c.meta.config.labels, &f.label_selector)
                }
            })
            .collect();
        crate::blocking::fan_out(containers, |c| self.container_sample(c, false))
    }

    fn pod_sample(&self, sandbox: Sandbox, containers: Vec<ContainerSample>) -> PodSample {
        let key = format!("pod/{}", sandbox.meta.id);
        let sample = self.cgroups.sample(&sandbox.meta.cgroup_path(), &key, now_nanos());
        let running: Vec<&ContainerSample> =
            containers.iter().filter(|c| c.container.status.state == ContainerState::Running).collect();
        let processes = (!running.is_empty())
            .then(|| running.iter().filter_map(|c| self.cgroups.processes(&c.container.cgroup(&sandbox))).sum());
        let interfaces = cri_metrics::pod_interfaces(&sandbox, running.iter().map(|c| &c.container));
        PodSample { sandbox, sample, containers, interfaces, processes }
    }

    pub fn pod_stats(&self, id: &str) -> Result<PodSample, Error> {
        let sandbox = self.registry.find_sandbox(id)?;
        let filter = cri::ContainerStatsFilter { pod_sandbox_id: sandbox.meta.id.to_string(), ..Default::default() };
        let containers = self.list_container_stats(Some(&filter));
        Ok(self.pod_sample(sandbox, containers))
    }

    pub fn list_pod_stats(&self, filter: Option<&cri::PodSandboxStatsFilter>) -> Vec<PodSample> {
        let sandboxes: Vec<Sandbox> = self.registry.read().sandboxes.values().cloned().collect();
        let sandboxes: Vec<Sandbox> = sandboxes
            .into_iter()
            .filter(|s| match filter {
                None => true,
                Some(f) => {
                    (f.id.is_empty() || s.meta.id.as_str().starts_with(&f.id))
                        && labels_match(&s.meta.config.labels, &f.label_selector)
                }
            })
            .collect();
        // One listing of the containers, grouped by pod (not a listing per pod); then each
        // pod's files read, pods spread over a few threads.
        let selected: std::collections::HashSet<_> = sandboxes.iter().map(|s| s.meta.id.clone()).collect();
        let mut by_pod: std::collections::HashMap<_, Vec<Container>> = std::collections::HashMap::new();
        for container in self.list_containers(None).into_iter().filter(|c| selected.contains(&c.meta.sandbox_id)) {
            by_pod.entry(container.meta.sandbox_id.clone()).or_default().push(container);
        }
        let pods: Vec<(Sandbox, Vec<Container>)> = sandboxes
            .into_iter()
            .map(|s| {
                let containers = by_pod.remove(&s.meta.id).unwrap_or_default();
                (s, containers)
            })
            .collect();
        crate::blocking::fan_out(pods, |(sandbox, containers)| {
            let samples = containers.into_iter().map(|c| self.container_sample(c, false)).collect();
            self.pod_sample(sandbox, samples)
        })
    }
}
