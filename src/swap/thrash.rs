//! Thrash detection (policy::thrash) for every running container, driven by the kernel: a
//! PSI trigger on each container's `memory.pressure` wakes the watcher when the container
//! stalls on memory for `pressured_some_percent` of a second. From then on the container's
//! totals are read once a second until it is normal again and no trigger has fired for a
//! window and a recovery period. A calm node costs one descriptor per container and no reads.
//! Each change of state is logged and kept on the board; the guard acts on it.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::task::{AbortHandle, JoinSet};

use crate::config::GuardMode;
use crate::model::ids::ContainerId;
use crate::policy::guard::victim;
use crate::policy::thrash::{Change, Detector, Reading, ThrashState, Thresholds};

use super::board::{GuardReport, ThrashReport};
use super::guard::{self, KillPace, Throttled};
use super::pods::Pods;
use super::supervisor::Supervisor;

/// The PSI trigger's window; the stall that fires it is the pressured share of it.
const TRIGGER_WINDOW_US: u64 = 1_000_000;
const TICK: Duration = Duration::from_secs(1);

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
fn arm(dir: &Path, stall_us: u64) -> std::io::Result<AsyncFd<OwnedFd>> {
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

/// Watches running containers for thrashing for the daemon's life (cgroup v2 with PSI).
pub(super) async fn watch(sup: Arc<Supervisor>, pods: Arc<dyn Pods>) {
    if !sup.cgroup_v2 {
        return;
    }
    // Whatever the settings now, a throttle an earlier run left is put back.
    guard::restore_left_over(&sup, &pods.running()).await;
    if !sup.thrash_config.enabled {
        return;
    }
    if !Path::new("/proc/pressure/memory").exists() {
        tracing::info!("no pressure stall information (PSI) on this kernel: thrash detection is off");
        return;
    }
    sup.thrash.activate();
    tracing::info!(guard = sup.guard_config.action.as_str(), "thrash detection on");
    let thresholds = Thresholds::of(&sup.thrash_config);
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
                let running = pods.running();
                let gone: Vec<ContainerId> = watched.keys().filter(|id| !running.contains_key(*id)).cloned().collect();
                for id in gone {
                    let Some(mut w) = watched.remove(&id) else { continue };
                    w.trigger.abort();
                    if let Some(t) = w.throttle.take() {
                        guard::release(&sup, &id, &w.dir, t).await;
                    }
                }
                sup.thrash.retain(|id| running.contains_key(id));
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
                sample(&sup, pods.as_ref(), &mut watched, clock, hold).await;
                if sup.guard_config.action == GuardMode::Kill {
                    kill_step(&sup, &pods, &watched, &mut pace);
                }
            }
            Some(joined) = triggers.join_next(), if !triggers.is_empty() => {
                let Ok((id, fd)) = joined else { continue };
                let Some(fd) = fd else {
                    // Armed again at the next tick, if the container still runs; a throttle
                    // it held is put back first (the next watch starts afresh).
                    if let Some(Watched { dir, throttle: Some(t), .. }) = watched.remove(&id) {
                        guard::release(&sup, &id, &dir, t).await;
                    }
                    continue;
                };
                let Some(w) = watched.get_mut(&id) else { continue };
                w.sample_until = Some(Instant::now() + hold);
                w.trigger = triggers.spawn(fired(id, fd));
            }
        }
    }
}

/// Reads the containers being sampled and records what changed.
async fn sample(
    sup: &Supervisor,
    pods: &dyn Pods,
    watched: &mut HashMap<ContainerId, Watched>,
    clock: Instant,
    hold: Duration,
) {
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
                log_change(pods, id, &c);
                let since = chrono::Utc::now().timestamp();
                sup.thrash.set(id, ThrashReport { state: c.to, since, figures: c.figures, guard: None });
                on_change(sup, pods, id, w, &c).await;
            }
            None => sup.thrash.update_figures(id, w.detector.figures()),
        }
    }
}

/// Throttles a container that starts thrashing, and puts back what was changed once it
/// is normal again: a throttled container that only eases to pressured is still stalling,
/// and releasing it then would let it thrash again at once.
async fn on_change(sup: &Supervisor, pods: &dyn Pods, id: &ContainerId, w: &mut Watched, c: &Change) {
    match (c.to, w.throttle.take()) {
        (ThrashState::Normal, Some(t)) => guard::release(sup, id, &w.dir, t).await,
        (state, Some(t)) => {
            let detail = format!("{}, throttled for {} s", state.as_str(), t.at.elapsed().as_secs());
            w.throttle = Some(t);
            sup.thrash.set_guard(id, Some(GuardReport { action: "throttled", detail }));
        }
        (ThrashState::Thrashing, None) => {
            let (report, throttle) = guard::engage(sup, pods, id, &w.dir).await;
            w.throttle = throttle;
            sup.thrash.set_guard(id, Some(report));
        }
        (_, None) => {}
    }
}

/// With `kill`: ends, in eviction order, the first of the containers the throttle did not
/// bring back to normal within `kill_after_seconds` (still thrashing, or stalled by it);
/// one at a time.
fn kill_step(
    sup: &Arc<Supervisor>,
    pods: &Arc<dyn Pods>,
    watched: &HashMap<ContainerId, Watched>,
    pace: &mut KillPace,
) {
    let config = &sup.guard_config;
    if !pace.ready(|id| watched.contains_key(id), Duration::from_secs(config.kill_interval_seconds)) {
        return;
    }
    let kill_after = Duration::from_secs(config.kill_after_seconds);
    let due: Vec<_> = watched
        .iter()
        .filter(|(_, w)| w.detector.state() != ThrashState::Normal)
        .filter(|(_, w)| w.throttle.as_ref().is_some_and(|t| t.at.elapsed() >= kill_after))
        .filter_map(|(id, w)| guard::candidate(pods.as_ref(), id, &w.dir, w.detector.figures()))
        .collect();
    let Some(chosen) = victim(&due).cloned() else { return };
    let key = chosen.key.clone();
    let w = &watched[&key];
    let throttled_for = w.throttle.as_ref().map_or(Duration::ZERO, |t| t.at.elapsed());
    let report = GuardReport { action: "killed", detail: format!("after {} s throttled", throttled_for.as_secs()) };
    sup.thrash.set_guard(&key, Some(report));
    pace.killed(key);
    let (state, figures) = (w.detector.state(), w.detector.figures());
    tokio::spawn(guard::kill(sup.clone(), pods.clone(), chosen, state, throttled_for, figures));
}

/// Logs a change of a container's swap state.
fn log_change(pods: &dyn Pods, id: &ContainerId, c: &Change) {
    let f = c.figures;
    let facts = pods.facts(id).unwrap_or_default();
    tracing::info!(
        container = %id,
        pod = %facts.pod,
        name = %facts.name,
        from = c.from.as_str(),
        to = c.to.as_str(),
        memory_some_percent = format!("{:.1}", f.some_percent),
        memory_full_percent = format!("{:.1}", f.full_percent),
        swapins_per_second = format!("{:.0}", f.swapins_per_second),
        "container swap state changed"
    );
}
