//! The typed services behind the gRPC adapters, one file per RPC.

mod cgroups;
mod container_bundle;
mod container_create;
mod container_exec_sync;
mod container_list;
mod container_remove;
mod container_reopen_log;
mod container_start;
mod container_status;
mod container_stop;
mod container_update;
mod cri_metrics;
mod events;
#[cfg(test)]
mod fake_runtime_tests;
#[cfg(test)]
mod fuzz_tests;
mod host;
mod image_fs_info;
mod image_list;
mod image_pull;
mod image_remove;
mod image_status;
mod image_volumes;
mod layers;
mod memory;
mod metrics_source;
mod nri_domain;
mod objects;
mod offload;
pub mod quarantine;
mod recovery;
mod registry;
mod rollback;
mod runtime_config;
mod runtime_status;
mod runtime_version;
mod runtimes;
mod sandbox_list;
mod sandbox_remove;
mod sandbox_run;
mod sandbox_status;
mod sandbox_stop;
mod sandbox_update;
mod sandbox_watch;
mod stats;
mod streaming;
mod swap_guard;
mod thrash_watch;
mod writable_usage;

pub use stats::{ContainerSample, PodSample, Sample};

use std::sync::Arc;

use crate::config::Config;
use crate::error::Error;
use crate::image::{ImageLookup, ImageStore, Puller};
use crate::model::image::ImageRecord;
use crate::model::node::NodeFacts;

use cgroups::Cgroups;
use memory::MemoryQos;
use registry::Registry;

pub use cri_metrics::{ContainerMetrics, FsCapacity, PodMetrics};
pub use events::{Event, EventKind};
pub use host::{Host, NodeHost};
pub use objects::{Container, Sandbox};
pub use runtime_status::{Condition, RuntimeStatus};
pub use runtime_version::VersionInfo;
pub use runtimes::{HandlerCapabilities, RuntimeHandler, Runtimes};
pub use sandbox_status::SandboxStatusView;
pub use streaming::{StreamWants, StreamingService};

/// Pod sandboxes and containers: the RPC files orchestrate these owners, each behind a small
/// interface of its own.
pub struct PodService {
    pub(crate) config: Arc<Config>,
    pub(crate) node: NodeFacts,
    /// Records, locks and directories of every pod and container.
    pub(crate) registry: Registry,
    /// The OCI runtime handlers.
    pub(crate) runtimes: Arc<Runtimes>,
    /// The memory and swap plan: decisions, read-back, pod reservations, counters.
    pub(crate) memory: MemoryQos,
    /// cgroup reads: statistics, CPU rates, where a process's cgroup is.
    pub(crate) cgroups: Cgroups,
    /// Pod networking (CNI).
    pub(crate) network: Arc<crate::network::Network>,
    pub(crate) images: Arc<ImageStore>,
    /// Writable-layer usage per container, from a background walk.
    pub(crate) writable: writable_usage::WritableUsage,
    /// systemd's manager, under the systemd cgroup driver.
    pub(crate) systemd: Option<Arc<crate::cgroup::systemd::Systemd>>,
    /// Namespaces, mounts and monitors on the node.
    pub(crate) host: Arc<dyn Host>,
    /// Wakes the watcher of PID-namespace holders when a pod with one is recorded.
    pub(crate) holder_watch: sandbox_watch::HolderWatch,
    /// Each container's swap state (normal, pressured, thrashing) from the thrash watcher.
    pub(crate) thrash: thrash_watch::ThrashBoard,
    /// Each container's cold-memory offload, where it runs.
    pub(crate) offload: offload::OffloadBoard,
    /// NRI plugins and their events.
    pub(crate) nri: Arc<crate::nri::Nri>,
    /// Containers whose StopContainer event was sent.
    pub(crate) nri_stops: nri_domain::StopsSent,
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
            nri: crate::nri::Nri::new(config.nri.clone()),
            systemd,
            cgroups: Cgroups::new(&config.cgroup_root, node.cgroup_v2()),
            config,
            node,
            images,
            runtimes,
            network,
            writable: Default::default(),
            host: Arc::new(NodeHost),
            holder_watch: Default::default(),
            thrash: Default::default(),
            offload: Default::default(),
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

/// Image operations: the store, the puller, which images are pinned, and who uses them.
pub struct ImageService {
    store: Arc<ImageStore>,
    puller: Arc<Puller>,
    pinned: Vec<ImageLookup>,
    users: Arc<dyn ImageUsers>,
}

/// Who uses an image: RemoveImage refuses while anyone does.
pub trait ImageUsers: Send + Sync {
    fn containers_using(&self, image: &crate::model::image::ImageId) -> Vec<String>;
}

impl ImageUsers for PodService {
    fn containers_using(&self, image: &crate::model::image::ImageId) -> Vec<String> {
        self.registry.containers_using(image)
    }
}

/// An image as reported to clients.
#[derive(Debug, Clone)]
pub struct ImageView {
    pub record: ImageRecord,
    pub size: u64,
    pub pinned: bool,
}

/// Runtime-wide facts: configuration and what was probed at start-up.
pub struct RuntimeService {
    config: Arc<Config>,
    node: crate::model::node::NodeFacts,
    runtimes: Arc<Runtimes>,
}

impl ImageService {
    pub fn new(
        store: Arc<ImageStore>,
        puller: Arc<Puller>,
        pinned: Vec<ImageLookup>,
        users: Arc<dyn ImageUsers>,
    ) -> Self {
        ImageService { store, puller, pinned, users }
    }

    fn view(&self, (record, size): (ImageRecord, u64)) -> ImageView {
        let pinned = self.pinned.iter().any(|p| match p {
            ImageLookup::Id(id) => *id == record.id,
            ImageLookup::Tag(t) => record.repo_tags.contains(t),
            ImageLookup::Digest(d) => record.repo_digests.contains(d),
        });
        ImageView { record, size, pinned }
    }

    /// Runs store work off the async threads (it takes a file lock and may fsync).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ImageStore) -> Result<T, crate::image::ImageError> + Send + 'static,
    ) -> Result<T, crate::error::Error> {
        let store = self.store.clone();
        Ok(crate::blocking::spawn(move || f(&store)).await??)
    }
}

impl RuntimeService {
    pub fn new(config: Arc<Config>, node: crate::model::node::NodeFacts, runtimes: Arc<Runtimes>) -> Self {
        RuntimeService { config, node, runtimes }
    }
}

/// A span around one step of an RPC (at debug level): with `log_span_timings` on, each
/// step's time is logged when it ends, which tells where a slow call spends its time.
pub(crate) fn step(name: &'static str) -> tracing::Span {
    tracing::debug_span!("step", step = name)
}
