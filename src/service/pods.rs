//! Pod sandboxes and containers: the service the pod and container RPC files extend, and the
//! owners it is made of.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::error::Error;
use crate::image::ImageStore;
use crate::model::container::{ContainerMeta, ContainerStatus};
use crate::model::ids::ContainerId;
use crate::model::node::NodeFacts;
use crate::model::sandbox::{SandboxMeta, SandboxStatus};

use super::cgroups::Cgroups;
use super::memory::MemoryQos;
use super::registry::Registry;
use super::runtimes::Runtimes;

#[derive(Debug, Clone)]
pub struct Sandbox {
    pub meta: Arc<SandboxMeta>,
    pub status: SandboxStatus,
}

impl Sandbox {
    /// The cgroup path a container of this pod is created at (the OCI spec's cgroupsPath),
    /// relative to the cgroup root.
    pub fn container_cgroup(&self, id: &ContainerId) -> String {
        self.meta.cgroup_layout().container_path(&self.meta.cgroup_parent, id.as_str())
    }
}

impl Container {
    /// Where the container's cgroup is: as found at creation, else where it was asked for.
    pub fn cgroup(&self, sandbox: &Sandbox) -> String {
        self.status.cgroup.clone().unwrap_or_else(|| sandbox.container_cgroup(&self.meta.id))
    }
}

#[derive(Debug, Clone)]
pub struct Container {
    pub meta: Arc<ContainerMeta>,
    pub status: ContainerStatus,
}

/// Pod sandboxes and containers: the RPC files orchestrate these owners, each behind a small
/// interface of its own.
pub struct PodService {
    pub(super) config: Arc<Config>,
    pub(super) node: NodeFacts,
    /// Records, locks and directories of every pod and container.
    pub(super) registry: Registry,
    /// The OCI runtime handlers.
    pub(super) runtimes: Arc<Runtimes>,
    /// The memory and swap plan: decisions, read-back, pod reservations, counters.
    pub(super) memory: MemoryQos,
    /// cgroup reads: statistics, CPU rates, where a process's cgroup is.
    pub(super) cgroups: Cgroups,
    /// Pod networking (CNI).
    pub(super) network: Arc<crate::network::Network>,
    pub(super) images: Arc<ImageStore>,
    /// Writable-layer usage per container, from a background walk.
    pub(super) writable: super::writable_usage::WritableUsage,
    /// systemd's manager, under the systemd cgroup driver.
    pub(super) systemd: Option<Arc<crate::cgroup::systemd::Systemd>>,
    /// Namespaces, mounts and monitors on the node.
    pub(super) host: Arc<dyn super::Host>,
    /// Wakes the watcher of PID-namespace holders when a pod with one is recorded.
    pub(super) holder_watch: super::sandbox_watch::HolderWatch,
}

impl PodService {
    pub fn new(
        config: Arc<Config>,
        node: NodeFacts,
        images: Arc<ImageStore>,
        runtimes: Arc<Runtimes>,
    ) -> Result<Self, Error> {
        let network = Arc::new(crate::network::Network::new(config.network.clone(), config.state_root.join("cni")));
        let systemd = (config.runtime.cgroup_driver == crate::config::CgroupDriver::Systemd)
            .then(|| Arc::new(crate::cgroup::systemd::Systemd::default()));
        Ok(PodService {
            registry: Registry::open(&config.state_root, &config.run_root)?,
            memory: MemoryQos::new(&config, node.clone(), systemd.clone()),
            systemd,
            cgroups: Cgroups::new(&config.cgroup_root, node.cgroup_v2()),
            config,
            node,
            images,
            runtimes,
            network,
            writable: Default::default(),
            host: Arc::new(super::NodeHost),
            holder_watch: Default::default(),
        })
    }

    /// The network pods join now (its name), or why there is none.
    pub async fn network_ready(&self) -> Result<String, crate::network::NetworkError> {
        self.network.ready().await.map(|list| list.name)
    }

    /// UpdateRuntimeConfig: kubelet's pod CIDR for the CNI plugins' ipRanges.
    pub fn set_pod_cidr(&self, cidr: &str) -> Result<(), Error> {
        if !cidr.is_empty() {
            self.network.set_pod_cidr(cidr)?;
            tracing::info!(pod_cidr = %cidr, "pod CIDR from kubelet");
        }
        Ok(())
    }
}

pub(super) fn now_nanos() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// Labels match a selector when every selector pair is present.
pub(super) fn labels_match(labels: &HashMap<String, String>, selector: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}
