use std::time::Duration;

use serde_json::json;

use crate::error::Error;
use crate::oci::{ExecOutput, OciError};

use super::PodService;

impl PodService {
    /// The OCI process for a command in a running container: the container's own process
    /// (user, environment, capabilities, working directory) with the command and terminal set.
    pub(super) fn exec_process(
        &self,
        id: &str,
        cmd: &[String],
        tty: bool,
    ) -> Result<(super::objects::Container, serde_json::Value), Error> {
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
        match runtime.exec(container.meta.id.as_str(), process.to_string().as_bytes(), timeout, limit).await {
            Err(OciError::Timeout(t)) => {
                Err(Error::DeadlineExceeded(format!("command timed out after {}s", t.as_secs())))
            }
            other => Ok(other?),
        }
    }
}
