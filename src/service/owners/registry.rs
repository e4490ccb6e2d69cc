//! The pod and container records: in memory and on disk, one lock per object, and the
//! directories each object owns. Every RPC finds, refreshes and saves objects through here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::error::Error;
use crate::model::container::{ContainerMeta, ContainerState, ContainerStatus, ExitRecord};
use crate::model::ids::{ContainerId, SandboxId};
use crate::model::sandbox::{SandboxMeta, SandboxStatus};
use crate::store::Records;

use crate::service::owners::events;
use crate::service::owners::events::{Event, EventKind, Events};
use crate::service::owners::objects::{now_nanos, Container, Sandbox};

#[derive(Default)]
pub(in crate::service) struct State {
    pub sandboxes: HashMap<SandboxId, Sandbox>,
    pub containers: HashMap<ContainerId, Container>,
    /// Objects whose records this build cannot read: not listed, left as they are.
    pub quarantined: Vec<QuarantinedRecord>,
}

/// An object kept aside because its record (or its pod's) cannot be read: its processes,
/// mounts and network stay as they are until the operator adopts or releases it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantinedRecord {
    /// "sandbox" or "container".
    pub kind: &'static str,
    pub id: String,
    pub why: String,
}

/// One async lock per sandbox or container id: state changes of one object run in order
/// while other objects proceed.
#[derive(Default)]
pub(in crate::service) struct ObjectLocks(Arc<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

/// A held object lock; the last holder's guard takes the lock out of the map, so names
/// (every pod and container name ever created) do not pile up for the daemon's lifetime.
pub(in crate::service) struct ObjectGuard {
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    key: String,
    map: Arc<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Drop for ObjectGuard {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        // Only the map holds it now: nobody has it or waits for it.
        if map.get(&self.key).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            map.remove(&self.key);
        }
    }
}

impl ObjectLocks {
    pub async fn lock(&self, id: &str) -> ObjectGuard {
        let lock = self.0.lock().unwrap_or_else(|p| p.into_inner()).entry(id.to_string()).or_default().clone();
        ObjectGuard { guard: Some(lock.lock_owned().await), key: id.to_string(), map: self.0.clone() }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn forget(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

/// How many locks the status writes of all containers are spread over.
const STATUS_WRITE_STRIPES: usize = 32;

pub struct Registry {
    sandbox_records: Records,
    container_records: Records,
    state: RwLock<State>,
    locks: ObjectLocks,
    /// One held while a container's status is written (disk, then memory): the exit watch's
    /// read-modify-write and a call's save of one container never interleave. Striped by id,
    /// so that the writes of different containers (each with its fsync) do not wait in line.
    status_writes: [std::sync::Mutex<()>; STATUS_WRITE_STRIPES],
    run_root: PathBuf,
    events: Events,
}

impl Registry {
    /// Opens the record directories under `state_root`; volatile directories go under
    /// `run_root`.
    pub fn open(state_root: &Path, run_root: &Path) -> Result<Self, Error> {
        Ok(Registry {
            sandbox_records: Records::open(&state_root.join("sandboxes"))?,
            container_records: Records::open(&state_root.join("containers"))?,
            state: RwLock::new(State::default()),
            locks: ObjectLocks::default(),
            status_writes: std::array::from_fn(|_| std::sync::Mutex::new(())),
            run_root: run_root.to_path_buf(),
            events: Events::default(),
        })
    }

    /// The sandbox records on disk (recovery loads and sweeps them).
    pub(in crate::service) fn sandbox_records(&self) -> &Records {
        &self.sandbox_records
    }

    /// The container records on disk (recovery; the swap guard keeps its own beside them).
    pub(in crate::service) fn container_records(&self) -> &Records {
        &self.container_records
    }

    /// Holds one object (or name) against concurrent calls until the guard drops.
    pub(in crate::service) async fn lock(&self, id: &str) -> ObjectGuard {
        self.locks.lock(id).await
    }

    /// A subscription to lifecycle events.
    pub(in crate::service) fn subscribe_events(&self) -> tokio::sync::broadcast::Receiver<events::Event> {
        self.events.subscribe()
    }

    /// The lock of `id`'s status writes (shared with the ids of its stripe).
    fn status_write_lock(&self, id: &ContainerId) -> std::sync::MutexGuard<'_, ()> {
        let stripe = id.as_str().bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
        self.status_writes[stripe % STATUS_WRITE_STRIPES].lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(in crate::service) fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(in crate::service) fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Volatile directory of a sandbox (namespaces, shm, pod files).
    pub(in crate::service) fn sandbox_run_dir(&self, id: &SandboxId) -> PathBuf {
        self.run_root.join("sandboxes").join(id.as_str())
    }

    /// Volatile directory of a container (bundle, rootfs mount, monitor files).
    pub(in crate::service) fn container_run_dir(&self, id: &ContainerId) -> PathBuf {
        self.run_root.join("containers").join(id.as_str())
    }

    /// Unix socket paths must stay under 108 bytes: a short directory and half the id.
    pub(in crate::service) fn socket_path(&self, id: &ContainerId, kind: &str) -> PathBuf {
        self.run_root.join("sock").join(format!("{}.{kind}", &id.as_str()[..32]))
    }

    pub(in crate::service) fn exit_file(&self, id: &ContainerId) -> PathBuf {
        self.container_records.dir(id.as_str()).join("exit.json")
    }

    /// Resolves a sandbox id (full or a unique prefix).
    pub(in crate::service) fn find_sandbox(&self, id: &str) -> Result<Sandbox, Error> {
        let state = self.read();
        by_prefix(state.sandboxes.iter().map(|(k, s)| (k.as_str(), s)), id, "pod sandbox")
    }

    /// Resolves a container id (full or a unique prefix) and refreshes its state.
    pub(in crate::service) fn find_container(&self, id: &str) -> Result<Container, Error> {
        let found = self.resolve_container(id)?.meta.id.clone();
        self.refresh(&found).ok_or_else(|| Error::NotFound(format!("container {id:?} not found")))
    }

    /// Resolves a container id (full or a unique prefix) to its record as it is kept (the
    /// exit watch keeps a live one current).
    pub(in crate::service) fn resolve_container(&self, id: &str) -> Result<Container, Error> {
        let state = self.read();
        by_prefix(state.containers.iter().map(|(k, c)| (k.as_str(), c)), id, "container")
    }

    /// Picks up an exit the monitor recorded; a monitor that died without recording one
    /// leaves the container Unknown. Returns the current record.
    pub(in crate::service) fn refresh(&self, id: &ContainerId) -> Option<Container> {
        let current = self.read().containers.get(id)?.clone();
        if !current.status.state.is_live() || self.settled(id, &current.status).is_none() {
            return Some(current);
        }
        // Settled again under the status lock, from the record as it is now: a status saved
        // since the read above (the start's) is built on, never overwritten.
        let _one_writer = self.status_write_lock(id);
        let current = self.read().containers.get(id)?.clone();
        if !current.status.state.is_live() {
            return Some(current);
        }
        let Some(status) = self.settled(id, &current.status) else { return Some(current) };
        match crate::blocking::run(|| self.container_records.write_status(id.as_str(), &status)) {
            // Removed meanwhile (by a call holding its lock): nothing to update.
            Err(crate::store::StoreError::Write { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return self.read().containers.get(id).cloned();
            }
            Err(e) => tracing::error!(container = %id, error = %e, "cannot persist container status"),
            Ok(()) => {}
        }
        let updated = {
            let mut state = self.write();
            let entry = state.containers.get_mut(id)?;
            entry.status = status;
            entry.clone()
        };
        self.emit(EventKind::Stopped, id.as_str(), &updated.meta.sandbox_id);
        Some(updated)
    }

    /// The status a live container has once its exit is picked up; None while it runs.
    fn settled(&self, id: &ContainerId, live: &ContainerStatus) -> Option<ContainerStatus> {
        let mut status = live.clone();
        // Liveness first: a monitor records the exit before it ends, so one found gone
        // before the read below without a record really lost it.
        let monitor_gone = status.monitor.is_some_and(|m| !m.is_alive());
        match crate::blocking::run(|| read_exit(&self.exit_file(id))) {
            Some(exit) => {
                status.state = ContainerState::Exited;
                status.exit_code = exit.exit_code;
                // The monitor's clock reading; never before the start (a clock step back).
                status.finished_at = exit.finished_at.max(status.started_at);
                status.reason = exit.reason().to_string();
                status.pid = None;
                if let Some((reason, message)) =
                    crate::blocking::run(|| crate::swap::verdict(&self.container_records, id))
                {
                    status.reason = reason;
                    status.message = message;
                }
            }
            None if monitor_gone => {
                status.state = ContainerState::Unknown;
                status.reason = "MonitorLost".into();
                status.message = "the container's monitor exited without recording an exit".into();
            }
            None => return None,
        }
        Some(status)
    }

    /// Sends an event with the pod's current records, when anyone listens.
    fn emit(&self, kind: EventKind, id: &str, sandbox_id: &SandboxId) {
        if !self.events.wanted() {
            return;
        }
        let (sandbox, containers) = {
            let state = self.read();
            let sandbox = state.sandboxes.get(sandbox_id).cloned();
            let containers = state.containers.values().filter(|c| &c.meta.sandbox_id == sandbox_id).cloned().collect();
            (sandbox, containers)
        };
        self.events.send(Event { kind, id: id.to_string(), created_at: now_nanos(), sandbox, containers });
    }

    pub(in crate::service) fn save_container_status(
        &self,
        id: &ContainerId,
        status: ContainerStatus,
    ) -> Result<(), Error> {
        let _one_writer = self.status_write_lock(id);
        // A live status from a copy read before the exit was picked up (a start's, an
        // update's): the exit stays, settled on top of what the save brings.
        let settled_before = self.read().containers.get(id).is_some_and(|c| !c.status.state.is_live());
        let status =
            if settled_before && status.state.is_live() { self.settled(id, &status).unwrap_or(status) } else { status };
        crate::blocking::run(|| self.container_records.write_status(id.as_str(), &status))?;
        let new = status.state;
        let replaced = self.write().containers.get_mut(id).map(|c| {
            let old = std::mem::replace(&mut c.status, status).state;
            (old, c.meta.sandbox_id.clone())
        });
        let Some((old, sandbox_id)) = replaced else { return Ok(()) };
        if new == ContainerState::Running && old != ContainerState::Running {
            self.emit(EventKind::Started, id.as_str(), &sandbox_id);
        } else if old.is_live() && !new.is_live() {
            self.emit(EventKind::Stopped, id.as_str(), &sandbox_id);
        }
        Ok(())
    }

    pub(in crate::service) fn save_sandbox_status(&self, id: &SandboxId, status: SandboxStatus) -> Result<(), Error> {
        crate::blocking::run(|| self.sandbox_records.write_status(id.as_str(), &status))?;
        let new = status.state;
        let old = self.write().sandboxes.get_mut(id).map(|s| std::mem::replace(&mut s.status, status).state);
        if old.is_some_and(|old| old != new) && new == crate::model::sandbox::SandboxState::NotReady {
            self.emit(EventKind::Stopped, id.as_str(), id);
        }
        Ok(())
    }

    /// Containers of a sandbox.
    pub(in crate::service) fn containers_of(&self, sandbox: &SandboxId) -> Vec<ContainerId> {
        self.read().containers.values().filter(|c| &c.meta.sandbox_id == sandbox).map(|c| c.meta.id.clone()).collect()
    }

    /// The records of a sandbox's containers, as they are kept (the exit watch keeps live
    /// ones current).
    pub(in crate::service) fn containers_in(&self, sandbox: &SandboxId) -> Vec<Container> {
        self.read().containers.values().filter(|c| &c.meta.sandbox_id == sandbox).cloned().collect()
    }

    /// Records a new sandbox on disk, then lists it; nothing is left when the write fails.
    pub(in crate::service) fn add_sandbox(&self, meta: SandboxMeta, status: SandboxStatus) -> Result<(), Error> {
        let id = meta.id.clone();
        crate::blocking::run(|| {
            let written = self
                .sandbox_records
                .write_meta(id.as_str(), &meta)
                .and_then(|()| self.sandbox_records.write_status(id.as_str(), &status));
            if written.is_err() {
                let _ = self.sandbox_records.remove(id.as_str());
            }
            written
        })?;
        self.write().sandboxes.insert(id.clone(), Sandbox { meta: Arc::new(meta), status });
        // A sandbox is ready as soon as it is recorded.
        self.emit(EventKind::Created, id.as_str(), &id);
        self.emit(EventKind::Started, id.as_str(), &id);
        Ok(())
    }

    /// Records a new container on disk, then lists it.
    pub(in crate::service) fn add_container(&self, meta: ContainerMeta, status: ContainerStatus) -> Result<(), Error> {
        crate::blocking::run(|| {
            self.container_records.write_meta(meta.id.as_str(), &meta)?;
            self.container_records.write_status(meta.id.as_str(), &status)
        })?;
        let (id, sandbox_id) = (meta.id.clone(), meta.sandbox_id.clone());
        self.write().containers.insert(id.clone(), Container { meta: Arc::new(meta), status });
        self.emit(EventKind::Created, id.as_str(), &sandbox_id);
        Ok(())
    }

    /// Forgets a sandbox: its record, its entry and its lock.
    pub(in crate::service) fn remove_sandbox(&self, id: &SandboxId) -> Result<(), Error> {
        // The event carries the pod's last record.
        self.emit(EventKind::Deleted, id.as_str(), id);
        crate::blocking::run(|| self.sandbox_records.remove(id.as_str()))?;
        self.write().sandboxes.remove(id);
        self.locks.forget(id.as_str());
        Ok(())
    }

    /// Forgets a container: its record (with its writable layer), its entry and its lock.
    pub(in crate::service) fn remove_container(&self, id: &ContainerId) -> Result<(), Error> {
        crate::blocking::run(|| self.container_records.remove(id.as_str()))?;
        let removed = self.write().containers.remove(id);
        if let Some(c) = removed {
            self.emit(EventKind::Deleted, id.as_str(), &c.meta.sandbox_id);
        }
        self.locks.forget(id.as_str());
        Ok(())
    }

    /// The persistent directory of a container (its writable layer lives there).
    pub(in crate::service) fn container_state_dir(&self, id: &ContainerId) -> PathBuf {
        self.container_records.dir(id.as_str())
    }

    /// The memory reservations (memory.min, memory.low) of the live containers of the pods
    /// swapcri owns, by pod.
    pub(in crate::service) fn owned_pod_reservations(&self) -> Vec<(SandboxId, (u64, u64))> {
        let state = self.read();
        state
            .containers
            .values()
            .filter(|c| c.status.state.is_live())
            .filter(|c| state.sandboxes.get(&c.meta.sandbox_id).is_some_and(|s| s.meta.owns_cgroup_parent))
            .filter_map(|c| Some((c.meta.sandbox_id.clone(), c.status.memory_plan.as_ref()?.reserved())))
            .collect()
    }

    /// Containers that use an image, as their root filesystem or as an image volume
    /// (RemoveImage refuses while there are any).
    pub fn containers_using(&self, image: &crate::model::image::ImageId) -> Vec<String> {
        let id = image.to_string();
        let as_volume =
            |c: &Container| c.meta.config.mounts.iter().any(|m| m.image.as_ref().is_some_and(|i| i.image_ref == id));
        self.read()
            .containers
            .values()
            .filter(|c| &c.meta.image_id == image || as_volume(c))
            .map(|c| c.meta.id.to_string())
            .collect()
    }
}

/// The one record whose id starts with `id` (a full id or a unique prefix).
fn by_prefix<'a, T: Clone + 'a>(
    records: impl Iterator<Item = (&'a str, &'a T)>,
    id: &str,
    kind: &str,
) -> Result<T, Error> {
    let mut matches = records.filter(|(k, _)| k.starts_with(id) && !id.is_empty());
    match (matches.next(), matches.next()) {
        (Some((_, record)), None) => Ok(record.clone()),
        (Some(_), Some(_)) => Err(Error::InvalidArgument(format!("{kind} id prefix {id:?} is ambiguous"))),
        _ => Err(Error::NotFound(format!("{kind} {id:?} not found"))),
    }
}

fn read_exit(path: &std::path::Path) -> Option<ExitRecord> {
    std::fs::read(path).ok().and_then(|b| serde_json::from_slice(&b).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn object_locks_serialize_and_leave_nothing_behind() {
        let locks = Arc::new(ObjectLocks::default());
        for n in 0..100 {
            drop(locks.lock(&format!("sandbox-name/pod-{n}")).await);
        }
        assert_eq!(locks.len(), 0, "released names are forgotten");

        let held = locks.lock("a").await;
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move { drop(locks.lock("a").await) })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second holder waits for the first");
        drop(held);
        assert_eq!(locks.len(), 1, "kept while someone waits for it");
        waiter.await.unwrap();
        assert_eq!(locks.len(), 0);
    }
}
