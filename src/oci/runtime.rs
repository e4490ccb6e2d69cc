//! The trait every OCI runtime is driven through, and the values its calls take and return.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use super::features::Features;
use crate::model::error_kind::{Classify, ErrorKind};

/// The file the runtime writes the pid of a created container or exec process to, in
/// the work directory it was given.
pub(crate) const PID_FILE: &str = "pid";

/// A process's exit code, with death by signal N reported as 128 + N (as shells do).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// An exec's exit code; `None` when it ended non-zero without the pid file every runtime
/// writes once the process runs: the runtime failed, the process never started.
pub(super) fn exec_exit_code(status: std::process::ExitStatus, work_dir: &Path) -> Option<i32> {
    let code = exit_code(status);
    (code == 0 || work_dir.join(PID_FILE).exists()).then_some(code)
}

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("runtime handler {handler}: cannot run {binary}: {source}")]
    Spawn { handler: String, binary: PathBuf, source: std::io::Error },
    #[error("runtime handler {handler}: {command} {id} failed: {message}")]
    Failed { handler: String, command: &'static str, id: String, message: String },
    #[error("command timed out after {0:?}")]
    Timeout(Duration),
    #[error("runtime handler {handler}: {path}: {source}")]
    Io { handler: String, path: PathBuf, source: std::io::Error },
    /// CRIU could not dump (or restore) the container: an fd or a kernel it cannot handle.
    #[error("runtime handler {handler}: {command} {id}: {message}")]
    Criu { handler: String, command: &'static str, id: String, message: String },
}

/// Where `checkpoint` writes, and with which CRIU.
pub struct CheckpointPaths<'a> {
    /// CRIU's image files, and the runtime's record of the container's stdio (descriptors.json).
    pub image_dir: &'a Path,
    /// CRIU's work files and its log (dump.log).
    pub work_dir: &'a Path,
    /// `criu`: a name looked up in PATH, or an absolute path.
    pub criu: &'a Path,
}

/// What `restore` brings back, and with which CRIU.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RestoreFrom {
    /// CRIU's image files of a checkpoint, with the runtime's `descriptors.json`.
    pub image_dir: PathBuf,
    /// `criu`: a name looked up in PATH, or an absolute path.
    pub criu: PathBuf,
}

/// `state` output (the fields used).
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

/// Where a new container's stdio goes: pipes (or /dev/null), or, for a terminal, a console
/// socket on which the runtime hands over the pty master.
pub struct CreateIo {
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
    pub console_socket: Option<PathBuf>,
}

impl CreateIo {
    pub fn null() -> Self {
        CreateIo { stdin: Stdio::null(), stdout: Stdio::null(), stderr: Stdio::null(), console_socket: None }
    }
}

#[async_trait]
pub trait OciRuntime: Send + Sync {
    /// The handler's name, for messages.
    fn name(&self) -> &str;

    /// What this runtime supports, asked of the binary (`features`) or judged by its version.
    fn probe_features(&self) -> Features;

    /// Creates the container of `bundle` (blocking: the monitor calls it, and becomes the
    /// parent of what the runtime leaves behind). `work_dir` takes the pid file and the
    /// runtime's log. Returns the container's init pid.
    fn create(&self, id: &str, bundle: &Path, work_dir: &Path, io: CreateIo) -> Result<i32, OciError>;

    /// Restores the processes of a checkpoint as the running container of `bundle`, like
    /// `create` from the monitor (blocking; its stdio takes the dumped process's); returns
    /// the restored init's pid.
    fn restore(
        &self,
        id: &str,
        bundle: &Path,
        work_dir: &Path,
        from: &RestoreFrom,
        io: CreateIo,
    ) -> Result<i32, OciError>;

    /// The command that runs the OCI process in `process` inside the container, writing the
    /// process's pid to `work_dir/pid` and the runtime's log into `work_dir`. The caller
    /// sets stdio and waits; `exec_outcome` reads the result.
    fn exec_command(&self, id: &str, process: &Path, work_dir: &Path) -> tokio::process::Command;

    /// The exit code of an `exec_command`, or the runtime's own failure when the process
    /// never started (`stderr`: what the command printed, when the log is empty).
    fn exec_outcome(
        &self,
        id: &str,
        status: std::process::ExitStatus,
        work_dir: &Path,
        stderr: &[u8],
    ) -> Result<i32, OciError>;

    /// `delete --force`, from blocking code (rollbacks, recovery).
    fn delete_blocking(&self, id: &str) -> Result<(), OciError>;

    /// The ids of every container the runtime's state directory holds (blocking: recovery
    /// compares them with the records).
    fn list_blocking(&self) -> Result<Vec<String>, OciError>;

    async fn start(&self, id: &str) -> Result<(), OciError>;
    /// Freezes every process of the container (`pause`), and thaws them (`resume`).
    async fn pause(&self, id: &str) -> Result<(), OciError>;
    async fn resume(&self, id: &str) -> Result<(), OciError>;
    /// Sends `signal` (a name such as SIGTERM) to the init process, or to all processes.
    async fn kill(&self, id: &str, signal: &str, all: bool) -> Result<(), OciError>;
    async fn delete(&self, id: &str) -> Result<(), OciError>;
    /// `None` when the runtime does not know the container.
    async fn state(&self, id: &str) -> Result<Option<RuntimeState>, OciError>;
    /// Applies a resources document (OCI LinuxResources JSON).
    async fn update(&self, id: &str, resources_json: &[u8]) -> Result<(), OciError>;
    /// Dumps the running container's processes with CRIU and leaves them running. A caller
    /// must not drop the call half way (a dump cut short could leave the container frozen):
    /// the service runs it in a task of its own.
    async fn checkpoint(&self, id: &str, paths: &CheckpointPaths<'_>) -> Result<(), OciError>;
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

impl std::fmt::Debug for dyn OciRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OciRuntime({})", self.name())
    }
}

impl Classify for OciError {
    fn kind(&self) -> ErrorKind {
        match self {
            OciError::Timeout(_) => ErrorKind::DeadlineExceeded,
            OciError::Criu { .. } => ErrorKind::FailedPrecondition,
            _ => ErrorKind::Internal,
        }
    }
}
