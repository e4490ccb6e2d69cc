use std::str::FromStr;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tracing::Instrument;

use crate::error::Error;
use crate::model::container::{cri_signal, ContainerState};
use crate::model::sandbox::ProcessRef;
use crate::oci::{OciError, OciRuntime};

use crate::service::owners::objects::Container;
use crate::service::pod_service::PodService;
use crate::service::steps::span;

/// How long to wait for the exit after SIGKILL before giving up.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// How long a SIGKILL of every process in the cgroup gets before the container's init is
/// signalled directly. runc 1.1 under systemd on cgroup v1 lists the processes from a
/// devices cgroup that systemd may have left at the pod slice: it then signals none.
const KILL_ALL_WAIT: Duration = Duration::from_secs(1);

impl PodService {
    /// Sends the stop signal, waits up to `timeout`, then SIGKILLs every process of the
    /// container. Stopping a stopped or unknown-to-us container succeeds. NRI plugins hear
    /// of the stop once it is done.
    pub async fn stop_container(&self, id: &str, timeout: Duration) -> Result<(), Error> {
        self.stop_container_now(id, timeout).await?;
        if let Ok(container) = self.registry.find_container(id) {
            self.nri_stopped(&container.meta.id).await;
        }
        Ok(())
    }

    async fn stop_container_now(&self, id: &str, timeout: Duration) -> Result<(), Error> {
        let container = match self.registry.find_container(id) {
            Ok(c) => c,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let _guard = self.registry.lock(container.meta.id.as_str()).await;
        let container = self.registry.find_container(container.meta.id.as_str())?;
        if !container.status.state.needs_stop() && container.status.state != ContainerState::Created {
            return Ok(());
        }
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str())?;
        let runtime = self.runtimes.runtime(&sandbox.meta.runtime_handler)?;
        let cid = container.meta.id.clone();
        if container.status.state == ContainerState::Running && !timeout.is_zero() {
            self.send_stop_signal(&container, runtime.as_ref()).instrument(span::step("stop signal")).await;
            if self.wait_exit(&cid, timeout).instrument(span::step("wait for exit")).await {
                tracing::info!(container = %cid, "container stopped");
                return Ok(());
            }
            tracing::info!(container = %cid, timeout_s = timeout.as_secs(), "stop timeout passed, killing");
        }
        if let Err(e) = self.kill_every_process(&container, runtime.as_ref()).instrument(span::step("kill all")).await {
            // A container that exited meanwhile is gone from the runtime: nothing to signal.
            if self.wait_exit(&cid, Duration::ZERO).await {
                tracing::debug!(container = %cid, error = %e, "exited before the SIGKILL");
            } else {
                tracing::warn!(container = %cid, error = %e, "SIGKILL not delivered");
            }
        }
        let mut exited = self.wait_exit(&cid, KILL_ALL_WAIT).instrument(span::step("wait for exit")).await;
        if !exited {
            // An init that is gone has exited and its monitor has yet to record it (a slow
            // node): only a live one is signalled again.
            if container.status.pid.and_then(ProcessRef::of).is_some_and(|p| p.is_alive()) {
                tracing::warn!(container = %cid, "still running after SIGKILL to its cgroup; signalling its init directly");
                let killed = runtime.kill(cid.as_str(), "SIGKILL", false).instrument(span::step("runtime kill")).await;
                if let Err(e) = killed {
                    tracing::warn!(container = %cid, error = %e, "SIGKILL to the init not delivered");
                }
            }
            exited = self.wait_exit(&cid, KILL_WAIT).instrument(span::step("wait for exit")).await;
        }
        if !exited {
            return Err(Error::DeadlineExceeded(format!("container {cid} did not exit after SIGKILL")));
        }
        tracing::info!(container = %cid, "container killed");
        Ok(())
    }

    /// The stop signal to the container's init through a pidfd, without exec'ing the runtime;
    /// through the runtime when the init cannot be named (a monitor from before a restart
    /// that lost it) or the signal has no number here (real-time signals).
    async fn send_stop_signal(&self, container: &Container, runtime: &dyn OciRuntime) {
        let signal = Signal::from_str(cri_signal(&container.meta.stop_signal).as_str_name()).ok();
        let sent = match (container.status.live_init(), signal) {
            (Some(init), Some(signal)) => crate::blocking::run(|| init.signal(signal)),
            _ => false,
        };
        if sent {
            return;
        }
        if let Err(e) = runtime.kill(container.meta.id.as_str(), &container.meta.stop_signal, false).await {
            tracing::debug!(container = %container.meta.id, error = %e, "stop signal not delivered");
        }
    }

    /// SIGKILL to every process of the container: through its cgroup (`cgroup.kill` on v2,
    /// freeze, kill and thaw on v1) without exec'ing the runtime; through the runtime when
    /// the cgroup is unknown or cannot do it.
    async fn kill_every_process(&self, container: &Container, runtime: &dyn OciRuntime) -> Result<(), OciError> {
        if let Some(rel) = container.status.cgroup.as_deref() {
            match crate::blocking::run(|| self.cgroups.kill_all(rel)) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::debug!(container = %container.meta.id, error = %e, "cgroup kill left to the runtime")
                }
            }
        }
        runtime.kill(container.meta.id.as_str(), "SIGKILL", true).await
    }

    /// Polls the exit record until the container is no longer running or created: often
    /// at first (a killed container is usually gone within milliseconds), then every 20 ms.
    async fn wait_exit(&self, id: &crate::model::ids::ContainerId, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            match self.registry.refresh(id) {
                Some(c) if matches!(c.status.state, ContainerState::Running | ContainerState::Created) => {}
                _ => return true,
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}
