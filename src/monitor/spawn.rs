//! Daemon side: start a monitor and wait for its report; talk to its control socket.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;

use crate::model::error_kind::{Classify, ErrorKind};
use crate::model::sandbox::ProcessRef;

use super::handoff::{MonitorReport, SpareJob, SPARE_ARG};

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

/// Monitors started ahead of need, each waiting on its stdin for the container it is to
/// create: a create hands one its job instead of waiting for an exec of the daemon's binary
/// (its loading and start-up, a few milliseconds of every container start). A spare whose
/// daemon is gone sees its stdin end and exits.
pub struct Spares {
    wanted: usize,
    idle: Mutex<Vec<Child>>,
    filling: AtomicBool,
}

impl Spares {
    /// Keeps `wanted` spares (0: every monitor is started for its container).
    pub fn new(wanted: usize) -> Arc<Spares> {
        Arc::new(Spares { wanted, idle: Mutex::new(Vec::new()), filling: AtomicBool::new(false) })
    }

    fn take(&self) -> Option<Child> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    /// Starts spares in the background until `wanted` wait (one filler at a time).
    fn refill(self: &Arc<Self>) {
        if self.wanted == 0 || self.filling.swap(true, Ordering::AcqRel) {
            return;
        }
        let spares = self.clone();
        tokio::spawn(async move {
            while spares.idle.lock().unwrap_or_else(|p| p.into_inner()).len() < spares.wanted {
                match start_spare() {
                    Ok(child) => spares.idle.lock().unwrap_or_else(|p| p.into_inner()).push(child),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot start a spare monitor: monitors start with their container");
                        break;
                    }
                }
            }
            spares.filling.store(false, Ordering::Release);
        });
    }
}

fn monitor_command() -> tokio::process::Command {
    let mut command = tokio::process::Command::new(crate::SELF_EXE);
    command.arg0("swapcri").arg(COMMAND).stdout(Stdio::piped());
    command
}

fn start_spare() -> std::io::Result<Child> {
    monitor_command().arg(SPARE_ARG).stdin(Stdio::piped()).stderr(Stdio::null()).spawn()
}

/// A spare with its job handed over, or None when it was gone (it is then reaped).
async fn hand_over(mut spare: Child, job: &SpareJob) -> Option<Child> {
    let mut line = serde_json::to_vec(job).ok()?;
    line.push(b'\n');
    let mut stdin = spare.stdin.take()?;
    let handed = stdin.write_all(&line).await.and(stdin.flush().await);
    drop(stdin);
    match handed {
        Ok(()) => Some(spare),
        Err(_) => {
            tokio::spawn(async move { spare.wait().await });
            None
        }
    }
}

/// Starts the monitor of CONFIG (a spare handed the job, else `swapcri monitor CONFIG`; in
/// its own session either way, so it outlives the daemon) and waits until it reports the
/// container created. Returns the monitor (pid + start time) and the container's init pid.
pub async fn spawn(
    spares: &Arc<Spares>,
    config: &Path,
    stderr_log: &Path,
    timeout: Duration,
) -> Result<(ProcessRef, i32), MonitorError> {
    let job = SpareJob { config: config.to_path_buf(), stderr_log: stderr_log.to_path_buf() };
    let handed = match spares.take() {
        Some(spare) => hand_over(spare, &job).await,
        None => None,
    };
    let mut child = match handed {
        Some(child) => child,
        None => {
            let stderr =
                std::fs::OpenOptions::new().create(true).append(true).open(stderr_log).map_err(MonitorError::Spawn)?;
            monitor_command().arg(config).stdin(Stdio::null()).stderr(stderr).spawn().map_err(MonitorError::Spawn)?
        }
    };
    let stdout = child.stdout.take().expect("piped");
    // The daemon reaps its monitors; after a daemon restart they belong to init.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let report = read_report(stdout, stderr_log, timeout).await;
    spares.refill();
    report
}

async fn read_report(
    stdout: tokio::process::ChildStdout,
    stderr_log: &Path,
    timeout: Duration,
) -> Result<(ProcessRef, i32), MonitorError> {
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
