//! The PID-namespace holder of every ready pod is watched through a pidfd: when it exits,
//! whatever ended it, the pod has lost its PID namespace and every container sharing it has
//! been killed by the kernel. The pod turns NotReady at once, with the reason in its status
//! and the log, and its other containers are stopped: kubelet then sees a pod to recreate,
//! never a Ready pod without namespaces.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::model::ids::SandboxId;
use crate::model::sandbox::{ProcessRef, SandboxState};

use crate::service::background::process_exit::exit_of;
use crate::service::pod_service::PodService;

impl PodService {
    /// Watches the holders of ready sandboxes for the daemon's life.
    pub(in crate::service) async fn watch_holders(self: Arc<Self>) {
        let mut watched: HashMap<SandboxId, ProcessRef> = HashMap::new();
        let mut exits = JoinSet::new();
        loop {
            for (id, holder) in self.ready_holders() {
                if watched.get(&id) != Some(&holder) {
                    watched.insert(id.clone(), holder);
                    exits.spawn(async move {
                        exit_of(holder).await;
                        (id, holder)
                    });
                }
            }
            tokio::select! {
                () = self.holder_wake.wait() => {}
                Some(Ok((id, holder))) = exits.join_next() => {
                    watched.remove(&id);
                    self.holder_exited(&id, holder).await;
                }
            }
        }
    }

    fn ready_holders(&self) -> Vec<(SandboxId, ProcessRef)> {
        let state = self.registry.read();
        state
            .sandboxes
            .values()
            .filter(|s| s.status.state == SandboxState::Ready)
            .filter_map(|s| Some((s.meta.id.clone(), s.status.holder?)))
            .collect()
    }

    /// A ready pod's holder is gone: unless the pod was stopped meanwhile (which kills the
    /// holder on purpose), the pod is NotReady and its containers are stopped.
    async fn holder_exited(&self, id: &SandboxId, holder: ProcessRef) {
        let _guard = self.registry.lock(id.as_str()).await;
        let Ok(sandbox) = self.registry.find_sandbox(id.as_str()) else { return };
        if sandbox.status.state != SandboxState::Ready || sandbox.status.holder != Some(holder) {
            return;
        }
        let reason = format!(
            "the pod's PID namespace holder (pid {}) exited outside swapcri's control: the pod's \
             containers lost their PID namespace",
            holder.pid
        );
        tracing::error!(sandbox = %id, pid = holder.pid, "{reason}; the sandbox is not ready");
        let mut status = sandbox.status.clone();
        status.state = SandboxState::NotReady;
        status.holder = None;
        status.reason = Some(reason);
        if let Err(e) = self.registry.save_sandbox_status(id, status) {
            tracing::error!(sandbox = %id, error = %e, "cannot record that the sandbox is not ready");
        }
        // Containers in the pod's PID namespace are dead already; the others are stopped, all
        // at once, so that nothing of the pod runs on. Their inits are killed here first: a
        // container in a PID namespace of its own dies with its init, without waiting for a
        // runtime binary to start on a loaded node; the stop then sweeps the cgroup.
        let containers = self.registry.containers_of(id);
        for container in &containers {
            self.kill_init(container);
        }
        let stops = containers.iter().map(|c| self.stop_container(c.as_str(), Duration::ZERO));
        for (container, result) in containers.iter().zip(futures::future::join_all(stops).await) {
            if let Err(e) = result {
                tracing::warn!(sandbox = %id, %container, error = %e, "cannot stop a container of a pod that lost its holder");
            }
        }
    }
}

impl PodService {
    /// SIGKILLs a running container's init, found as the live child of its live monitor
    /// (the subreaper that reaps it), so a pid another process took is never signalled.
    fn kill_init(&self, id: &crate::model::ids::ContainerId) {
        let Ok(container) = self.registry.find_container(id.as_str()) else { return };
        if let Some(init) = container.status.live_init() {
            init.signal(nix::sys::signal::Signal::SIGKILL);
        }
    }
}
