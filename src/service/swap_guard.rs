//! The swap guard (policy::guard), driven by the thrash watcher: when a container starts
//! thrashing it is throttled (`[guard] action = "throttle"` or `"kill"`), when the thrash
//! is over what was changed is put back, and with `kill` a container the throttle did not
//! bring back to normal within `kill_after_seconds` is ended, one at a time, with the reason
//! `SwapThrashing`. What a throttle changed is recorded beside the container's records
//! before it is written, so a daemon that restarts puts it back.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cgroup::files;
use crate::config::GuardMode;
use crate::model::ids::ContainerId;
use crate::policy::guard::{self, Candidate, Current, Write};
use crate::policy::thrash::{Figures, ThrashState};

use super::PodService;

/// The reason a container the guard ended reports in its status.
pub const REASON: &str = "SwapThrashing";
const THROTTLE_RECORD: &str = "guard.json";
const VERDICT_RECORD: &str = "guard-kill.json";
/// How long a kill that did not end its victim waits before the guard tries again.
const KILL_RETRY: Duration = Duration::from_secs(30);

/// What the guard did about a container, for verbose status and `swapcri top`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardReport {
    /// observe, exempt, throttled or killed.
    pub action: &'static str,
    pub detail: String,
}

/// How many times the guard acted, for the metrics.
#[derive(Default)]
pub struct GuardCounts {
    pub throttles: AtomicU64,
    pub restores: AtomicU64,
    pub kills: AtomicU64,
}

/// A throttle in force on one container.
#[derive(Debug, Clone)]
pub struct Throttled {
    pub at: Instant,
    pub writes: Vec<Write>,
}

/// Why the guard ended a container, kept until its exit is recorded.
#[derive(Debug, Serialize, Deserialize)]
struct Verdict {
    message: String,
}

/// The status reason and message of a container whose exit the guard caused, if it did.
pub(super) fn verdict(records: &Path) -> Option<(String, String)> {
    let bytes = std::fs::read(records.join(VERDICT_RECORD)).ok()?;
    let v: Verdict = serde_json::from_slice(&bytes).ok()?;
    Some((REASON.to_string(), v.message))
}

fn read_current(dir: &Path) -> Current {
    Current {
        swap_current: files::number(dir, "memory.swap.current"),
        swap_high: files::read(dir, "memory.swap.high"),
        io_weight: files::read(dir, "io.weight"),
        cpu_weight: files::read(dir, "cpu.weight"),
    }
}

/// Puts back what the guard wrote, where the files still hold it; the files that were.
fn restore(dir: &Path, writes: &[Write]) -> Vec<String> {
    let mut restored = Vec::new();
    for w in writes {
        let Some(now) = files::read(dir, &w.file) else { continue };
        if !guard::still_ours(w, &now) {
            continue;
        }
        match std::fs::write(dir.join(&w.file), &w.before) {
            Ok(()) => restored.push(format!("{}={}", w.file, w.before)),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), file = %w.file, error = %e, "swap guard could not put back a value")
            }
        }
    }
    restored
}

fn describe(writes: &[Write]) -> String {
    writes.iter().map(|w| format!("{}: {} -> {}", w.file, w.before, w.written)).collect::<Vec<_>>().join(", ")
}

impl PodService {
    fn guard_records(&self, id: &ContainerId) -> PathBuf {
        self.registry.container_records.dir(id.as_str())
    }

    /// Puts back the throttles an earlier daemon left on running containers.
    pub(super) fn guard_restore_left_over(&self, running: &std::collections::HashMap<ContainerId, PathBuf>) {
        crate::blocking::run(|| self.restore_left_over(running))
    }

    fn restore_left_over(&self, running: &std::collections::HashMap<ContainerId, PathBuf>) {
        for (id, dir) in running {
            let record = self.guard_records(id).join(THROTTLE_RECORD);
            let Ok(bytes) = std::fs::read(&record) else { continue };
            let Ok(writes) = serde_json::from_slice::<Vec<Write>>(&bytes) else {
                // Another version's or a torn record: set aside for the operator, not obeyed.
                let aside = record.with_extension("json.unreadable");
                tracing::warn!(container = %id, aside = %aside.display(), "unreadable swap guard record set aside");
                let _ = std::fs::rename(&record, &aside);
                continue;
            };
            let restored = restore(dir, &writes);
            tracing::info!(container = %id, restored = restored.join(", "), "swap guard put back a throttle left by an earlier run");
            let _ = std::fs::remove_file(&record);
        }
    }

    /// The container started thrashing: throttle it, unless the guard only observes or the
    /// container is exempt. Returns the throttle now in force.
    pub(super) fn guard_engage(&self, id: &ContainerId, dir: &Path) -> (GuardReport, Option<Throttled>) {
        let mode = self.config.guard.action;
        if mode == GuardMode::Observe {
            return (GuardReport { action: "observe", detail: "[guard] action = observe".into() }, None);
        }
        let plan = self.registry.find_container(id.as_str()).ok().and_then(|c| c.status.memory_plan);
        if let Some(why) = guard::exemption(plan.as_ref()) {
            tracing::info!(container = %id, why = %why, "swap guard leaves a thrashing container alone");
            return (GuardReport { action: "exempt", detail: why }, None);
        }
        let done = match crate::blocking::run(|| self.throttle(id, dir)) {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "swap guard cannot record a throttle: not throttling");
                return (GuardReport { action: "observe", detail: format!("cannot record a throttle: {e}") }, None);
            }
        };
        let detail = describe(&done);
        self.thrash.counts.throttles.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(container = %id, mode = mode.as_str(), writes = %detail, "swap guard throttled a thrashing container");
        (GuardReport { action: "throttled", detail }, Some(Throttled { at: Instant::now(), writes: done }))
    }

    /// Records, then writes, the throttle's values; the writes that took.
    fn throttle(&self, id: &ContainerId, dir: &Path) -> Result<Vec<Write>, crate::store::StoreError> {
        let writes = guard::throttle(&read_current(dir), guard::ThrottleTargets::of(&self.config.guard));
        // Recorded first: a daemon that dies between the two still knows what to put back.
        let record = serde_json::to_vec(&writes).unwrap_or_default();
        crate::store::replace_atomic(&self.guard_records(id).join(THROTTLE_RECORD), &record)?;
        let mut done = Vec::new();
        for w in writes {
            match std::fs::write(dir.join(&w.file), &w.written) {
                Ok(()) => done.push(w),
                Err(e) => tracing::warn!(container = %id, file = %w.file, error = %e, "swap guard could not write"),
            }
        }
        Ok(done)
    }

    /// The thrash ended (or the container stopped): put back what the throttle changed.
    pub(super) fn guard_release(&self, id: &ContainerId, dir: &Path, throttle: Throttled) {
        let restored = crate::blocking::run(|| {
            let restored = restore(dir, &throttle.writes);
            let _ = std::fs::remove_file(self.guard_records(id).join(THROTTLE_RECORD));
            restored
        });
        self.thrash.counts.restores.fetch_add(1, Ordering::Relaxed);
        let held_s = throttle.at.elapsed().as_secs();
        tracing::info!(container = %id, restored = restored.join(", "), held_s, "swap guard put back a throttle");
    }

    /// A thrasher the guard may end: its priority and memory beyond its request.
    pub(super) fn guard_candidate(
        &self,
        id: &ContainerId,
        dir: &Path,
        figures: Figures,
    ) -> Option<Candidate<ContainerId>> {
        let container = self.registry.find_container(id.as_str()).ok()?;
        let plan = container.status.memory_plan.as_ref();
        if guard::exemption(plan).is_some() {
            return None;
        }
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str()).ok()?;
        let annotations = sandbox.meta.config.annotations.get(guard::PRIORITY_ANNOTATION).map(String::as_str);
        let number = |f| files::number(dir, f).unwrap_or(0);
        let used = crate::blocking::run(|| number("memory.current") + number("memory.swap.current"));
        let request = plan.and_then(|p| p.request).map_or(0, |r| r.low);
        Some(Candidate {
            key: id.clone(),
            priority: guard::priority(annotations),
            beyond_request: used.saturating_sub(request),
            swapins_per_second: figures.swapins_per_second,
        })
    }

    /// Ends the container for thrashing on: its status then says why.
    pub(super) async fn guard_kill(
        self: Arc<Self>,
        victim: Candidate<ContainerId>,
        state: ThrashState,
        throttled_for: Duration,
        figures: Figures,
    ) {
        let id = victim.key.clone();
        let message = format!(
            "ended by the swap guard: still {} {} s after its throttle (memory some {:.1}%, full {:.1}%, {:.0} swap-ins/s; priority {}, {} beyond its request)",
            state.as_str(),
            throttled_for.as_secs(),
            figures.some_percent,
            figures.full_percent,
            figures.swapins_per_second,
            victim.priority,
            crate::doctor::human(victim.beyond_request),
        );
        let record = serde_json::to_vec(&Verdict { message: message.clone() }).unwrap_or_default();
        let verdict = self.guard_records(&id).join(VERDICT_RECORD);
        if let Err(e) = crate::blocking::run(|| crate::store::replace_atomic(&verdict, &record)) {
            tracing::warn!(container = %id, error = %e, "swap guard cannot record why it ends a container: not ending it");
            return;
        }
        tracing::warn!(container = %id, message = %message, "swap guard ends a thrashing container");
        match self.stop_container(id.as_str(), Duration::ZERO).await {
            Ok(()) => {
                self.thrash.counts.kills.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "swap guard could not end a container");
                // Whatever ends it later is not the guard.
                let _ = crate::blocking::run(|| std::fs::remove_file(&verdict));
            }
        }
    }
}

/// The kill step's memory between ticks: the last victim, so that one ends at a time.
#[derive(Default)]
pub struct KillPace {
    last: Option<(ContainerId, Instant)>,
}

impl KillPace {
    /// Whether another victim may be chosen: the last one no longer runs and the interval
    /// since its kill has passed (or a kill that failed is a retry interval old).
    pub fn ready(&self, running: impl Fn(&ContainerId) -> bool, interval: Duration) -> bool {
        self.last.as_ref().is_none_or(|(id, at)| {
            at.elapsed() >= interval && (!running(id) || at.elapsed() >= interval.max(KILL_RETRY))
        })
    }

    pub fn killed(&mut self, id: ContainerId) {
        self.last = Some((id, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_victim_at_a_time() {
        let mut pace = KillPace::default();
        let victim = ContainerId::generate();
        assert!(pace.ready(|_| true, Duration::ZERO), "nobody ended yet");
        pace.killed(victim.clone());
        assert!(!pace.ready(|id| id == &victim, Duration::ZERO), "the last victim still runs");
        assert!(pace.ready(|_| false, Duration::ZERO), "it has exited");
        assert!(!pace.ready(|_| false, Duration::from_secs(60)), "the interval has not passed");
        // A kill that did not take is tried again after the retry interval.
        pace.last = Some((victim.clone(), Instant::now() - KILL_RETRY));
        assert!(pace.ready(|id| id == &victim, Duration::ZERO));
    }
}
