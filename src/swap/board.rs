//! What the supervisor found and did, where status, `swapcri top` and the metrics read it:
//! each container's swap state, the guard's action on it, its offload figures, and the
//! counts of throttles, restores, kills and bytes offloaded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::metrics::SwapActions;
use crate::model::ids::ContainerId;
use crate::policy::guard::PodWrites;
use crate::policy::offload::Offloader;
use crate::policy::thrash::{Figures, ThrashState};

/// A container's state as last decided.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThrashReport {
    pub state: ThrashState,
    /// Seconds since the epoch when the state began.
    pub since: i64,
    /// The window's figures at the last reading.
    pub figures: Figures,
    /// What the swap guard did, while the container thrashes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardReport>,
}

/// What the guard did about a container, for verbose status and `swapcri top`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardReport {
    /// observe, exempt, throttled or killed.
    pub action: &'static str,
    pub detail: String,
}

/// The states thrash detection found; containers never seen pressed are not on it.
#[derive(Default)]
pub(super) struct ThrashBoard {
    /// Whether detection runs (cgroup v2 with PSI, and enabled).
    active: AtomicBool,
    reports: Mutex<HashMap<ContainerId, ThrashReport>>,
}

impl ThrashBoard {
    pub(super) fn activate(&self) {
        self.active.store(true, Ordering::Relaxed);
    }

    pub(super) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    pub(super) fn report(&self, id: &ContainerId) -> Option<ThrashReport> {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    pub(super) fn set(&self, id: &ContainerId, report: ThrashReport) {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), report);
    }

    pub(super) fn update_figures(&self, id: &ContainerId, figures: Figures) {
        if let Some(r) = self.reports.lock().unwrap_or_else(|p| p.into_inner()).get_mut(id) {
            r.figures = figures;
        }
    }

    pub(super) fn set_guard(&self, id: &ContainerId, guard: Option<GuardReport>) {
        if let Some(r) = self.reports.lock().unwrap_or_else(|p| p.into_inner()).get_mut(id) {
            r.guard = guard;
        }
    }

    pub(super) fn retain(&self, keep: impl Fn(&ContainerId) -> bool) {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).retain(|id, _| keep(id));
    }
}

/// Each offloaded container's figures.
#[derive(Default)]
pub(super) struct OffloadBoard {
    reports: Mutex<HashMap<ContainerId, Offloader>>,
}

impl OffloadBoard {
    pub(super) fn report(&self, id: &ContainerId) -> Option<Offloader> {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    pub(super) fn set(&self, id: &ContainerId, o: &Offloader) {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), o.clone());
    }

    pub(super) fn retain(&self, keep: impl Fn(&ContainerId) -> bool) {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).retain(|id, _| keep(id));
    }
}

/// The counters behind `SwapCounts`.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) throttles: AtomicU64,
    pub(super) restores: AtomicU64,
    pub(super) kills: AtomicU64,
    pub(super) offload_requested: AtomicU64,
}

impl Counters {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> SwapActions {
        SwapActions {
            throttles: self.throttles.load(Ordering::Relaxed),
            restores: self.restores.load(Ordering::Relaxed),
            kills: self.kills.load(Ordering::Relaxed),
            offload_requested_bytes: self.offload_requested.load(Ordering::Relaxed),
        }
    }
}

/// The pods throttled now, by their group: the containers holding the pod's throttle, and
/// what was written. Held across the writes, so two thrashers of one pod take turns.
pub type PodThrottles = tokio::sync::Mutex<HashMap<std::path::PathBuf, (Vec<ContainerId>, PodWrites)>>;
