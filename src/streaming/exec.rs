//! The remote-command protocol (exec) over a SPDY session: the client opens an error stream
//! and the stdin/stdout/stderr/resize streams it asked for; the command runs under
//! `runc exec` (with a pty when a terminal was asked for) and its exit status ends the
//! session on the error stream.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::session::{Session, Stream};

/// How long the client has to open the streams it asked for.
const STREAM_WAIT: Duration = Duration::from_secs(30);

/// What an Exec request asked for, kept until its URL is used.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub container_id: String,
    pub runc_binary: PathBuf,
    pub runc_root: PathBuf,
    /// The OCI process to run (the container's, with the command and terminal set).
    pub process_json: Vec<u8>,
    pub tty: bool,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// Remote-command protocol versions, newest first.
pub const PROTOCOLS: &[&str] = &["v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"];

#[derive(Default)]
struct Streams {
    error: Option<Stream>,
    stdin: Option<Stream>,
    stdout: Option<Stream>,
    stderr: Option<Stream>,
    resize: Option<Stream>,
}

impl Streams {
    fn complete(&self, req: &ExecRequest, resize_expected: bool) -> bool {
        self.error.is_some()
            && (!req.stdin || self.stdin.is_some())
            && (!req.stdout || self.stdout.is_some())
            && (!req.stderr || req.tty || self.stderr.is_some())
            && (!resize_expected || self.resize.is_some())
    }
}

async fn gather(session: &mut Session, req: &ExecRequest, protocol: &str) -> Result<Streams, String> {
    let resize_expected = req.tty && matches!(protocol, "v4.channel.k8s.io" | "v3.channel.k8s.io");
    let mut streams = Streams::default();
    let deadline = tokio::time::Instant::now() + STREAM_WAIT;
    while !streams.complete(req, resize_expected) {
        let stream = match tokio::time::timeout_at(deadline, session.accept()).await {
            Ok(Some(s)) => s,
            Ok(None) => return Err("the client closed the connection".into()),
            Err(_) => return Err("timed out waiting for the client's streams".into()),
        };
        let slot = match stream.header("streamType") {
            Some("error") => &mut streams.error,
            Some("stdin") => &mut streams.stdin,
            Some("stdout") => &mut streams.stdout,
            Some("stderr") => &mut streams.stderr,
            Some("resize") => &mut streams.resize,
            other => return Err(format!("unexpected stream type {other:?}")),
        };
        *slot = Some(stream);
    }
    Ok(streams)
}

/// The exit report on the error stream: a Status object (v4) or, before v4, text on failure.
fn status_message(protocol: &str, outcome: &Result<i32, String>) -> Option<Vec<u8>> {
    let v4 = protocol == "v4.channel.k8s.io";
    match outcome {
        Ok(0) if v4 => Some(json!({"metadata": {}, "status": "Success"}).to_string().into_bytes()),
        Ok(0) => None,
        Ok(code) if v4 => Some(
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
        Err(e) if v4 => Some(
            json!({"metadata": {}, "status": "Failure", "message": e, "reason": "InternalError"})
                .to_string()
                .into_bytes(),
        ),
        Err(e) => Some(e.clone().into_bytes()),
    }
}

/// Serves one exec session to its end.
pub async fn serve(mut session: Session, protocol: &str, req: ExecRequest) {
    let streams = match gather(&mut session, &req, protocol).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(container = %req.container_id, "exec session: {e}");
            session.close().await;
            return;
        }
    };
    let error = streams.error.as_ref().map(Stream::writer);
    let outcome = run(&req, streams).await;
    if let Err(e) = &outcome {
        tracing::warn!(container = %req.container_id, "exec failed: {e}");
    }
    if let (Some(error), Some(message)) = (error, status_message(protocol, &outcome)) {
        error.write(&message).await;
        error.close().await;
    }
    session.close().await;
}

/// Copies a stream into a writer; dropping the writer at the end closes the process's stdin.
async fn feed(mut from: Stream, mut to: impl AsyncWrite + Unpin) {
    while let Some(chunk) = from.recv().await {
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Runs the command and connects its stdio; its exit code, or why it could not run.
async fn run(req: &ExecRequest, mut streams: Streams) -> Result<i32, String> {
    let dir = tempfile::Builder::new().prefix("swapcri-exec-").tempdir().map_err(|e| e.to_string())?;
    let process = dir.path().join("process.json");
    let pid_file = dir.path().join("pid");
    std::fs::write(&process, &req.process_json).map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new(&req.runc_binary);
    cmd.arg("--root").arg(&req.runc_root).arg("exec").arg("--process").arg(&process);
    cmd.arg("--pid-file").arg(&pid_file).kill_on_drop(true);
    // Terminals are refused before a URL is issued (see PodService::exec_stream).
    cmd.stdin(if req.stdin { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(if req.stdout { Stdio::piped() } else { Stdio::null() });
    cmd.stderr(Stdio::piped());
    cmd.arg(&req.container_id);
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {}: {e}", req.runc_binary.display()))?;
    let runc_stderr = child.stderr.take();
    let mut copies = Vec::new();
    if let (Some(stream), Some(pipe)) = (streams.stdin.take(), child.stdin.take()) {
        tokio::spawn(feed(stream, pipe));
    }
    if let (Some(stream), Some(pipe)) = (streams.stdout.take(), child.stdout.take()) {
        copies.push(tokio::spawn(stream.writer().copy_from(pipe)));
    }
    // The process's stderr reaches the client; runc's own errors go to the error stream.
    let stderr_writer = streams.stderr.as_ref().map(Stream::writer);
    let stderr_task = tokio::spawn(async move {
        let mut seen = Vec::new();
        if let Some(mut pipe) = runc_stderr {
            let mut buf = vec![0u8; 32 * 1024];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if let Some(w) = &stderr_writer {
                    w.write(&buf[..n]).await;
                }
                if seen.len() < 4096 {
                    seen.extend_from_slice(&buf[..n.min(4096)]);
                }
            }
        }
        if let Some(w) = stderr_writer {
            w.close().await;
        }
        seen
    });
    let status = child.wait().await.map_err(|e| e.to_string())?;
    for copy in copies {
        let _ = copy.await;
    }
    let stderr_seen = stderr_task.await.unwrap_or_default();
    let code = crate::oci::exit_code(status);
    if code != 0 && !pid_file.exists() {
        return Err(format!("runc exec failed: {}", crate::oci::runc_message_public(&stderr_seen)));
    }
    Ok(code)
}
