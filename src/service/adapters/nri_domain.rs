//! swapcri as NRI sees it: pods and containers in NRI's terms, the StopContainer event for
//! containers that exit on their own, and the updates and evictions plugins ask for.

use std::time::Duration;

use async_trait::async_trait;

use crate::cri;
use crate::model::container::ContainerState;
use crate::model::ids::{ContainerId, SandboxId};
use crate::model::sandbox::PodAddresses;
use crate::nri::{api, Domain, PluginId};

use crate::service::owners::objects::{Container, Sandbox};
use crate::service::pod_service::PodService;

/// A pod from its parts (a pod being created has no record yet).
pub(in crate::service) fn nri_pod(
    id: &SandboxId,
    config: &cri::PodSandboxConfig,
    handler: &str,
    cgroup_parent: &str,
    addresses: Option<&PodAddresses>,
) -> api::PodSandbox {
    let metadata = config.metadata.clone().unwrap_or_default();
    let ips = addresses.map(|a| std::iter::once(a.ip.clone()).chain(a.additional_ips.iter().cloned()).collect());
    api::PodSandbox {
        id: id.to_string(),
        name: metadata.name,
        uid: metadata.uid,
        namespace: metadata.namespace,
        labels: config.labels.clone(),
        annotations: config.annotations.clone(),
        runtime_handler: handler.to_string(),
        linux: Some(api::LinuxPodSandbox { cgroup_parent: cgroup_parent.to_string(), ..Default::default() }),
        pid: 0,
        ips: ips.unwrap_or_default(),
    }
}

pub(in crate::service) fn nri_sandbox(sandbox: &Sandbox) -> api::PodSandbox {
    let meta = &sandbox.meta;
    let mut pod =
        nri_pod(&meta.id, &meta.config, &meta.runtime_handler, &meta.cgroup_parent, sandbox.status.addresses.as_ref());
    pod.pid = sandbox.status.holder.map(|h| h.pid as u32).unwrap_or(0);
    pod
}

/// A container from its record; at creation, `spec` gives what the runtime will run.
pub(in crate::service) fn nri_container(
    container: &Container,
    spec: Option<&oci_spec::runtime::Spec>,
) -> api::Container {
    let (meta, status) = (&container.meta, &container.status);
    let config = &meta.config;
    let state = match status.state {
        ContainerState::Created => api::ContainerState::ContainerCreated,
        ContainerState::Running => api::ContainerState::ContainerRunning,
        ContainerState::Exited => api::ContainerState::ContainerStopped,
        ContainerState::Unknown => api::ContainerState::ContainerUnknown,
    };
    let mut c = api::Container {
        id: meta.id.to_string(),
        pod_sandbox_id: meta.sandbox_id.to_string(),
        name: config.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default(),
        state: state as i32,
        labels: config.labels.clone(),
        annotations: config.annotations.clone(),
        args: config.command.iter().chain(&config.args).cloned().collect(),
        env: config.envs.iter().map(|kv| format!("{}={}", kv.key, kv.value)).collect(),
        mounts: config
            .mounts
            .iter()
            .map(|m| api::Mount {
                destination: m.container_path.clone(),
                r#type: "bind".into(),
                source: m.host_path.clone(),
                options: if m.readonly { vec!["rbind".into(), "ro".into()] } else { vec!["rbind".into(), "rw".into()] },
            })
            .collect(),
        pid: status.pid.map(|p| p as u32).unwrap_or(0),
        created_at: meta.created_at,
        started_at: status.started_at,
        finished_at: status.finished_at,
        exit_code: status.exit_code,
        status_reason: status.reason.clone(),
        status_message: status.message.clone(),
        linux: Some(api::LinuxContainer {
            resources: status
                .resources
                .as_ref()
                .or(config.linux.as_ref().and_then(|l| l.resources.as_ref()))
                .map(resources_of),
            ..Default::default()
        }),
        ..Default::default()
    };
    if let Some(spec) = spec {
        from_spec(&mut c, spec);
    }
    c
}

/// What the spec settles beyond the request: the command line, environment and mounts as run.
pub(in crate::service) fn from_spec(c: &mut api::Container, spec: &oci_spec::runtime::Spec) {
    if let Some(process) = spec.process() {
        c.args = process.args().clone().unwrap_or_default();
        c.env = process.env().clone().unwrap_or_default();
        if let Some(linux) = c.linux.as_mut() {
            linux.oom_score_adj = process.oom_score_adj().map(|v| api::OptionalInt { value: v as i64 });
        }
    }
    c.mounts = spec
        .mounts()
        .iter()
        .flatten()
        .map(|m| api::Mount {
            destination: m.destination().display().to_string(),
            r#type: m.typ().clone().unwrap_or_default(),
            source: m.source().as_ref().map(|s| s.display().to_string()).unwrap_or_default(),
            options: m.options().clone().unwrap_or_default(),
        })
        .collect();
    if let (Some(linux), Some(cgroups)) =
        (c.linux.as_mut(), spec.linux().as_ref().and_then(|l| l.cgroups_path().clone()))
    {
        linux.cgroups_path = cgroups.display().to_string();
    }
}

/// CRI resources in NRI's terms.
pub(in crate::service) fn resources_of(r: &cri::LinuxContainerResources) -> api::LinuxResources {
    let positive = |v: i64| (v > 0).then_some(v);
    api::LinuxResources {
        memory: Some(api::LinuxMemory {
            limit: positive(r.memory_limit_in_bytes).map(|value| api::OptionalInt64 { value }),
            swap: positive(r.memory_swap_limit_in_bytes).map(|value| api::OptionalInt64 { value }),
            ..Default::default()
        }),
        cpu: Some(api::LinuxCpu {
            shares: positive(r.cpu_shares).map(|v| api::OptionalUInt64 { value: v as u64 }),
            quota: positive(r.cpu_quota).map(|value| api::OptionalInt64 { value }),
            period: positive(r.cpu_period).map(|v| api::OptionalUInt64 { value: v as u64 }),
            cpus: r.cpuset_cpus.clone(),
            mems: r.cpuset_mems.clone(),
            ..Default::default()
        }),
        hugepage_limits: r
            .hugepage_limits
            .iter()
            .map(|h| api::HugepageLimit { page_size: h.page_size.clone(), limit: h.limit })
            .collect(),
        unified: r.unified.clone(),
        ..Default::default()
    }
}

impl PodService {
    /// Sends the container's StopContainer event once it has stopped, once.
    pub(in crate::service) async fn nri_stopped(&self, id: &ContainerId) {
        if !self.nri.enabled() {
            return;
        }
        let Some(container) = self.registry.read().containers.get(id).cloned() else { return };
        if container.status.state.is_live() {
            return;
        }
        let Ok(sandbox) = self.registry.find_sandbox(container.meta.sandbox_id.as_str()) else { return };
        self.stop_event_once(&container, &sandbox).await;
    }

    /// Sends StopContainer unless it was sent; waits for one in flight.
    async fn stop_event_once(&self, container: &Container, sandbox: &Sandbox) {
        let cell = self.nri_stops.cell(&container.meta.id);
        cell.get_or_init(|| async {
            self.nri.stop_container(&nri_sandbox(sandbox), &nri_container(container, None)).await;
        })
        .await;
    }

    /// After RemoveContainer (of a container stopped before): its StopContainer first.
    pub(in crate::service) async fn nri_removed(&self, container: &Container, sandbox: &Sandbox) {
        if self.nri.enabled() {
            self.stop_event_once(container, sandbox).await;
            self.nri.remove_container(&nri_sandbox(sandbox), &nri_container(container, None)).await;
            self.nri_stops.forget(&container.meta.id);
        }
    }
}

#[async_trait]
impl Domain for PodService {
    fn snapshot(&self) -> (Vec<api::PodSandbox>, Vec<api::Container>) {
        let state = self.registry.read();
        let pods = state.sandboxes.values().map(nri_sandbox).collect();
        let containers = state.containers.values().map(|c| nri_container(c, None)).collect();
        (pods, containers)
    }

    async fn update_container(&self, plugin: &PluginId, update: &api::ContainerUpdate) -> Result<(), String> {
        let resources = update.linux.as_ref().and_then(|l| l.resources.as_ref()).ok_or("no resources to update")?;
        self.update_from_plugin(plugin, &update.container_id, resources).await.map_err(|e| e.to_string())
    }

    async fn evict_container(&self, plugin: &PluginId, eviction: &api::ContainerEviction) -> Result<(), String> {
        tracing::warn!(plugin = %plugin, container = %eviction.container_id, reason = %eviction.reason, "NRI plugin evicts a container");
        self.stop_container(&eviction.container_id, Duration::ZERO).await.map_err(|e| e.to_string())
    }
}
