//! What ListPodSandboxMetrics reports: per pod, its cgroup's figures and its network
//! interfaces; per running container, its cgroup's figures and its writable layer. Reading
//! this leaves the CPU rate samples of the stats calls alone.

use crate::model::cgroup_stats::CgroupStats;
use crate::model::cgroup_stats::Detail;
use crate::model::container::ContainerState;
use crate::network::interfaces::{self, InterfaceCounters};

use crate::service::owners::objects::{Container, Sandbox};
use crate::service::pod_service::PodService;
use crate::service::steps::pod_namespaces::ns_modes;

/// The filesystem holding the writable layers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsCapacity {
    pub inodes_free: u64,
    pub inodes_total: u64,
    pub limit_bytes: u64,
}

#[derive(Debug, Clone)]
pub struct ContainerMetrics {
    pub container: Container,
    pub stats: CgroupStats,
    pub detail: Detail,
    /// Bytes and inodes of the writable layer.
    pub writable: Option<(u64, u64)>,
}

#[derive(Debug, Clone)]
pub struct PodMetrics {
    pub sandbox: Sandbox,
    pub stats: CgroupStats,
    pub detail: Detail,
    /// None for host-network pods and pods with no running process to look through.
    pub interfaces: Option<Vec<InterfaceCounters>>,
    pub containers: Vec<ContainerMetrics>,
    pub fs: Option<FsCapacity>,
}

/// The pod network's interfaces, seen through the first running container's live init
/// (never a pid another process took since); None for a host-network pod or with no
/// container to look through.
pub(in crate::service) fn pod_interfaces<'a>(
    sandbox: &Sandbox,
    running: impl IntoIterator<Item = &'a Container>,
) -> Option<Vec<InterfaceCounters>> {
    if ns_modes(&sandbox.meta.config).host_network {
        return None;
    }
    running.into_iter().find_map(|c| c.status.live_init()).and_then(|init| interfaces::of_process(init.pid))
}

impl PodService {
    pub fn pod_metrics(&self) -> Vec<PodMetrics> {
        let fs = nix::sys::statvfs::statvfs(&self.config.state_root).ok().map(|s| FsCapacity {
            inodes_free: s.files_available() as u64,
            inodes_total: s.files() as u64,
            limit_bytes: s.blocks() as u64 * s.fragment_size() as u64,
        });
        let sandboxes: Vec<Sandbox> = self.registry.read().sandboxes.values().cloned().collect();
        // Each pod's files read, pods spread over a few threads.
        crate::blocking::fan_out(sandboxes, |sandbox| {
            let containers: Vec<ContainerMetrics> = self
                .registry
                .containers_in(&sandbox.meta.id)
                .into_iter()
                .filter(|c| c.status.state == ContainerState::Running)
                .map(|container| {
                    let cgroup = container.cgroup(&sandbox);
                    ContainerMetrics {
                        stats: self.cgroups.stats(&cgroup),
                        detail: self.cgroups.detail(&cgroup),
                        writable: self.writable_usage(&container.meta.id),
                        container,
                    }
                })
                .collect();
            let interfaces = pod_interfaces(&sandbox, containers.iter().map(|c| &c.container));
            PodMetrics {
                stats: self.cgroups.stats(&sandbox.meta.cgroup_path()),
                detail: self.cgroups.detail(&sandbox.meta.cgroup_path()),
                interfaces,
                containers,
                fs,
                sandbox,
            }
        })
    }
}
