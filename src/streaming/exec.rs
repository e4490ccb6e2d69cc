//! The remote-command protocol for exec: the command runs through the OCI runtime's exec,
//! with pipes or, when a terminal was asked for, a pty of ours that the runtime relays to the
//! container's terminal; its exit status ends the session on the error channel.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::channels::{Channels, Input};
use super::error::StreamError;
use crate::monitor::terminal::{self, SizeDecoder};
use crate::oci::OciRuntime;

/// How long a terminal session waits for the client's first size before starting.
const FIRST_SIZE_WAIT: Duration = Duration::from_millis(200);

/// After the command exits, output still in flight gets this long to arrive.
const DRAIN: Duration = Duration::from_secs(5);

/// What an Exec request asked for, kept until its URL is used.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub container_id: String,
    /// The runtime of the container's handler.
    pub runtime: Arc<dyn OciRuntime>,
    /// The OCI process to run (the container's, with the command and terminal set).
    pub process_json: Vec<u8>,
    pub tty: bool,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// Remote-command protocol versions over SPDY, newest first.
pub const PROTOCOLS: &[&str] = &["v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", V1];

/// Over WebSocket, v5 adds closing stdin; the base64 variants frame the same channels as text.
pub const WEBSOCKET_PROTOCOLS: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    V1,
    "base64.channel.k8s.io",
];

/// The first version: what a client that names no protocol speaks.
pub const V1: &str = "channel.k8s.io";

/// The exit report on the error channel: a Status object (v4, v5) or, before v4, text on
/// failure only.
pub fn status_message(protocol: &str, outcome: &Result<i32, StreamError>) -> Option<Vec<u8>> {
    let structured = matches!(protocol, "v4.channel.k8s.io" | "v4.base64.channel.k8s.io" | "v5.channel.k8s.io");
    match outcome {
        Ok(0) if structured => Some(json!({"metadata": {}, "status": "Success"}).to_string().into_bytes()),
        Ok(0) => None,
        Ok(code) if structured => Some(
            json!({
                "metadata": {},
                "status": "Failure",
                "message": format!("command terminated with non-zero exit code: exit status {code}"),
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
            })
            .to_string()
            .into_bytes(),
        ),
        Ok(code) => Some(format!("command terminated with non-zero exit code: exit status {code}").into_bytes()),
        Err(e) if structured => Some(
            json!({"metadata": {}, "status": "Failure", "message": e.to_string(), "reason": "InternalError"})
                .to_string()
                .into_bytes(),
        ),
        Err(e) => Some(e.to_string().into_bytes()),
    }
}

/// Writes the outcome on the error channel and ends the connection.
pub async fn finish(channels: Channels, outcome: Result<i32, StreamError>) {
    if let (Some(error), Some(message)) = (channels.error.as_ref(), status_message(channels.protocol, &outcome)) {
        error.write(&message).await;
        error.close().await;
    }
    channels.close().await;
}

/// Serves one exec session to its end.
pub async fn serve(mut channels: Channels, req: ExecRequest) {
    let outcome = if req.tty { run_tty(&req, &mut channels).await } else { run_piped(&req, &mut channels).await };
    if let Err(e) = &outcome {
        tracing::warn!(container = %req.container_id, "exec failed: {e}");
    }
    finish(channels, outcome).await;
}

/// Copies an input into a writer; dropping the writer at the end closes the process's stdin.
async fn feed(mut from: Input, mut to: impl AsyncWrite + Unpin) {
    while let Some(chunk) = from.recv().await {
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// The runtime's exec command, with the process written into `dir` (where the runtime also
/// writes the pid file).
fn exec_command(req: &ExecRequest, dir: &Path) -> Result<tokio::process::Command, StreamError> {
    let process = dir.join("process.json");
    crate::blocking::run(|| std::fs::write(&process, &req.process_json))
        .map_err(|e| StreamError::Io { what: "writing the exec process".into(), source: e })?;
    Ok(req.runtime.exec_command(&req.container_id, &process, dir))
}

/// The exit code, or the runtime's own failure when the command never started.
fn outcome(req: &ExecRequest, status: std::process::ExitStatus, dir: &Path, stderr: &[u8]) -> Result<i32, StreamError> {
    Ok(req.runtime.exec_outcome(&req.container_id, status, dir, stderr)?)
}

/// The exit of the runtime's exec. When the client leaves first, the command and the processes it
/// started are killed: nothing is left running for a session nobody can reach.
async fn wait_or_kill(
    child: &mut tokio::process::Child,
    channels: &Channels,
    dir: &Path,
) -> Result<std::process::ExitStatus, StreamError> {
    let kill_command = || {
        // The process the pid file names, never one that took its pid after it ended.
        let process = crate::process_tree::named_by(&dir.join("pid"));
        if let Some(process) = process {
            crate::process_tree::kill_tree(process);
        }
        process.is_some()
    };
    tokio::select! {
        status = child.wait() => status.map_err(StreamError::io("waiting for the exec")),
        _ = channels.gone() => {
            if !kill_command() {
                let _ = child.start_kill(); // still starting: stop the runtime, then whatever it started
            }
            let status = child.wait().await.map_err(StreamError::io("waiting for the exec"));
            kill_command();
            tracing::info!(pid_file = %dir.join("pid").display(), "exec client left; command killed");
            status
        }
    }
}

/// The container's end of the terminal: the command's stdin, once the runtime wrote its pid
/// (None when the runtime ended first or the terminal cannot be opened).
async fn container_terminal(child: &mut tokio::process::Child, dir: &Path) -> Option<std::fs::File> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if let Some(pid) = std::fs::read_to_string(dir.join("pid")).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
            return std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOCTTY)
                .open(format!("/proc/{pid}/fd/0"))
                .ok();
        }
        if !matches!(child.try_wait(), Ok(None)) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

fn work_dir() -> Result<tempfile::TempDir, StreamError> {
    tempfile::Builder::new().prefix("swapcri-exec-").tempdir().map_err(StreamError::io("exec work directory"))
}

/// Runs the command with pipes for its stdio.
async fn run_piped(req: &ExecRequest, channels: &mut Channels) -> Result<i32, StreamError> {
    let dir = work_dir()?;
    let mut cmd = exec_command(req, dir.path())?;
    cmd.stdin(if req.stdin { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(if req.stdout { Stdio::piped() } else { Stdio::null() });
    cmd.stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(StreamError::io(format!("running the exec of {}", req.runtime.name())))?;
    let runtime_stderr = child.stderr.take();
    let mut copies = Vec::new();
    if let (Some(input), Some(pipe)) = (channels.stdin.take(), child.stdin.take()) {
        tokio::spawn(feed(input, pipe));
    }
    if let (Some(output), Some(pipe)) = (channels.stdout.clone(), child.stdout.take()) {
        copies.push(tokio::spawn(output.copy_from(pipe)));
    }
    // The process's stderr reaches the client; what the runtime itself says is kept for the report.
    let stderr_output = channels.stderr.clone();
    let stderr_task = tokio::spawn(async move {
        let mut seen = Vec::new();
        if let Some(mut pipe) = runtime_stderr {
            let mut buf = vec![0u8; 32 * 1024];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if let Some(out) = &stderr_output {
                    out.write(&buf[..n]).await;
                }
                if seen.len() < 4096 {
                    seen.extend_from_slice(&buf[..n.min(4096)]);
                }
            }
        }
        if let Some(out) = stderr_output {
            out.close().await;
        }
        seen
    });
    let status = wait_or_kill(&mut child, channels, dir.path()).await?;
    for copy in copies {
        let _ = copy.await;
    }
    let stderr_seen = stderr_task.await.unwrap_or_default();
    outcome(req, status, dir.path(), &stderr_seen)
}

/// Runs the command on a terminal. runc gets a raw pty of ours as its stdio and relays it to
/// the container's terminal. Sizes go straight to the container's terminal (the command's
/// stdin, reached through /proc once runc wrote the pid), so the first size is in place
/// before the command reads its first keystroke; our pty gets them too, so runc's own
/// resizes agree.
async fn run_tty(req: &ExecRequest, channels: &mut Channels) -> Result<i32, StreamError> {
    let dir = work_dir()?;
    let mut cmd = exec_command(req, dir.path())?;
    let pty = nix::pty::openpty(None, None).map_err(StreamError::sys("opening a pty"))?;
    terminal::make_raw(pty.slave.as_fd()).map_err(StreamError::sys("making the pty raw"))?;
    let mut decoder = SizeDecoder::default();
    let mut first_size = None;
    if let Some(resize) = channels.resize.as_mut() {
        if let Ok(Some(chunk)) = tokio::time::timeout(FIRST_SIZE_WAIT, resize.recv()).await {
            first_size = decoder.feed(&chunk).pop();
        }
    }
    if let Some(size) = first_size {
        let _ = terminal::set_size(pty.master.as_fd(), size);
    }
    let slave = |fd: &OwnedFd| fd.try_clone().map(Stdio::from).map_err(StreamError::io("pty"));
    cmd.stdin(slave(&pty.slave)?).stdout(slave(&pty.slave)?).stderr(slave(&pty.slave)?);
    // SAFETY: setsid is async-signal-safe; runc gets a session of its own.
    unsafe {
        cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(std::io::Error::from));
    }
    let mut child = cmd.spawn().map_err(StreamError::io(format!("running the exec of {}", req.runtime.name())))?;
    drop(cmd); // our copies of the slave: the master reads EOF once the command's are gone
    drop(pty.slave);
    let master = pty.master;
    nix::fcntl::fcntl(&master, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK))
        .map_err(StreamError::sys("pty"))?;
    let dup = |fd: &OwnedFd| fd.try_clone().map_err(StreamError::io("pty"));
    let reader =
        tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(dup(&master)?).map_err(StreamError::io("pty"))?;
    let writer =
        tokio::net::unix::pipe::Sender::from_owned_fd_unchecked(dup(&master)?).map_err(StreamError::io("pty"))?;
    let container_tty = container_terminal(&mut child, dir.path()).await;
    if let (Some(tty), Some(size)) = (&container_tty, first_size) {
        let _ = terminal::set_size(tty.as_fd(), size);
    }
    let mut tasks = Vec::new();
    if let Some(input) = channels.stdin.take() {
        tasks.push(tokio::spawn(feed(input, writer)));
    }
    if let Some(mut resize) = channels.resize.take() {
        let master = dup(&master)?;
        let runc = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
        tasks.push(tokio::spawn(async move {
            while let Some(chunk) = resize.recv().await {
                for size in decoder.feed(&chunk) {
                    let _ = terminal::set_size(master.as_fd(), size);
                    match (&container_tty, runc) {
                        (Some(tty), _) => drop(terminal::set_size(tty.as_fd(), size)),
                        // Without the container's end, runc copies our size over on SIGWINCH.
                        (None, Some(runc)) => drop(nix::sys::signal::kill(runc, nix::sys::signal::Signal::SIGWINCH)),
                        (None, None) => {}
                    }
                }
            }
        }));
    }
    let copy = channels.stdout.clone().map(|out| tokio::spawn(out.copy_from(reader)));
    let status = wait_or_kill(&mut child, channels, dir.path()).await?;
    if let Some(copy) = copy {
        // A background process still holding the terminal does not keep the session open.
        let abort = copy.abort_handle();
        if tokio::time::timeout(DRAIN, copy).await.is_err() {
            abort.abort();
        }
    }
    for task in tasks {
        task.abort();
    }
    outcome(req, status, dir.path(), &[])
}
