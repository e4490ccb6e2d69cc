//! Start-up reconciliation of the records on disk with what is running.

use std::path::Path;

use crate::error::Error;
use crate::model::container::{ContainerMeta, ContainerStatus};
use crate::model::sandbox::{SandboxMeta, SandboxState, SandboxStatus};
use crate::sandbox;

use super::image_volumes::unmount_container;
use super::pods::{Container, PodService, Sandbox};

/// statfs magic of the nsfs filesystem (a pinned namespace file).
const NSFS_MAGIC: i64 = 0x6e73_6673;

impl PodService {
    /// Releases the networks of pods that no longer exist (or whose creation a crash cut
    /// short after CNI ADD). Runs after `recover`, before the socket opens.
    pub async fn recover_network(&self) {
        let known: std::collections::HashSet<String> =
            self.registry.read().sandboxes.keys().map(|id| id.to_string()).collect();
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
    /// creation left. Runs before the socket opens.
    pub fn recover(&self) -> Result<(), Error> {
        let sandboxes = self.registry.sandbox_records.load::<SandboxMeta, SandboxStatus>()?;
        for (id, error) in &sandboxes.quarantined {
            // Nobody can list or remove the pod any more: what it holds on the node goes now
            // (its network later, with the networks no pod accounts for).
            tracing::error!(sandbox = %id, %error, "unreadable sandbox record moved aside as {id}.corrupt; releasing what the pod holds");
            self.discard_sandbox(id);
        }
        for id in &sandboxes.incomplete {
            tracing::info!(sandbox = %id, "cleaning up a sandbox whose creation did not finish");
            cleanup_sandbox_dir(&self.config.run_root.join("sandboxes").join(id));
            self.registry.sandbox_records.remove(id)?;
        }
        for (meta, mut status) in sandboxes.complete {
            if status.state == SandboxState::Ready {
                let request = self.ns_request(&meta.id, &meta.config);
                let pinned = [&request.net, &request.ipc, &request.uts].into_iter().flatten().all(|p| is_nsfs(p));
                let holder_ok = !request.pid_holder || status.holder.is_some_and(|h| h.is_alive());
                if !pinned || !holder_ok {
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
                    self.registry.sandbox_records.write_status(meta.id.as_str(), &status)?;
                }
            }
            self.registry
                .write()
                .sandboxes
                .insert(meta.id.clone(), Sandbox { meta: std::sync::Arc::new(meta), status });
        }

        let containers = self.registry.container_records.load::<ContainerMeta, ContainerStatus>()?;
        for (id, error) in &containers.quarantined {
            // Nobody can list or remove it any more: a container still running under that id
            // would go on unseen, so it is stopped and removed from the runtime now.
            tracing::error!(container = %id, %error, "unreadable container record moved aside as {id}.corrupt; stopping and removing the container");
            self.discard_container(id);
        }
        for id in &containers.incomplete {
            tracing::info!(container = %id, "cleaning up a container whose creation did not finish");
            self.discard_container(id);
            self.registry.container_records.remove(id)?;
        }
        let mut ids = Vec::new();
        for (meta, status) in containers.complete {
            ids.push(meta.id.clone());
            self.registry
                .write()
                .containers
                .insert(meta.id.clone(), Container { meta: std::sync::Arc::new(meta), status });
        }
        for id in &ids {
            self.registry.refresh(id);
        }
        self.sweep_orphan_dirs();
        let state = self.registry.read();
        tracing::info!(sandboxes = state.sandboxes.len(), containers = state.containers.len(), "state recovered");
        Ok(())
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

    /// Run directories that no record owns (a crash before the first record was written).
    fn sweep_orphan_dirs(&self) {
        let known_containers: Vec<String> = self.registry.read().containers.keys().map(|k| k.to_string()).collect();
        let known_sandboxes: Vec<String> = self.registry.read().sandboxes.keys().map(|k| k.to_string()).collect();
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
