//! Cold-memory offload (`[offload]`, policy::offload): every `interval_seconds` each
//! eligible running container (Burstable, not critical, with a LimitedSwap share, not
//! pressured or thrashing) is looked at once and, while its own memory pressure and
//! refaults allow, has a step of its memory reclaimed through `memory.reclaim`. The
//! reclaim runs on a blocking thread, one container at a time, so the daemon's workers
//! never wait on it and the node never sees two at once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cgroup::files;
use crate::model::ids::ContainerId;
use crate::model::memory::QosClass;
use crate::policy::offload::{Offloader, Sample, Step};
use crate::policy::thrash::ThrashState;

use super::PodService;

/// Each offloaded container's figures, for verbose status.
#[derive(Default)]
pub struct OffloadBoard {
    reports: Mutex<HashMap<ContainerId, Offloader>>,
    /// Bytes asked of `memory.reclaim` in all, for the metrics.
    pub requested: std::sync::atomic::AtomicU64,
}

impl OffloadBoard {
    pub fn report(&self, id: &ContainerId) -> Option<Offloader> {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    fn set(&self, id: &ContainerId, o: &Offloader) {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), o.clone());
    }

    fn retain(&self, keep: impl Fn(&ContainerId) -> bool) {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).retain(|id, _| keep(id));
    }
}

/// A look at the group's files; None when it has no swap share (NoSwap, or unlimited).
fn sample(dir: &Path, at_ms: u64) -> Option<Sample> {
    let swap_max = files::number(dir, "memory.swap.max").filter(|m| *m > 0)?;
    let some_us = crate::cgroup::pressure::parse(&files::read(dir, "memory.pressure")?)?.some.total_ns / 1000;
    let stat = files::read(dir, "memory.stat")?;
    let refaults = files::keyed(&stat, "workingset_refault_anon")? + files::keyed(&stat, "workingset_refault_file")?;
    Some(Sample {
        at_ms,
        some_us,
        refaults,
        memory_current: files::number(dir, "memory.current")?,
        swap_current: files::number(dir, "memory.swap.current")?,
        swap_max: Some(swap_max),
    })
}

/// Asks the kernel to reclaim `bytes` from the group. EAGAIN (less could be taken) is not
/// an error: the next look sees what moved.
fn reclaim(dir: &Path, bytes: u64) -> std::io::Result<()> {
    match std::fs::write(dir.join("memory.reclaim"), bytes.to_string()) {
        Err(e) if e.raw_os_error() == Some(nix::libc::EAGAIN) => Ok(()),
        other => other,
    }
}

impl PodService {
    /// Offloads cold memory for the daemon's life (opt-in; cgroup v2 with PSI).
    pub async fn offload_cold_memory(self: Arc<Self>) {
        let config = &self.config.offload;
        if !config.enabled || !self.node.cgroup_v2() {
            return;
        }
        if !Path::new("/proc/pressure/memory").exists() {
            tracing::warn!(
                "[offload] is enabled but the kernel has no pressure stall information (PSI): offload is off"
            );
            return;
        }
        let settings = crate::policy::offload::Settings::of(config);
        tracing::info!(interval_s = config.interval_seconds, "cold-memory offload on");
        let clock = Instant::now();
        let mut offloaders: HashMap<ContainerId, Offloader> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_secs(config.interval_seconds));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let eligible = self.offload_eligible();
            offloaders.retain(|id, _| eligible.contains_key(id));
            self.offload.retain(|id| eligible.contains_key(id));
            for (id, dir) in eligible {
                let at_ms = clock.elapsed().as_millis() as u64;
                let Some(s) = crate::blocking::run(|| sample(&dir, at_ms)) else { continue };
                let o = offloaders.entry(id.clone()).or_insert_with(|| Offloader::new(settings));
                if let Step::Reclaim { bytes } = o.look(s) {
                    self.offload.requested.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
                    let d = dir.clone();
                    let done = crate::blocking::spawn(move || reclaim(&d, bytes)).await;
                    match done {
                        Ok(Ok(())) => tracing::debug!(container = %id, bytes, "offloaded cold memory"),
                        Ok(Err(e)) => tracing::debug!(container = %id, error = %e, "memory.reclaim refused"),
                        Err(e) => tracing::warn!(container = %id, error = %e, "offload task failed"),
                    }
                }
                self.offload.set(&id, o);
            }
        }
    }

    /// Running Burstable, non-critical containers the thrash watcher finds calm.
    fn offload_eligible(&self) -> HashMap<ContainerId, PathBuf> {
        let mut running = self.running_cgroups();
        running.retain(|id, _| {
            let calm = self.thrash.state_of(id).is_none_or(|r| r.state == ThrashState::Normal);
            let burstable = self
                .registry
                .find_container(id.as_str())
                .ok()
                .and_then(|c| c.status.memory_plan)
                .is_some_and(|p| p.qos_class == QosClass::Burstable && p.critical.is_none());
            calm && burstable
        });
        running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_needs_a_swap_share() {
        let dir = tempfile::tempdir().unwrap();
        let write = |f: &str, v: &str| std::fs::write(dir.path().join(f), v).unwrap();
        write(
            "memory.pressure",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=7000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
        );
        write("memory.stat", "anon 1\nworkingset_refault_anon 3\nworkingset_refault_file 4\n");
        write("memory.current", "104857600\n");
        write("memory.swap.current", "0\n");
        for (swap_max, eligible) in [("268435456\n", true), ("0\n", false), ("max\n", false)] {
            write("memory.swap.max", swap_max);
            assert_eq!(sample(dir.path(), 9).is_some(), eligible, "{swap_max}");
        }
        write("memory.swap.max", "268435456\n");
        let s = sample(dir.path(), 9).unwrap();
        assert_eq!((s.some_us, s.refaults, s.memory_current, s.swap_max), (7000, 7, 100 << 20, Some(256 << 20)));
        // memory.reclaim on a plain file takes the write; a missing group is an error.
        write("memory.reclaim", "");
        assert!(reclaim(dir.path(), 4096).is_ok());
        assert!(reclaim(&dir.path().join("gone"), 4096).is_err());
    }
}
