//! The pod service: the owners the RPC files orchestrate (records, runtimes, memory policy,
//! cgroups, network, images, host, swap supervisor, NRI), each behind an interface of its own.

use std::sync::Arc;

use crate::config::Config;
use crate::error::Error;
use crate::image::ImageStore;
use crate::model::node::NodeFacts;

use crate::service::adapters::nri_stops;
use crate::service::image_service::ImageUsers;
use crate::service::owners::cgroups::Cgroups;
use crate::service::owners::host::{Host, NodeHost};
use crate::service::owners::memory::MemoryQos;
use crate::service::owners::registry::Registry;
use crate::service::owners::runtimes::Runtimes;
use crate::service::owners::wake::Wake;
use crate::service::owners::writable_usage;

/// Pod sandboxes and containers: the RPC files orchestrate these owners, each behind a small
/// interface of its own.
pub struct PodService {
    pub(in crate::service) config: Arc<Config>,
    pub(in crate::service) node: NodeFacts,
    /// Records, locks and directories of every pod and container.
    pub(in crate::service) registry: Registry,
    /// The OCI runtime handlers.
    pub(in crate::service) runtimes: Arc<Runtimes>,
    /// The memory and swap plan: decisions, read-back, pod reservations, counters.
    pub(in crate::service) memory: MemoryQos,
    /// cgroup reads: statistics, CPU rates, where a process's cgroup is.
    pub(in crate::service) cgroups: Cgroups,
    /// Pod networking (CNI).
    pub(in crate::service) network: Arc<crate::network::Network>,
    pub(in crate::service) images: Arc<ImageStore>,
    /// Writable-layer usage per container, from a background walk.
    pub(in crate::service) writable: writable_usage::WritableUsage,
    /// systemd's manager, under the systemd cgroup driver.
    pub(in crate::service) systemd: Option<Arc<crate::cgroup::systemd::Systemd>>,
    /// Namespaces, mounts and monitors on the node.
    pub(in crate::service) host: Arc<dyn Host>,
    /// Wakes the watcher of PID-namespace holders when a pod with one is recorded.
    pub(in crate::service) holder_wake: Wake,
    /// Wakes the exit watch when a container with a monitor is recorded.
    pub(in crate::service) exit_wake: Wake,
    /// Thrash detection, the guard and the offload (it reaches pods through adapters/swap_pods.rs).
    pub(in crate::service) swap: Arc<crate::swap::Supervisor>,
    /// NRI plugins and their events.
    pub(in crate::service) nri: Arc<crate::nri::Nri>,
    /// Containers whose StopContainer event was sent.
    pub(in crate::service) nri_stops: nri_stops::StopsSent,
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
        let registry = Registry::open(&config.state_root, &config.run_root)?;
        let swap = crate::swap::Supervisor::new(
            &config,
            node.cgroup_v2(),
            registry.container_records().clone(),
            systemd.clone(),
        );
        let host = Arc::new(NodeHost::new(config.runtime.spare_monitors));
        Ok(PodService {
            registry,
            swap: Arc::new(swap),
            memory: MemoryQos::new(&config, node.clone(), systemd.clone()),
            nri: crate::nri::Nri::new(config.nri.clone()),
            systemd,
            cgroups: Cgroups::new(&config.cgroup_root, node.cgroup_v2()),
            config,
            node,
            images,
            runtimes,
            network,
            writable: Default::default(),
            host,
            holder_wake: Default::default(),
            exit_wake: Default::default(),
            nri_stops: Default::default(),
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

impl ImageUsers for PodService {
    fn containers_using(&self, image: &crate::model::image::ImageId) -> Vec<String> {
        self.registry.containers_using(image)
    }
}
