//! cgroup reads for the pod service: statistics of a cgroup with CPU rates from the previous
//! reading, and where a process's cgroup is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::cgroup::detail::{read_detail, Detail, DetailDirs};
use crate::cgroup::stats::{read_stats, CgroupDirs, CgroupStats};
use crate::cgroup::Hierarchy;

use super::stats::Sample;

/// The last CPU reading per cgroup, for usage_nano_cores.
#[derive(Debug, Default)]
struct CpuSamples(Mutex<HashMap<String, (i64, u64)>>);

impl CpuSamples {
    /// Records a reading; returns the rate since the previous one, in nanocores.
    fn rate(&self, key: &str, at: i64, usage_ns: u64) -> Option<u64> {
        let mut samples = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let previous = samples.insert(key.to_string(), (at, usage_ns));
        let (then, before) = previous?;
        let elapsed = at.checked_sub(then).filter(|e| *e > 0)? as u128;
        Some((usage_ns.checked_sub(before)? as u128 * 1_000_000_000 / elapsed) as u64)
    }

    fn forget(&self, key: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

pub struct Cgroups {
    hierarchies: Vec<Hierarchy>,
    /// The cgroup v2 root, on a cgroup v2 node.
    unified_root: Option<PathBuf>,
    cpu: CpuSamples,
}

impl Cgroups {
    pub fn new(cgroup_root: &Path, cgroup_v2: bool) -> Self {
        Cgroups {
            hierarchies: crate::cgroup::hierarchies(),
            unified_root: cgroup_v2.then(|| cgroup_root.to_path_buf()),
            cpu: CpuSamples::default(),
        }
    }

    /// The directory of cgroup `rel` on a cgroup v2 node.
    pub fn unified_dir(&self, rel: &str) -> Option<PathBuf> {
        self.unified_root.as_ref().map(|root| root.join(rel.trim_start_matches('/')))
    }

    /// The statistics of the cgroup `rel` (relative to the cgroup root).
    pub fn stats(&self, rel: &str) -> CgroupStats {
        CgroupDirs::locate(rel, self.unified_root.as_deref(), &self.hierarchies)
            .map(|d| read_stats(&d))
            .unwrap_or_default()
    }

    /// The detailed figures of the cgroup `rel` (CRI metrics).
    pub fn detail(&self, rel: &str) -> Detail {
        DetailDirs::locate(rel, self.unified_root.as_deref(), &self.hierarchies)
            .map(|d| read_detail(&d))
            .unwrap_or_default()
    }

    /// Processes in the cgroup `rel` itself.
    pub fn processes(&self, rel: &str) -> Option<u64> {
        DetailDirs::locate(rel, self.unified_root.as_deref(), &self.hierarchies)
            .and_then(|d| crate::cgroup::detail::process_count(&d))
    }

    /// A reading of `rel` with its CPU rate since the last reading under `key`.
    pub fn sample(&self, rel: &str, key: &str, timestamp: i64) -> Sample {
        let stats = self.stats(rel);
        let nano_cores = stats.cpu_usage_ns.and_then(|ns| self.cpu.rate(key, timestamp, ns));
        Sample { timestamp, stats, nano_cores }
    }

    /// Drops the CPU reading kept under `key` (the container is gone or stopped).
    pub fn forget(&self, key: &str) {
        self.cpu.forget(key);
    }

    /// Removes a cgroup swapcri created (`rel` relative to the root) in every hierarchy.
    pub fn remove(&self, rel: &str) -> std::io::Result<()> {
        crate::cgroup::remove(rel, &self.hierarchies)
    }

    /// The cgroup of `pid`, relative to the cgroup root.
    pub fn cgroup_of(&self, pid: i32) -> Option<String> {
        crate::cgroup::cgroup_of(pid, &self.hierarchies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_rate_from_consecutive_samples() {
        let samples = CpuSamples::default();
        assert_eq!(samples.rate("c", 1_000_000_000, 5_000_000_000), None, "first sample has no rate");
        // 0.5 s of CPU over 1 s: half a core.
        assert_eq!(samples.rate("c", 2_000_000_000, 5_500_000_000), Some(500_000_000));
        assert_eq!(samples.rate("c", 2_000_000_000, 5_600_000_000), None, "no time passed");
        assert_eq!(samples.rate("c", 3_000_000_000, 1), None, "counter reset");
        samples.forget("c");
        assert_eq!(samples.rate("c", 4_000_000_000, 2), None);
    }
}

impl super::PodService {
    /// Moves monitors and PID-namespace holders apart from the daemon's own cgroup, in the
    /// background: into `runtime.monitor_cgroup` (cgroupfs), or each into a transient scope
    /// of its own in `runtime.monitor_slice` (systemd, which owns the tree there). A cgroup
    /// move can wait for an RCU grace period (tens of milliseconds on cgroup v1), which no RPC
    /// should wait for. A process that is gone meanwhile needs no move.
    pub(super) fn adopt_into_monitor_cgroup(&self, processes: Vec<crate::model::sandbox::ProcessRef>) {
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
