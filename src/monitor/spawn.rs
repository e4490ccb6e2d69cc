//! Daemon side: start a monitor and wait for its report; talk to its control socket.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::model::error_kind::{Classify, ErrorKind};
use crate::model::sandbox::ProcessRef;

use super::handoff::MonitorReport;

#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("cannot start the monitor: {0}")]
    Spawn(std::io::Error),
    #[error("the monitor did not report within {0:?}")]
    NoReport(Duration),
    #[error("{0}")]
    Create(String),
    #[error("monitor control socket {path}: {message}")]
    Control { path: String, message: String },
}

/// The subcommand that runs a monitor: `swapcri monitor CONFIG`.
pub const COMMAND: &str = "monitor";

/// Starts `swapcri monitor CONFIG` (in its own session, so it outlives the daemon) and
/// waits until it reports the container created.
/// Returns the monitor (pid + start time) and the container's init pid.
pub async fn spawn(config: &Path, stderr_log: &Path, timeout: Duration) -> Result<(ProcessRef, i32), MonitorError> {
    let stderr = std::fs::OpenOptions::new().create(true).append(true).open(stderr_log).map_err(MonitorError::Spawn)?;
    let mut child = tokio::process::Command::new(crate::SELF_EXE)
        .arg0("swapcri")
        .arg(COMMAND)
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .spawn()
        .map_err(MonitorError::Spawn)?;
    let stdout = child.stdout.take().expect("piped");
    // The daemon reaps its monitors; after a daemon restart they belong to init.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    let read = reader.read_line(&mut line);
    match tokio::time::timeout(timeout, read).await {
        Err(_) => Err(MonitorError::NoReport(timeout)),
        Ok(Err(e)) => Err(MonitorError::Spawn(e)),
        Ok(Ok(_)) => match serde_json::from_str::<MonitorReport>(line.trim()) {
            Ok(MonitorReport::Created { pid, monitor_pid }) => {
                let monitor = ProcessRef::of(monitor_pid).ok_or_else(|| {
                    MonitorError::Create("the monitor exited right after creating the container".into())
                })?;
                Ok((monitor, pid))
            }
            Ok(MonitorReport::Failed { error }) => Err(MonitorError::Create(error)),
            Err(_) => {
                let log = std::fs::read_to_string(stderr_log).unwrap_or_default();
                Err(MonitorError::Create(format!("the monitor failed: {}", log.trim())))
            }
        },
    }
}

/// Asks the monitor to reopen the container log.
pub async fn reopen_log(ctl_socket: &Path) -> Result<(), MonitorError> {
    let err = |message: String| MonitorError::Control { path: ctl_socket.display().to_string(), message };
    let mut stream = tokio::net::UnixStream::connect(ctl_socket).await.map_err(|e| err(e.to_string()))?;
    stream.write_all(b"reopen\n").await.map_err(|e| err(e.to_string()))?;
    let mut reply = String::new();
    let mut reader = BufReader::new(stream);
    let read = reader.read_line(&mut reply);
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .map_err(|_| err("no reply".into()))?
        .map_err(|e| err(e.to_string()))?;
    match reply.trim() {
        "ok" => Ok(()),
        other => Err(err(other.to_string())),
    }
}

impl Classify for MonitorError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Internal
    }
}
