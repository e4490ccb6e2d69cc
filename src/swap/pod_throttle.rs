//! The pod's part of a throttle. The io controller weighs a container's `io.weight` only
//! against the other containers of its pod; the pod's group is what competes with the other
//! pods for the disk. So a throttle also lowers the pod's `io.weight`: the first throttled
//! container of a pod lowers it, the last one released puts it back.
//!
//! Each throttled container keeps a copy of what was written to the pod (`guard-pod.json`)
//! beside its records until it is released. A daemon that restarts puts every copy back,
//! whether its container still runs or not (a pod outlives its containers); of several
//! copies for one pod the first puts the pod back and the others find the file no longer
//! holds what the guard wrote.

use std::path::{Path, PathBuf};

use crate::cgroup::control;
use crate::model::cgroup_files::IO_WEIGHT;
use crate::model::ids::ContainerId;
use crate::policy::guard::{self, Current, PodWrites, ThrottleTargets};
use crate::store::{Beside, StoreError};

use super::knob::{restore, set_knob};
use super::supervisor::Supervisor;

/// What was written to the pod (`PodWrites`), beside each throttled container's records.
pub(super) const RECORD: &str = "guard-pod.json";
const VERSION: u32 = 1;

/// The pod's group of a container's group: its parent, where that is named as kubelet names
/// a pod's group (`pod<uid>`, or `…-pod<uid>.slice` under systemd: a group that holds other
/// pods too is left alone) and has an `io.weight`.
fn pod_dir(container_dir: &Path) -> Option<PathBuf> {
    let parent = container_dir.parent()?;
    let name = parent.file_name()?.to_str()?;
    let pod = name.starts_with("pod") || (name.ends_with(".slice") && name.contains("-pod"));
    (pod && parent.join(IO_WEIGHT).exists()).then(|| parent.to_path_buf())
}

/// The container is throttled: its pod is too, unless another container of the pod already
/// holds the pod's throttle. What the pod holds now, as written.
pub(super) async fn engage(sup: &Supervisor, id: &ContainerId, container_dir: &Path) -> Option<PodWrites> {
    let dir = crate::blocking::run(|| pod_dir(container_dir))?;
    let mut held = sup.pod_throttles.lock().await;
    if let Some((holders, writes)) = held.get_mut(&dir) {
        let copy = writes.clone();
        if let Err(e) = record(sup, id, &copy) {
            tracing::warn!(container = %id, error = %e, "swap guard cannot record its pod's throttle");
            return None;
        }
        holders.push(id.clone());
        return Some(copy);
    }
    let targets = ThrottleTargets::of(&sup.guard_config);
    let current =
        Current { io_weight: crate::blocking::run(|| control::read_knob(&dir, IO_WEIGHT)), ..Default::default() };
    let planned = PodWrites { dir: dir.clone(), writes: guard::throttle(&current, targets, &[]) };
    if planned.writes.is_empty() {
        return None;
    }
    // Recorded first: a daemon that dies between the two still knows what to put back.
    if let Err(e) = record(sup, id, &planned) {
        tracing::warn!(container = %id, error = %e, "swap guard cannot record its pod's throttle: not throttling the pod");
        return None;
    }
    let mut done = PodWrites { dir: dir.clone(), writes: Vec::new() };
    for w in planned.writes {
        match set_knob(sup, &dir, &w.file, &w.written).await {
            Ok(()) => done.writes.push(w),
            Err(e) => tracing::warn!(pod = %dir.display(), file = %w.file, error = %e, "swap guard could not write"),
        }
    }
    if done.writes.is_empty() {
        let _ = crate::blocking::run(|| sup.records.remove_beside(id.as_str(), RECORD));
        return None;
    }
    let _ = record(sup, id, &done);
    held.insert(dir, (vec![id.clone()], done.clone()));
    Some(done)
}

fn record(sup: &Supervisor, id: &ContainerId, writes: &PodWrites) -> Result<(), StoreError> {
    crate::blocking::run(|| sup.records.write_beside(id.as_str(), RECORD, VERSION, writes))
}

/// The container's throttle ended: its copy goes, and the pod is put back if no other
/// container of it is throttled. The files put back.
pub(super) async fn release(sup: &Supervisor, id: &ContainerId, pod: &PodWrites) -> Vec<String> {
    let mut held = sup.pod_throttles.lock().await;
    let mut restored = Vec::new();
    if let Some((holders, writes)) = held.get_mut(&pod.dir) {
        holders.retain(|h| h != id);
        if holders.is_empty() {
            restored = restore(sup, &writes.dir, &writes.writes).await;
            held.remove(&pod.dir);
        }
    }
    let _ = crate::blocking::run(|| sup.records.remove_beside(id.as_str(), RECORD));
    restored
}

/// Puts back the pods' throttles an earlier daemon left, every container's copy.
pub(super) async fn restore_left_over(sup: &Supervisor) {
    for id in crate::blocking::run(|| sup.records.ids_with_beside(RECORD)) {
        let record = crate::blocking::run(|| sup.records.read_beside::<PodWrites>(&id, RECORD));
        match record {
            Ok(Beside::Read(pod)) => {
                let restored = restore(sup, &pod.dir, &pod.writes).await;
                if !restored.is_empty() {
                    tracing::info!(container = %id, pod = %pod.dir.display(), restored = restored.join(", "), "swap guard put back a pod's throttle left by an earlier run");
                }
            }
            Ok(Beside::Absent) => {}
            Ok(Beside::SetAside(aside, why)) => {
                tracing::warn!(container = %id, aside = %aside.display(), why = %why, "unreadable swap guard record set aside")
            }
            Err(e) => tracing::warn!(container = %id, error = %e, "cannot read a swap guard record"),
        }
        let _ = crate::blocking::run(|| sup.records.remove_beside(&id, RECORD));
    }
}
