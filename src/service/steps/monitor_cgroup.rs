//! Monitors and PID-namespace holders are moved apart from the daemon's own cgroup.

use std::sync::Arc;

use crate::service::pod_service::PodService;

impl PodService {
    /// Moves monitors and PID-namespace holders apart from the daemon's own cgroup, in the
    /// background: into `runtime.monitor_cgroup` (cgroupfs), or each into a transient scope
    /// of its own in `runtime.monitor_slice` (systemd, which owns the tree there). A cgroup
    /// move can wait for an RCU grace period (tens of milliseconds on cgroup v1), which no RPC
    /// should wait for. A process that is gone meanwhile needs no move.
    pub(in crate::service) fn adopt_into_monitor_cgroup(&self, processes: Vec<crate::model::sandbox::ProcessRef>) {
        if let Some(systemd) = self.systemd.clone() {
            let slice = self.config.runtime.monitor_slice.clone();
            tokio::spawn(adopt_into_scopes(systemd, slice, processes));
            return;
        }
        let rel = self.config.runtime.monitor_cgroup.clone();
        crate::blocking::spawn(move || {
            let hierarchies = crate::cgroup::hierarchies();
            for process in processes.into_iter().filter(|p| p.is_alive()) {
                if let Err(e) = crate::cgroup::move_to(&rel, process.pid as u32, &hierarchies) {
                    if process.is_alive() {
                        tracing::warn!(pid = process.pid, cgroup = %rel, error = %e, "cannot move to the monitor cgroup");
                    }
                }
            }
        });
    }
}

/// One scope per helper (`swapcri-helper-<pid>.scope`), as runc makes one per container:
/// systemd collects it when its process exits, and stopping swapcri.service touches none.
async fn adopt_into_scopes(
    systemd: Arc<crate::cgroup::systemd::Systemd>,
    slice: String,
    processes: Vec<crate::model::sandbox::ProcessRef>,
) {
    use crate::cgroup::systemd::Property;
    let slice_dir = crate::model::cgroup_layout::slice_path(&slice).unwrap_or_default();
    let hierarchies = crate::cgroup::hierarchies();
    for process in processes.into_iter().filter(|p| p.is_alive()) {
        let current = crate::cgroup::cgroup_of(process.pid, &hierarchies).unwrap_or_default();
        if current.starts_with(&format!("{slice_dir}/")) {
            continue; // adopted before a restart
        }
        let unit = format!("swapcri-helper-{}.scope", process.pid);
        let properties = [
            Property::Slice(slice.clone()),
            Property::Pids(vec![process.pid as u32]),
            Property::Description(format!("swapcri monitor or namespace holder {}", process.pid)),
            Property::CollectInactiveOrFailed,
        ];
        match systemd.start_transient(&unit, &properties).await {
            Err(e) if !e.unit_exists() && process.is_alive() => {
                tracing::warn!(pid = process.pid, %unit, error = %e, "cannot move to a scope of its own")
            }
            _ => {}
        }
    }
}
