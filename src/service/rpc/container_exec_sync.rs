use std::time::Duration;

use serde_json::json;

use crate::error::Error;
use crate::oci::{ExecOutput, OciError};

use crate::service::owners::objects;
use crate::service::pod_service::PodService;

/// How long a failed exec waits to see whether its container is stopping.
const STOPPING_GRACE: Duration = Duration::from_millis(500);

impl PodService {
    /// The OCI process for a command in a running container: the container's own process
    /// (user, environment, capabilities, working directory) with the command and terminal set.
    pub(in crate::service) fn exec_process(
        &self,
        id: &str,
        cmd: &[String],
        tty: bool,
    ) -> Result<(objects::Container, serde_json::Value), Error> {
        let container = self.registry.find_container(id)?;
        if !container.status.state.can_exec() {
            return Err(Error::FailedPrecondition(format!("container {} is not running", container.meta.id)));
        }
        let spec_path = self.registry.container_run_dir(&container.meta.id).join("bundle/config.json");
        let spec: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&spec_path).map_err(Error::io(spec_path.display()))?)
                .map_err(|e| Error::Internal(e.to_string()))?;
        let mut process = spec.get("process").cloned().unwrap_or_else(|| json!({}));
        process["args"] = json!(cmd);
        process["terminal"] = json!(tty);
        Ok((container, process))
    }

    /// Runs a command in a running container and returns its output and exit code; on
    /// timeout the command and its children are killed.
    pub async fn exec_sync(&self, id: &str, cmd: Vec<String>, timeout: Option<Duration>) -> Result<ExecOutput, Error> {
        if cmd.is_empty() {
            return Err(Error::InvalidArgument("exec needs a command".into()));
        }
        let (container, process) = self.exec_process(id, &cmd, false)?;
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str())?;
        let runtime = self.runtimes.runtime(&sandbox.meta.runtime_handler)?;
        let limit = self.config.runtime.exec_output_limit_bytes;
        let ran = runtime.exec(container.meta.id.as_str(), process.to_string().as_bytes(), timeout, limit).await;
        match ran {
            Err(OciError::Timeout(t)) => {
                Err(Error::DeadlineExceeded(format!("command timed out after {}s", t.as_secs())))
            }
            Err(e) if self.stops_meanwhile(&container).await => Err(Error::FailedPrecondition(format!(
                "container {} stopped while the command was starting: {e}",
                container.meta.id
            ))),
            other => Ok(other?),
        }
    }

    /// Whether the container stops within a moment of a failed exec (its exit recorded, its
    /// init gone or in its exit): a runtime failure while it stops is the stop's doing, not a
    /// fault. A killed init can take some milliseconds to exit, hence the short wait.
    async fn stops_meanwhile(&self, container: &objects::Container) -> bool {
        let deadline = std::time::Instant::now() + STOPPING_GRACE;
        loop {
            let recorded_exit = self.registry.refresh(&container.meta.id).is_none_or(|c| !c.status.state.can_exec());
            if recorded_exit || container.status.live_init().is_none_or(|init| init.is_exiting()) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
