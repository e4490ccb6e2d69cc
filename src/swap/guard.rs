//! The swap guard (policy::guard), driven by thrash detection: when a container starts
//! thrashing it is throttled (`[guard] action = "throttle"` or `"kill"`), when the thrash
//! is over what was changed is put back, and with `kill` a container the throttle did not
//! bring back to normal within `kill_after_seconds` is ended, one at a time, with the reason
//! `SwapThrashing`. What a throttle changed is recorded beside the container's records
//! before it is written, so a daemon that restarts puts it back; why the guard ended a
//! container is recorded there before it is ended, so its status can say so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cgroup::control;
use crate::config::GuardMode;
use crate::model::ids::ContainerId;
use crate::policy::guard::{self, Candidate, PodWrites, ThrottleTargets, Write};
use crate::policy::thrash::{Figures, ThrashState};
use crate::store::{Beside, Records, StoreError};

use super::board::{Counters, GuardReport};
use super::knob::{restore, set_knob};
use super::pod_throttle;
use super::pods::Pods;
use super::supervisor::Supervisor;

/// The reason a container the guard ended reports in its status.
pub const REASON: &str = "SwapThrashing";
/// The throttle in force (`Vec<Write>`), beside the container's records.
const THROTTLE_RECORD: &str = "guard.json";
/// Why the guard ended the container (`Verdict`), kept until its exit is recorded.
const VERDICT_RECORD: &str = "guard-kill.json";
const VERSION: u32 = 1;
/// How long a kill that did not end its victim waits before the guard tries again.
const KILL_RETRY: Duration = Duration::from_secs(30);

/// A throttle in force on one container.
#[derive(Debug, Clone)]
pub struct Throttled {
    pub at: Instant,
    pub writes: Vec<Write>,
    /// What the pod's group holds while this container keeps the pod throttled.
    pub pod: Option<PodWrites>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Verdict {
    message: String,
}

/// The status reason and message of a container whose exit the guard caused, if it did.
pub fn verdict(records: &Records, id: &ContainerId) -> Option<(String, String)> {
    match records.read_beside::<Verdict>(id.as_str(), VERDICT_RECORD) {
        Ok(Beside::Read(v)) => Some((REASON.to_string(), v.message)),
        Ok(Beside::SetAside(aside, why)) => {
            tracing::warn!(container = %id, aside = %aside.display(), why = %why, "unreadable swap guard verdict set aside");
            None
        }
        Ok(Beside::Absent) => None,
        Err(e) => {
            tracing::warn!(container = %id, error = %e, "cannot read the swap guard's verdict");
            None
        }
    }
}

fn describe(writes: &[Write]) -> String {
    writes.iter().map(|w| format!("{}: {} -> {}", w.file, w.before, w.written)).collect::<Vec<_>>().join(", ")
}

/// Puts back the throttles an earlier daemon left on running containers.
pub(crate) async fn restore_left_over(sup: &Supervisor, running: &HashMap<ContainerId, PathBuf>) {
    pod_throttle::restore_left_over(sup).await;
    for (id, dir) in running {
        let record = crate::blocking::run(|| sup.records.read_beside::<Vec<Write>>(id.as_str(), THROTTLE_RECORD));
        let writes = match record {
            Ok(Beside::Read(writes)) => writes,
            Ok(Beside::Absent) => continue,
            Ok(Beside::SetAside(aside, why)) => {
                // Another version's or a torn record: kept for the operator, not obeyed.
                tracing::warn!(container = %id, aside = %aside.display(), why = %why, "unreadable swap guard record set aside");
                continue;
            }
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "cannot read a swap guard record");
                continue;
            }
        };
        let restored = restore(sup, dir, &writes).await;
        tracing::info!(container = %id, restored = restored.join(", "), "swap guard put back a throttle left by an earlier run");
        let _ = crate::blocking::run(|| sup.records.remove_beside(id.as_str(), THROTTLE_RECORD));
    }
}

/// The container started thrashing: throttle it, unless the guard only observes or the
/// container is exempt. Returns the throttle now in force.
pub(crate) async fn engage(
    sup: &Supervisor,
    pods: &dyn Pods,
    id: &ContainerId,
    dir: &Path,
) -> (GuardReport, Option<Throttled>) {
    let mode = sup.guard_config.action;
    if mode == GuardMode::Observe {
        return (GuardReport { action: "observe", detail: "[guard] action = observe".into() }, None);
    }
    let plan = pods.facts(id).and_then(|f| f.plan);
    if let Some(why) = guard::exemption(plan.as_ref()) {
        tracing::info!(container = %id, why = %why, "swap guard leaves a thrashing container alone");
        return (GuardReport { action: "exempt", detail: why }, None);
    }
    let done = match throttle(sup, id, dir).await {
        Ok(done) => done,
        Err(e) => {
            tracing::warn!(container = %id, error = %e, "swap guard cannot record a throttle: not throttling");
            return (GuardReport { action: "observe", detail: format!("cannot record a throttle: {e}") }, None);
        }
    };
    let pod = pod_throttle::engage(sup, id, dir).await;
    let mut detail = describe(&done);
    if let Some(pod) = &pod {
        detail = format!("{detail}; pod {}", describe(&pod.writes));
    }
    Counters::add(&sup.counters.throttles, 1);
    tracing::warn!(container = %id, mode = mode.as_str(), writes = %detail, "swap guard throttled a thrashing container");
    (GuardReport { action: "throttled", detail }, Some(Throttled { at: Instant::now(), writes: done, pod }))
}

/// Records, then writes, the throttle's values; the writes that took.
async fn throttle(sup: &Supervisor, id: &ContainerId, dir: &Path) -> Result<Vec<Write>, StoreError> {
    let targets = ThrottleTargets::of(&sup.guard_config);
    let writes = crate::blocking::run(|| -> Result<_, StoreError> {
        let disks = crate::node::block::swap_disks(&crate::node::block::Roots::host());
        let writes = guard::throttle(&control::knobs(dir), targets, &disks);
        // Recorded first: a daemon that dies between the two still knows what to put back.
        sup.records.write_beside(id.as_str(), THROTTLE_RECORD, VERSION, &writes)?;
        Ok(writes)
    })?;
    let mut done = Vec::new();
    for w in writes {
        match set_knob(sup, dir, &w.file, &w.written).await {
            Ok(()) => done.push(w),
            Err(e) => tracing::warn!(container = %id, file = %w.file, error = %e, "swap guard could not write"),
        }
    }
    Ok(done)
}

/// The thrash ended (or the container stopped): put back what the throttle changed.
pub(crate) async fn release(sup: &Supervisor, id: &ContainerId, dir: &Path, throttle: Throttled) {
    let mut restored = restore(sup, dir, &throttle.writes).await;
    let _ = crate::blocking::run(|| sup.records.remove_beside(id.as_str(), THROTTLE_RECORD));
    if let Some(pod) = &throttle.pod {
        restored.extend(pod_throttle::release(sup, id, pod).await.into_iter().map(|r| format!("pod {r}")));
    }
    Counters::add(&sup.counters.restores, 1);
    let held_s = throttle.at.elapsed().as_secs();
    tracing::info!(container = %id, restored = restored.join(", "), held_s, "swap guard put back a throttle");
}

/// A thrasher the guard may end: its priority and memory beyond its request.
pub(super) fn candidate(
    pods: &dyn Pods,
    id: &ContainerId,
    dir: &Path,
    figures: Figures,
) -> Option<Candidate<ContainerId>> {
    let facts = pods.facts(id)?;
    let plan = facts.plan.as_ref();
    if guard::exemption(plan).is_some() {
        return None;
    }
    let used = crate::blocking::run(|| control::memory_and_swap(dir));
    let request = plan.and_then(|p| p.request).map_or(0, |r| r.low);
    Some(Candidate {
        key: id.clone(),
        priority: guard::priority(facts.priority.as_deref()),
        beyond_request: used.saturating_sub(request),
        swapins_per_second: figures.swapins_per_second,
    })
}

/// Ends the container for thrashing on: its status then says why.
pub(crate) async fn kill(
    sup: Arc<Supervisor>,
    pods: Arc<dyn Pods>,
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
        crate::model::bytes::human(victim.beyond_request),
    );
    let verdict = Verdict { message: message.clone() };
    if let Err(e) = crate::blocking::run(|| sup.records.write_beside(id.as_str(), VERDICT_RECORD, VERSION, &verdict)) {
        tracing::warn!(container = %id, error = %e, "swap guard cannot record why it ends a container: not ending it");
        return;
    }
    tracing::warn!(container = %id, message = %message, "swap guard ends a thrashing container");
    match pods.kill(&id).await {
        Ok(()) => Counters::add(&sup.counters.kills, 1),
        Err(e) => {
            tracing::warn!(container = %id, error = %e, "swap guard could not end a container");
            // Whatever ends it later is not the guard.
            let _ = crate::blocking::run(|| sup.records.remove_beside(id.as_str(), VERDICT_RECORD));
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
