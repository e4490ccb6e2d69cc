//! A synchronous exec (ExecSync) through any runtime's `exec_command`: output captured up
//! to a cap, and on timeout the process and everything it started killed before the caller
//! hears of the timeout.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::runtime::{ExecOutput, OciError, OciRuntime, PID_FILE};
use crate::process_tree::kill_tree;

/// How long the runtime's exec process gets to reap a process killed at a timeout.
const REAP_GRACE: Duration = Duration::from_secs(2);
/// How long a runtime still setting up the exec at the timeout gets to name its process.
const SETUP_GRACE: Duration = Duration::from_secs(10);

pub async fn run(
    runtime: &dyn OciRuntime,
    id: &str,
    process_json: &[u8],
    timeout: Option<Duration>,
    cap: usize,
) -> Result<ExecOutput, OciError> {
    let io = |path: &std::path::Path| io_error(runtime, path);
    let dir = crate::blocking::run(|| tempfile::Builder::new().prefix("swapcri-exec-").tempdir())
        .map_err(io(&std::env::temp_dir()))?;
    let process = dir.path().join("process.json");
    crate::blocking::run(|| std::fs::write(&process, process_json)).map_err(io(&process))?;
    let ran = run_in(runtime, id, &dir, &process, timeout, cap).await;
    crate::blocking::run(|| drop(dir));
    ran
}

/// An io failure on `path` while running an exec through `runtime`.
fn io_error(runtime: &dyn OciRuntime, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> OciError {
    let (handler, path) = (runtime.name().to_string(), path.to_path_buf());
    move |source| OciError::Io { handler, path, source }
}

async fn run_in(
    runtime: &dyn OciRuntime,
    id: &str,
    dir: &tempfile::TempDir,
    process: &std::path::Path,
    timeout: Option<Duration>,
    cap: usize,
) -> Result<ExecOutput, OciError> {
    let io = |path: &std::path::Path| io_error(runtime, path);
    let mut cmd = runtime.exec_command(id, process, dir.path());
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(io(process))?;
    let stdout = tokio::spawn(read_capped(child.stdout.take().expect("piped"), cap));
    let stderr = tokio::spawn(read_capped(child.stderr.take().expect("piped"), cap));
    let waited = match timeout {
        Some(t) => match tokio::time::timeout(t, child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                if let Some(process) = started_process(&mut child, &dir.path().join(PID_FILE)).await {
                    kill_tree(process);
                    // The runtime's exec process is the killed process's parent: let it reap
                    // it, or it lingers as a zombie under the container's init (which may
                    // never reap) and still shows in the container's process list.
                    let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
                }
                let _ = child.kill().await;
                return Err(OciError::Timeout(t));
            }
        },
        None => child.wait().await,
    };
    let status = waited.map_err(io(process))?;
    let stdout = stdout.await.unwrap_or_default();
    let stderr = stderr.await.unwrap_or_default();
    let exit_code = runtime.exec_outcome(id, status, dir.path(), &stderr)?;
    Ok(ExecOutput { stdout, stderr, exit_code })
}

/// The exec's process, once the runtime has named it in its pid file. A timeout can fire while
/// the runtime is still setting up (a loaded node): killing the runtime then would leave the
/// process it is about to start running in the container, so its pid file is awaited (as
/// long as the runtime runs, at most SETUP_GRACE).
async fn started_process(
    child: &mut tokio::process::Child,
    pid_file: &std::path::Path,
) -> Option<crate::model::sandbox::ProcessRef> {
    let deadline = tokio::time::Instant::now() + SETUP_GRACE;
    loop {
        if let Some(process) = crate::process_tree::named_by(pid_file) {
            return Some(process);
        }
        if !matches!(child.try_wait(), Ok(None)) || tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a stream to the end, keeping at most `cap` bytes (the rest is drained).
async fn read_capped(mut stream: impl AsyncRead + Unpin, cap: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}
