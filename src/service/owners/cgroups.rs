//! cgroup reads for the pod service: statistics of a cgroup with CPU rates from the previous
//! reading, where a process's cgroup is, and the kill of every process in one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::cgroup::detail::{read_detail, DetailDirs};
use crate::cgroup::kill::{self, KillError};
use crate::cgroup::stats::{read_stats, CgroupDirs};
use crate::cgroup::Hierarchy;
use crate::model::cgroup_stats::CgroupStats;
use crate::model::cgroup_stats::Detail;

use crate::service::owners::samples::Sample;

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

    /// SIGKILL to every process of the cgroup `rel` and the groups below it, from the
    /// daemon: `cgroup.kill` on v2, freeze, kill and thaw in the freezer hierarchy on v1.
    /// Unsupported when neither can (the caller asks the runtime) or, on v1, when the group
    /// listed no process (a runtime that put its freezer group elsewhere).
    pub fn kill_all(&self, rel: &str) -> Result<(), KillError> {
        if let Some(dir) = self.unified_dir(rel) {
            return kill::kill_v2(&dir);
        }
        let dir = crate::cgroup::v1_dir(&self.hierarchies, "freezer", rel)
            .ok_or_else(|| KillError::Unsupported("no freezer hierarchy".into()))?;
        match kill::kill_v1(&dir)? {
            0 => Err(KillError::Unsupported(format!("no process in {}", dir.display()))),
            _ => Ok(()),
        }
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
