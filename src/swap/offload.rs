//! Cold-memory offload (`[offload]`, policy::offload): every `interval_seconds` each
//! eligible running container (Burstable, not critical, with a LimitedSwap share, not
//! pressured or thrashing) is looked at once and, while its own memory pressure and
//! refaults allow, has a step of its memory reclaimed through `memory.reclaim`. The
//! reclaim runs on a blocking thread, one container at a time, so the daemon's workers
//! never wait on it and the node never sees two at once. After each look the accessed bits
//! of the container's pages are cleared, so the next one learns what was touched between
//! the two (the working set the offload must leave alone).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cgroup::control;
use crate::model::ids::ContainerId;
use crate::model::memory::QosClass;
use crate::policy::offload::{self, Offloader, Sample, Settings, Step, Untouched};
use crate::policy::thrash::ThrashState;
use crate::process_tree;

use super::board::Counters;
use super::pods::Pods;
use super::supervisor::Supervisor;

/// The most processes a container may have for its accessed pages to be counted; past it
/// the offload leaves the container alone.
const MAX_PROCESSES: usize = 1024;

/// When a container's accessed bits were last cleared, and the CPU time its group had used
/// then.
#[derive(Debug, Clone, Copy)]
struct Span {
    started: Instant,
    cpu_us: Option<u64>,
}

/// What the accessed bits of a span said: bytes touched and CPU time used over it.
#[derive(Debug, Clone, Copy)]
struct Touched {
    bytes: u64,
    ran_us: Option<u64>,
}

/// A look at the group's files, and at the accessed pages of `processes` over `span`, with
/// its age (None when they are not counted: a span too short, too many processes); None when
/// the group has no swap share (NoSwap, or unlimited).
fn sample(
    dir: &Path,
    at_ms: u64,
    processes: Option<&[i32]>,
    span: Option<(Span, Duration)>,
) -> Option<(Sample, Option<Touched>)> {
    let f = control::offload_figures(dir)?;
    // A process whose figure cannot be read counts as unknown, not as having touched nothing:
    // the look then takes nothing.
    let touched = processes.zip(span).and_then(|(pids, (span, _))| {
        let bytes = pids.iter().map(|pid| process_tree::referenced(*pid)).sum::<Option<u64>>()?;
        let ran_us = control::cpu_usage_us(dir).zip(span.cpu_us).map(|(now, then)| now.saturating_sub(then));
        Some(Touched { bytes, ran_us })
    });
    let idle_anon = touched.zip(span).map_or(Untouched::Unknown, |(t, (_, age))| {
        offload::untouched(f.anon, t.bytes, t.ran_us, age.as_micros() as u64)
    });
    let sample = Sample {
        at_ms,
        some_us: f.some_us,
        refaults: f.refaults,
        memory_current: f.memory_current,
        swap_current: f.swap_current,
        swap_max: Some(f.swap_max),
        idle_anon,
    };
    Some((sample, touched))
}

/// Starts the next span of accessed bits.
fn clear_accessed(dir: &Path, pids: &[i32]) -> Span {
    for pid in pids {
        process_tree::clear_referenced(*pid);
    }
    Span { started: Instant::now(), cpu_us: control::cpu_usage_us(dir) }
}

/// Offloads cold memory for the daemon's life (opt-in; cgroup v2 with PSI).
pub(super) async fn run(sup: Arc<Supervisor>, pods: Arc<dyn Pods>) {
    let config = &sup.offload_config;
    if !config.enabled || !sup.cgroup_v2 {
        return;
    }
    if !Path::new("/proc/pressure/memory").exists() {
        tracing::warn!("[offload] is enabled but the kernel has no pressure stall information (PSI): offload is off");
        return;
    }
    let settings = Settings::of(config);
    tracing::info!(interval_s = config.interval_seconds, "cold-memory offload on");
    let clock = Instant::now();
    let mut offloaders: HashMap<ContainerId, Offloader> = HashMap::new();
    // When each container's accessed bits were last cleared: a span much shorter than the
    // interval (a look hurried after one a slow reclaim delayed) would take pages touched
    // less often than that for idle ones, so it is not read, and runs on to the next look.
    let mut cleared: HashMap<ContainerId, Span> = HashMap::new();
    let interval = Duration::from_secs(config.interval_seconds);
    let shortest_span = interval * 4 / 5;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let eligible = eligible(&sup, pods.as_ref());
        offloaders.retain(|id, _| eligible.contains_key(id));
        cleared.retain(|id, _| eligible.contains_key(id));
        sup.offload.retain(|id| eligible.contains_key(id));
        // The same order at every look, so that each container's span is one interval.
        let mut eligible: Vec<(ContainerId, PathBuf)> = eligible.into_iter().collect();
        eligible.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        for (id, dir) in eligible {
            let at_ms = clock.elapsed().as_millis() as u64;
            let span = cleared.get(&id).map(|s| (*s, s.started.elapsed()));
            let span_ms = span.map(|(_, age)| age.as_millis() as u64);
            let complete = span.filter(|(_, age)| *age >= shortest_span);
            // Read once a look: the same processes are counted, then cleared.
            let (pids, s) = crate::blocking::run(|| {
                let pids = control::processes(&dir, MAX_PROCESSES);
                let s = sample(&dir, at_ms, pids.as_deref(), complete);
                (pids, s)
            });
            let Some((s, touched)) = s else { continue };
            let o = offloaders.entry(id.clone()).or_insert_with(|| Offloader::new(settings));
            let step = o.look(s);
            tracing::debug!(container = %id, idle_anon = ?s.idle_anon, touched = ?touched.map(|t| t.bytes),
                ran_us = ?touched.and_then(|t| t.ran_us), span_ms = ?span_ms, step = ?step, "offload look");
            if let Step::Reclaim { bytes } = step {
                Counters::add(&sup.counters.offload_requested, bytes);
                let d = dir.clone();
                match crate::blocking::spawn(move || control::reclaim(&d, bytes)).await {
                    Ok(Ok(())) => tracing::debug!(container = %id, bytes, "offloaded cold memory"),
                    Ok(Err(e)) => tracing::debug!(container = %id, error = %e, "memory.reclaim refused"),
                    Err(e) => tracing::warn!(container = %id, error = %e, "offload task failed"),
                }
            }
            if complete.is_some() || span.is_none() {
                let next = crate::blocking::run(|| clear_accessed(&dir, pids.as_deref().unwrap_or_default()));
                cleared.insert(id.clone(), next);
            }
            sup.offload.set(&id, o);
        }
    }
}

/// Running Burstable, non-critical containers thrash detection finds calm.
fn eligible(sup: &Supervisor, pods: &dyn Pods) -> HashMap<ContainerId, PathBuf> {
    let mut running = pods.running();
    running.retain(|id, _| {
        let calm = sup.thrash_state(id).is_none_or(|r| r.state == ThrashState::Normal);
        let burstable = pods
            .facts(id)
            .and_then(|f| f.plan)
            .is_some_and(|p| p.qos_class == QosClass::Burstable && p.critical.is_none());
        calm && burstable
    });
    running
}
