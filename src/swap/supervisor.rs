//! The supervisor's settings, boards and counters, and what the rest of the runtime may ask
//! of it.

use std::sync::Arc;

use crate::cgroup::systemd::Systemd;
use crate::config::{Config, GuardConfig, OffloadConfig, ThrashConfig};
use crate::model::ids::ContainerId;
use crate::policy::offload::Offloader;
use crate::store::Records;

use super::board::{Counters, OffloadBoard, PodThrottles, ThrashBoard, ThrashReport};

pub struct Supervisor {
    pub(super) thrash_config: ThrashConfig,
    pub(super) guard_config: GuardConfig,
    pub(super) offload_config: OffloadConfig,
    /// Only a cgroup v2 node has the files (PSI, memory.swap.*, memory.reclaim) it works on.
    pub(super) cgroup_v2: bool,
    /// The containers' records, beside which the guard keeps its own.
    pub(super) records: Records,
    /// systemd's manager, under the systemd cgroup driver: a throttle sets the weights it
    /// owns through the container scope's properties.
    pub(super) systemd: Option<Arc<Systemd>>,
    pub(super) thrash: ThrashBoard,
    pub(super) offload: OffloadBoard,
    pub(super) counters: Counters,
    pub(super) pod_throttles: PodThrottles,
}

impl Supervisor {
    pub fn new(config: &Config, cgroup_v2: bool, container_records: Records, systemd: Option<Arc<Systemd>>) -> Self {
        Supervisor {
            thrash_config: config.thrash.clone(),
            guard_config: config.guard.clone(),
            offload_config: config.offload.clone(),
            cgroup_v2,
            records: container_records,
            systemd,
            thrash: ThrashBoard::default(),
            offload: OffloadBoard::default(),
            counters: Counters::default(),
            pod_throttles: PodThrottles::default(),
        }
    }

    /// The container's swap state where detection runs (normal until seen otherwise); None
    /// where it does not.
    pub fn thrash_state(&self, id: &ContainerId) -> Option<ThrashReport> {
        self.thrash.active().then(|| self.thrash.report(id).unwrap_or_default())
    }

    /// The container's offload figures, where the offload looked at it.
    pub fn offload_report(&self, id: &ContainerId) -> Option<Offloader> {
        self.offload.report(id)
    }

    pub fn counts(&self) -> crate::metrics::SwapActions {
        self.counters.snapshot()
    }
}
