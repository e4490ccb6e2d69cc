//! Thrash detection (policy::thrash) for every running container, driven by the kernel: a
//! PSI trigger on each container's `memory.pressure` wakes the watcher when the container
//! stalls on memory for `pressured_some_percent` of a second. From then on the container's
//! totals are read once a second until it is normal again and no trigger has fired for a
//! window and a recovery period. A calm node costs one descriptor per container and no reads.
//! Each change of state is logged and kept on the board, where verbose status and the
//! metrics read it.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::task::{AbortHandle, JoinSet};

use crate::config::GuardMode;
use crate::model::container::ContainerState;
use crate::model::ids::ContainerId;
use crate::policy::guard;
use crate::policy::thrash::{Change, Detector, Figures, Reading, ThrashState};

use super::swap_guard::{GuardReport, KillPace, Throttled};
use super::PodService;

/// The PSI trigger's window; the stall that fires it is the pressured share of it.
const TRIGGER_WINDOW_US: u64 = 1_000_000;
const TICK: Duration = Duration::from_secs(1);

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

/// What the watcher found, per container; containers never seen pressed are not on it.
#[derive(Default)]
pub struct ThrashBoard {
    /// Whether the watcher runs (cgroup v2 with PSI, and enabled).
    active: std::sync::atomic::AtomicBool,
    reports: Mutex<HashMap<ContainerId, ThrashReport>>,
    /// The swap guard's actions so far.
    pub(super) counts: super::swap_guard::GuardCounts,
}

impl ThrashBoard {
    pub fn active(&self) -> bool {
        self.active.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The container's state where detection runs: normal until it was seen otherwise.
    pub fn state_of(&self, id: &ContainerId) -> Option<ThrashReport> {
        self.active().then(|| self.report(id).unwrap_or_default())
    }

    fn report(&self, id: &ContainerId) -> Option<ThrashReport> {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    pub fn is_thrashing(&self, id: &ContainerId) -> bool {
        self.report(id).is_some_and(|r| r.state == ThrashState::Thrashing)
    }

    fn set(&self, id: &ContainerId, report: ThrashReport) {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), report);
    }

    fn update_figures(&self, id: &ContainerId, figures: Figures) {
        if let Some(r) = self.reports.lock().unwrap_or_else(|p| p.into_inner()).get_mut(id) {
            r.figures = figures;
        }
    }

    fn set_guard(&self, id: &ContainerId, guard: Option<GuardReport>) {
        if let Some(r) = self.reports.lock().unwrap_or_else(|p| p.into_inner()).get_mut(id) {
            r.guard = guard;
        }
    }

    fn retain(&self, keep: impl Fn(&ContainerId) -> bool) {
        self.reports.lock().unwrap_or_else(|p| p.into_inner()).retain(|id, _| keep(id));
    }
}

/// One watched container.
struct Watched {
    dir: PathBuf,
    detector: Detector,
    /// Read every tick until then (extended by each trigger and while not normal).
    sample_until: Option<Instant>,
    trigger: AbortHandle,
    /// The swap guard's throttle, while in force.
    throttle: Option<Throttled>,
}

/// A trigger that fired, with its descriptor to wait on again (None: it failed).
type Fired = (ContainerId, Option<AsyncFd<OwnedFd>>);

/// A trigger on the group in `dir` for `stall_us` of memory stall per second, registered
/// with the runtime's poller.
fn arm(dir: &std::path::Path, stall_us: u64) -> std::io::Result<AsyncFd<OwnedFd>> {
    let fd = crate::blocking::run(|| crate::cgroup::pressure::memory_trigger(dir, stall_us, TRIGGER_WINDOW_US))?;
    // SAFETY: the AsyncFd owns the OwnedFd, which stays open until it is dropped.
    unsafe { AsyncFd::register_with_interest(fd, Interest::PRIORITY) }.map_err(std::io::Error::from)
}

/// Waits for the trigger to fire.
async fn fired(id: ContainerId, fd: AsyncFd<OwnedFd>) -> Fired {
    let ok = match fd.ready(Interest::PRIORITY).await {
        Ok(mut guard) => {
            guard.clear_ready();
            true
        }
        Err(_) => false,
    };
    (id, ok.then_some(fd))
}

impl PodService {
    /// Watches running containers for thrashing for the daemon's life (cgroup v2 with PSI).
    pub async fn watch_thrashing(self: Arc<Self>) {
        let config = &self.config.thrash;
        if !self.node.cgroup_v2() {
            return;
        }
        // Whatever the settings now, a throttle an earlier run left is put back.
        self.guard_restore_left_over(&self.running_cgroups());
        if !config.enabled {
            return;
        }
        if !std::path::Path::new("/proc/pressure/memory").exists() {
            tracing::info!("no pressure stall information (PSI) on this kernel: thrash detection is off");
            return;
        }
        self.thrash.active.store(true, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(guard = self.config.guard.action.as_str(), "thrash detection on");
        let thresholds = crate::policy::thrash::Thresholds::of(config);
        let stall_us = (thresholds.pressured_some_percent / 100.0 * TRIGGER_WINDOW_US as f64) as u64;
        let hold = Duration::from_millis(thresholds.window_ms + thresholds.recover_ms);
        let clock = Instant::now();
        let mut watched: HashMap<ContainerId, Watched> = HashMap::new();
        let mut pace = KillPace::default();
        let mut triggers: JoinSet<Fired> = JoinSet::new();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let running = self.running_cgroups();
                    watched.retain(|id, w| {
                        let keep = running.contains_key(id);
                        if !keep {
                            w.trigger.abort();
                            if let Some(t) = w.throttle.take() {
                                self.guard_release(id, &w.dir, t);
                            }
                        }
                        keep
                    });
                    self.thrash.retain(|id| running.contains_key(id));
                    for (id, dir) in running {
                        if watched.contains_key(&id) {
                            continue;
                        }
                        match arm(&dir, stall_us) {
                            Ok(fd) => {
                                let trigger = triggers.spawn(fired(id.clone(), fd));
                                let detector = Detector::new(thresholds);
                                watched.insert(id, Watched { dir, detector, sample_until: None, trigger, throttle: None });
                            }
                            Err(e) => tracing::debug!(container = %id, error = %e, "no memory pressure trigger"),
                        }
                    }
                    self.sample(&mut watched, clock, hold);
                    if self.config.guard.action == GuardMode::Kill {
                        self.clone().guard_kill_step(&watched, &mut pace);
                    }
                }
                Some(joined) = triggers.join_next(), if !triggers.is_empty() => {
                    let Ok((id, fd)) = joined else { continue };
                    let Some(fd) = fd else {
                        // Armed again at the next tick, if the container still runs.
                        watched.remove(&id);
                        continue;
                    };
                    let Some(w) = watched.get_mut(&id) else { continue };
                    w.sample_until = Some(Instant::now() + hold);
                    w.trigger = triggers.spawn(fired(id, fd));
                }
            }
        }
    }

    /// Running containers and their cgroup directories, from the records in memory (exits
    /// are picked up by the exit watcher; nothing is read here).
    pub(super) fn running_cgroups(&self) -> HashMap<ContainerId, PathBuf> {
        let running: Vec<_> = self
            .registry
            .read()
            .containers
            .values()
            .filter(|c| c.status.state == ContainerState::Running)
            .cloned()
            .collect();
        let mut out = HashMap::new();
        for c in running {
            let Ok(sandbox) = self.registry.find_sandbox(c.meta.sandbox_id.as_str()) else { continue };
            if let Some(dir) = self.cgroups.unified_dir(&c.cgroup(&sandbox)) {
                out.insert(c.meta.id.clone(), dir);
            }
        }
        out
    }

    /// Reads the containers being sampled and records what changed.
    fn sample(&self, watched: &mut HashMap<ContainerId, Watched>, clock: Instant, hold: Duration) {
        let now = Instant::now();
        for (id, w) in watched.iter_mut() {
            let Some(until) = w.sample_until else { continue };
            if now > until && w.detector.state() == ThrashState::Normal {
                w.sample_until = None;
                continue;
            }
            let Some((some_us, full_us, anon_refaults)) =
                crate::blocking::run(|| crate::cgroup::pressure::memory_totals(&w.dir))
            else {
                continue;
            };
            let at_ms = now.duration_since(clock).as_millis() as u64;
            let change = w.detector.observe(Reading { at_ms, some_us, full_us, anon_refaults });
            if w.detector.state() != ThrashState::Normal {
                w.sample_until = Some(now + hold);
            }
            match change {
                Some(c) => {
                    self.log_change(id, &c);
                    let since = chrono::Utc::now().timestamp();
                    self.thrash.set(id, ThrashReport { state: c.to, since, figures: c.figures, guard: None });
                    self.guard_on_change(id, w, &c);
                }
                None => self.thrash.update_figures(id, w.detector.figures()),
            }
        }
    }

    /// Throttles a container that starts thrashing, and puts back what was changed once it
    /// is normal again: a throttled container that only eases to pressured is still stalling,
    /// and releasing it then would let it thrash again at once.
    fn guard_on_change(&self, id: &ContainerId, w: &mut Watched, c: &Change) {
        match (c.to, w.throttle.take()) {
            (ThrashState::Normal, Some(t)) => self.guard_release(id, &w.dir, t),
            (state, Some(t)) => {
                let detail = format!("{}, throttled for {} s", state.as_str(), t.at.elapsed().as_secs());
                w.throttle = Some(t);
                self.thrash.set_guard(id, Some(GuardReport { action: "throttled", detail }));
            }
            (ThrashState::Thrashing, None) => {
                let (report, throttle) = self.guard_engage(id, &w.dir);
                w.throttle = throttle;
                self.thrash.set_guard(id, Some(report));
            }
            (_, None) => {}
        }
    }

    /// With `kill`: ends, in eviction order, the first of the containers the throttle did not
    /// bring back to normal within `kill_after_seconds` (still thrashing, or stalled by it);
    /// one at a time.
    fn guard_kill_step(self: Arc<Self>, watched: &HashMap<ContainerId, Watched>, pace: &mut KillPace) {
        let config = &self.config.guard;
        if !pace.ready(|id| watched.contains_key(id), Duration::from_secs(config.kill_interval_seconds)) {
            return;
        }
        let kill_after = Duration::from_secs(config.kill_after_seconds);
        let due: Vec<_> = watched
            .iter()
            .filter(|(_, w)| w.detector.state() != ThrashState::Normal)
            .filter(|(_, w)| w.throttle.as_ref().is_some_and(|t| t.at.elapsed() >= kill_after))
            .filter_map(|(id, w)| self.guard_candidate(id, &w.dir, w.detector.figures()))
            .collect();
        let Some(victim) = guard::victim(&due).cloned() else { return };
        let key = victim.key.clone();
        let w = &watched[&key];
        let throttled_for = w.throttle.as_ref().map_or(Duration::ZERO, |t| t.at.elapsed());
        let report = GuardReport { action: "killed", detail: format!("after {} s throttled", throttled_for.as_secs()) };
        self.thrash.set_guard(&key, Some(report));
        pace.killed(key);
        tokio::spawn(self.clone().guard_kill(victim, w.detector.state(), throttled_for, w.detector.figures()));
    }

    /// Logs a change of a container's swap state.
    fn log_change(&self, id: &ContainerId, c: &Change) {
        let f = c.figures;
        let (pod, container) = self.names_of(id);
        tracing::info!(
            container = %id,
            pod = %pod,
            name = %container,
            from = c.from.as_str(),
            to = c.to.as_str(),
            memory_some_percent = format!("{:.1}", f.some_percent),
            memory_full_percent = format!("{:.1}", f.full_percent),
            swapins_per_second = format!("{:.0}", f.swapins_per_second),
            "container swap state changed"
        );
    }

    /// The pod (namespace/name) and container name, for the log.
    fn names_of(&self, id: &ContainerId) -> (String, String) {
        let Ok(c) = self.registry.find_container(id.as_str()) else { return Default::default() };
        let name = c.meta.config.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default();
        let pod = self
            .registry
            .find_sandbox(c.meta.sandbox_id.as_str())
            .ok()
            .and_then(|s| s.meta.config.metadata.clone())
            .map(|m| format!("{}/{}", m.namespace, m.name))
            .unwrap_or_default();
        (pod, name)
    }
}
