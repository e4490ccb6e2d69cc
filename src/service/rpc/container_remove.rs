use std::time::Duration;

use tracing::Instrument;

use crate::error::Error;

use crate::service::pod_service::PodService;
use crate::service::steps::image_volumes::unmount_container;
use crate::service::steps::span;

impl PodService {
    /// Kills the container if it runs, deletes it from the runtime and removes its root
    /// filesystem, directories and records. Removing a missing container succeeds.
    pub async fn remove_container(&self, id: &str) -> Result<(), Error> {
        let container = match self.registry.find_container(id) {
            Ok(c) => c,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        self.stop_container(container.meta.id.as_str(), Duration::ZERO).await?;
        let container = self.registry.find_container(container.meta.id.as_str()).unwrap_or(container);
        let _guard = self.registry.lock(container.meta.id.as_str()).await;
        let cid = container.meta.id.clone();
        let handler =
            self.registry.find_sandbox(container.meta.sandbox_id.as_str()).ok().map(|s| s.meta.runtime_handler.clone());
        if let Some(handler) = handler.filter(|_| !self.monitor_deleted(&cid)).and_then(|h| self.runtimes.get(&h).ok())
        {
            if let Err(e) = handler.runtime.delete(cid.as_str()).instrument(span::step("runtime delete")).await {
                tracing::debug!(container = %cid, error = %e, "runc delete");
            }
        }
        crate::crash::point("container-remove-after-runtime-delete");
        if let Some(monitor) = container.status.monitor {
            monitor.signal(nix::sys::signal::Signal::SIGKILL);
        }
        let run_dir = self.registry.container_run_dir(&cid);
        span::step("unmount")
            .in_scope(|| crate::blocking::run(|| unmount_container(&*self.host, &run_dir)))
            .map_err(Error::io("unmounting the root filesystem and image volumes"))?;
        crate::blocking::run(|| {
            let _ = std::fs::remove_dir_all(&run_dir);
            for kind in ["ctl", "console", "attach"] {
                let _ = std::fs::remove_file(self.registry.socket_path(&cid, kind));
            }
        });
        span::step("records").in_scope(|| self.registry.remove_container(&cid))?;
        crate::blocking::run(|| self.release_shared_binds(&container.meta.shared_binds));
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str());
        if let Ok(sandbox) = &sandbox {
            if let Err(e) =
                self.memory.apply_pod_reservations(sandbox, &self.registry.owned_pod_reservations(), None).await
            {
                tracing::warn!(container = %cid, error = %e, "pod memory reservations not updated");
            }
        }
        tracing::info!(container = %cid, "container removed");
        if let Ok(sandbox) = &sandbox {
            self.nri_removed(&container, sandbox).await;
        }
        Ok(())
    }
}

impl PodService {
    /// Whether the monitor deleted the exited container from the runtime: the exit record
    /// says so where it was written after the delete, a mark beside it where it was written
    /// before.
    fn monitor_deleted(&self, id: &crate::model::ids::ContainerId) -> bool {
        let exit_file = self.registry.exit_file(id);
        crate::model::container::runtime_deleted_mark(&exit_file).exists()
            || std::fs::read(&exit_file)
                .ok()
                .and_then(|b| serde_json::from_slice::<crate::model::container::ExitRecord>(&b).ok())
                .is_some_and(|record| record.runtime_deleted)
    }

    /// Unmounts the shared volume sources a removed container made, unless another
    /// container still relies on them.
    fn release_shared_binds(&self, binds: &[std::path::PathBuf]) {
        for path in binds {
            let in_use = self.registry.read().containers.values().any(|c| c.meta.shared_binds.contains(path));
            if !in_use {
                if let Err(e) = self.host.unmount(path) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot unmount a shared volume source");
                }
            }
        }
    }
}
