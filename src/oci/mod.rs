//! The OCI runtime as the daemon drives it after creation (the monitor runs `create`).

mod process_tree;
mod runc;

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

pub use process_tree::{descendants, kill_tree};
pub use runc::{runc_message as runc_message_public, Runc};

/// A process's exit code, with death by signal N reported as 128 + N (as shells do).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("cannot run {binary}: {source}")]
    Spawn { binary: PathBuf, source: std::io::Error },
    #[error("runc {command} {id} failed: {message}")]
    Failed { command: &'static str, id: String, message: String },
    #[error("command timed out after {0:?}")]
    Timeout(Duration),
}

/// `runc state` output (the fields used).
#[derive(Debug, Clone, Deserialize)]
pub struct RuntimeState {
    pub status: String,
    pub pid: i32,
}

/// Output of a synchronous exec.
#[derive(Debug, Clone, Default)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

#[async_trait]
pub trait OciRuntime: Send + Sync {
    async fn start(&self, id: &str) -> Result<(), OciError>;
    /// Sends `signal` (a name such as SIGTERM) to the init process, or to all processes.
    async fn kill(&self, id: &str, signal: &str, all: bool) -> Result<(), OciError>;
    async fn delete(&self, id: &str) -> Result<(), OciError>;
    /// `None` when the runtime does not know the container.
    async fn state(&self, id: &str) -> Result<Option<RuntimeState>, OciError>;
    /// Applies a resources document (OCI LinuxResources JSON).
    async fn update(&self, id: &str, resources_json: &[u8]) -> Result<(), OciError>;
    /// Runs a process (OCI Process JSON) in the container; output capped at `cap` bytes per
    /// stream; on timeout the process and its descendants are killed.
    async fn exec(
        &self,
        id: &str,
        process_json: &[u8],
        timeout: Option<Duration>,
        cap: usize,
    ) -> Result<ExecOutput, OciError>;
}
