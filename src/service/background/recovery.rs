//! Start-up reconciliation of the records on disk with what is running.

use std::path::Path;

use crate::error::Error;
use crate::model::container::{ContainerMeta, ContainerStatus};
use crate::model::ids::ContainerId;
use crate::model::sandbox::{SandboxMeta, SandboxState, SandboxStatus};
use crate::sandbox;

use crate::service::owners::objects::{Container, Sandbox};
use crate::service::owners::registry::QuarantinedRecord;
use crate::service::pod_service::PodService;
use crate::service::steps::image_volumes::unmount_container;

/// statfs magic of the nsfs filesystem (a pinned namespace file).
const NSFS_MAGIC: i64 = 0x6e73_6673;

impl PodService {
    /// Releases the networks of pods that no longer exist (or whose creation a crash cut
    /// short after CNI ADD). Runs after `recover`, before the socket opens.
    pub async fn recover_network(&self) {
        let state = self.registry.read();
        let quarantined = state.quarantined.iter().filter(|q| q.kind == "sandbox").map(|q| q.id.clone());
        let known: std::collections::HashSet<String> =
            state.sandboxes.keys().map(|id| id.to_string()).chain(quarantined).collect();
        drop(state);
        let released = self.network.recover(|id| known.contains(id)).await;
        if !released.is_empty() {
            tracing::info!(count = released.len(), "released networks no pod accounts for");
        }
    }

    /// Moves the live monitors and PID-namespace holders into the monitor cgroup again: a
    /// crash right after one started may have left it in the daemon's.
    pub fn adopt_survivors(&self) {
        let state = self.registry.read();
        let holders = state.sandboxes.values().filter_map(|s| s.status.holder);
        let monitors = state.containers.values().filter_map(|c| c.status.monitor);
        let survivors = holders.chain(monitors).collect();
        drop(state);
        self.adopt_into_monitor_cgroup(survivors);
    }

    /// Loads every sandbox and container, picks up exits that happened while the daemon was
    /// away, marks pods whose namespaces are gone NotReady, and cleans what a crash during
    /// creation left. Runs before the socket opens, off the async workers (it reads every
    /// record and removes what it cleans).
    pub fn recover(&self) -> Result<(), Error> {
        crate::blocking::run(|| self.recover_records())
    }

    fn recover_records(&self) -> Result<(), Error> {
        let sandboxes = self.registry.sandbox_records().load::<SandboxMeta, SandboxStatus>()?;
        let mut quarantined = Vec::new();
        for (id, why) in sandboxes.quarantined {
            tracing::error!(sandbox = %id, %why, "unreadable sandbox record kept aside as {id}.corrupt: the pod and its containers are left as they are and not listed; `swapcri quarantine` adopts or releases it");
            quarantined.push(QuarantinedRecord { kind: "sandbox", id, why });
        }
        let released_pods = sandboxes.released;
        for id in &sandboxes.incomplete {
            tracing::info!(sandbox = %id, "cleaning up a sandbox whose creation did not finish");
            cleanup_sandbox_dir(&self.config.run_root.join("sandboxes").join(id));
            self.registry.sandbox_records().remove(id)?;
        }
        for (meta, status) in sandboxes.complete {
            let status = self.settle_sandbox(&meta, status)?;
            self.registry
                .write()
                .sandboxes
                .insert(meta.id.clone(), Sandbox { meta: std::sync::Arc::new(meta), status });
        }

        let containers = self.registry.container_records().load::<ContainerMeta, ContainerStatus>()?;
        for (id, why) in containers.quarantined {
            tracing::error!(container = %id, %why, "unreadable container record kept aside as {id}.corrupt: the container is left as it is and not listed; `swapcri quarantine` adopts or releases it");
            quarantined.push(QuarantinedRecord { kind: "container", id, why });
        }
        for id in &containers.released {
            tracing::info!(container = %id, "stopping and removing a quarantined container, as the operator asked");
            self.discard_container(id);
            self.registry.container_records().forget_released(id)?;
        }
        for id in &containers.incomplete {
            tracing::info!(container = %id, "cleaning up a container whose creation did not finish");
            self.discard_container(id);
            self.registry.container_records().remove(id)?;
        }
        let mut ids = Vec::new();
        for (meta, status) in containers.complete {
            let pod = meta.sandbox_id.as_str();
            if released_pods.iter().any(|p| p == pod) {
                // The operator released its pod: it goes with it.
                self.discard_container(meta.id.as_str());
                self.registry.container_records().remove(meta.id.as_str())?;
            } else if quarantined.iter().any(|q| q.kind == "sandbox" && q.id == pod) {
                // Left with its pod; listed again once the pod is adopted.
                let why = format!("its pod's record ({pod}) is quarantined");
                quarantined.push(QuarantinedRecord { kind: "container", id: meta.id.to_string(), why });
            } else {
                ids.push(meta.id.clone());
                if !meta.log_path.is_empty() {
                    // Logs an earlier version left readable by every user.
                    let _ = crate::store::private::restrict(Path::new(&meta.log_path), crate::store::private::LOG);
                }
                let container = Container { meta: std::sync::Arc::new(meta), status };
                self.registry.write().containers.insert(container.meta.id.clone(), container);
            }
        }
        self.registry.write().quarantined = quarantined;
        // After their containers, so that the pod cgroup is empty when it is removed.
        for id in &released_pods {
            tracing::info!(sandbox = %id, "releasing what a quarantined pod held, as the operator asked");
            self.discard_sandbox(id);
            self.registry.sandbox_records().forget_released(id)?;
        }
        for id in &ids {
            self.registry.refresh(id);
        }
        self.sweep_runtime_orphans();
        self.sweep_orphan_dirs();
        crate::service::steps::criu::sweep_stages(&self.config.state_root);
        let state = self.registry.read();
        tracing::info!(
            sandboxes = state.sandboxes.len(),
            containers = state.containers.len(),
            quarantined = state.quarantined.len(),
            "state recovered"
        );
        Ok(())
    }

    /// A ready pod whose pinned namespaces or PID-namespace holder are gone is NotReady.
    fn settle_sandbox(&self, meta: &SandboxMeta, mut status: SandboxStatus) -> Result<SandboxStatus, Error> {
        if status.state != SandboxState::Ready {
            return Ok(status);
        }
        let request = self.ns_request(&meta.id, &meta.config);
        let pinned = [&request.net, &request.ipc, &request.uts].into_iter().flatten().all(|p| is_nsfs(p));
        let holder_ok = !request.pid_holder || status.holder.is_some_and(|h| h.is_alive());
        if pinned && holder_ok {
            return Ok(status);
        }
        let reason = if pinned {
            "the pod's PID namespace holder exited while swapcri was not running"
        } else {
            "the pod's pinned namespaces were gone when swapcri started"
        };
        tracing::warn!(sandbox = %meta.id, "{reason}; the sandbox is not ready");
        sandbox::release(&request, status.holder.filter(|h| h.is_alive()));
        status.state = SandboxState::NotReady;
        status.holder = None;
        status.reason = Some(reason.to_string());
        self.registry.sandbox_records().write_status(meta.id.as_str(), &status)?;
        Ok(status)
    }

    /// Removes a container no record describes from every handler (`delete --force` kills it
    /// if it runs) and takes down its rootfs and run directory.
    fn discard_container(&self, id: &str) {
        for handler in self.runtimes.all() {
            if let Err(e) = handler.runtime.delete_blocking(id) {
                tracing::warn!(container = %id, runtime = %handler.runtime.name(), error = %e, "cannot delete the container from the runtime");
            }
        }
        let run_dir = self.config.run_root.join("containers").join(id);
        let _ = unmount_container(&*self.host, &run_dir);
        let _ = std::fs::remove_dir_all(&run_dir);
    }

    /// Releases what a sandbox no record describes holds on the node (its holder, pinned
    /// namespaces, shm, run directory) and removes the pod cgroup swapcri would have made
    /// for it (when nothing is left in it).
    fn discard_sandbox(&self, id: &str) {
        cleanup_sandbox_dir(&self.config.run_root.join("sandboxes").join(id));
        if self.config.runtime.cgroup_driver == crate::config::CgroupDriver::Cgroupfs {
            let own = self.own_cgroup_parent(id);
            match self.cgroups.remove(&own) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tracing::warn!(sandbox = %id, cgroup = %own, error = %e, "cannot remove the cgroup of a lost sandbox")
                }
                _ => {}
            }
        }
    }

    /// Containers an OCI runtime holds that no record names (a crash or a cancelled create
    /// between the runtime's create and the record): deleted, with their run directories.
    /// Only runtime state directories under swapcri's run root are swept, and only ids of
    /// swapcri's form: a root the operator shares with another manager is left alone.
    fn sweep_runtime_orphans(&self) {
        let state = self.registry.read();
        let aside = state.quarantined.iter().filter(|q| q.kind == "container").map(|q| q.id.clone());
        let known: std::collections::HashSet<String> =
            state.containers.keys().map(|k| k.to_string()).chain(aside).collect();
        drop(state);
        for handler in self.runtimes.all().filter(|h| h.spec.root.starts_with(&self.config.run_root)) {
            let ids = match handler.runtime.list_blocking() {
                Ok(ids) => ids,
                Err(e) => {
                    tracing::warn!(runtime = %handler.spec.name, error = %e, "cannot list the runtime's containers");
                    continue;
                }
            };
            let orphans = ids.into_iter().filter(|id| ContainerId::parse(id).is_some() && !known.contains(id));
            for id in orphans {
                tracing::warn!(container = %id, runtime = %handler.spec.name, "the runtime holds a container no record names: deleting it");
                self.discard_container(&id);
            }
        }
    }

    /// Run directories that no record owns (a crash before the first record was written);
    /// a quarantined object's are left alone.
    fn sweep_orphan_dirs(&self) {
        let state = self.registry.read();
        let known = |kind: &str, listed: Vec<String>| -> Vec<String> {
            let aside = state.quarantined.iter().filter(|q| q.kind == kind).map(|q| q.id.clone());
            listed.into_iter().chain(aside).collect()
        };
        let known_containers = known("container", state.containers.keys().map(|k| k.to_string()).collect());
        let known_sandboxes = known("sandbox", state.sandboxes.keys().map(|k| k.to_string()).collect());
        drop(state);
        for (dir, known, is_sandbox) in [("containers", known_containers, false), ("sandboxes", known_sandboxes, true)]
        {
            let Ok(entries) = std::fs::read_dir(self.config.run_root.join(dir)) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if known.contains(&name) {
                    continue;
                }
                tracing::info!(path = %entry.path().display(), "removing an orphaned run directory");
                if is_sandbox {
                    cleanup_sandbox_dir(&entry.path());
                } else {
                    let _ = unmount_container(&*self.host, &entry.path());
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
}

fn is_nsfs(path: &Path) -> bool {
    nix::sys::statfs::statfs(path).map(|s| s.filesystem_type().0 == NSFS_MAGIC).unwrap_or(false)
}

/// What a sandbox without a (complete) record left: its holder (a crash after the
/// namespaces were made), pinned namespaces, shm and directory.
fn cleanup_sandbox_dir(dir: &Path) {
    for holder in sandbox::holders_of(dir) {
        tracing::info!(path = %dir.display(), pid = holder.pid, "stopping the PID namespace holder of an unfinished sandbox");
        sandbox::stop_holder(holder);
    }
    for ns in ["net", "ipc", "uts"] {
        let _ = sandbox::unmount(&dir.join("ns").join(ns));
    }
    let _ = sandbox::unmount(&dir.join("shm"));
    let _ = std::fs::remove_dir_all(dir);
}
