//! runc driven through its command line.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::{kill_tree, ExecOutput, OciError, OciRuntime, RuntimeState};

#[derive(Debug, Clone)]
pub struct Runc {
    pub binary: PathBuf,
    pub root: PathBuf,
}

impl Runc {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--root").arg(&self.root);
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        cmd
    }

    async fn run(
        &self,
        command: &'static str,
        id: &str,
        args: &[&str],
        stdin: Option<&[u8]>,
    ) -> Result<Vec<u8>, OciError> {
        let mut cmd = self.command();
        cmd.arg(command).args(args).arg(id);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().map_err(|source| OciError::Spawn { binary: self.binary.clone(), source })?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(input).await;
        }
        let out =
            child.wait_with_output().await.map_err(|source| OciError::Spawn { binary: self.binary.clone(), source })?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(OciError::Failed { command, id: id.to_string(), message: runc_message(&out.stderr) })
        }
    }
}

/// runc logs JSON or logfmt lines to stderr; keep the last message.
pub fn runc_message(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    if let Some(panic) = text.lines().find(|l| l.starts_with("panic:")) {
        return panic.to_string();
    }
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(last) {
        if let Some(msg) = v.get("msg").and_then(|m| m.as_str()) {
            return msg.to_string();
        }
    }
    last.strip_prefix("time=")
        .and_then(|l| l.split_once("msg="))
        .map(|(_, m)| m.trim_matches('"').to_string())
        .unwrap_or_else(|| last.to_string())
}

#[async_trait]
impl OciRuntime for Runc {
    async fn start(&self, id: &str) -> Result<(), OciError> {
        self.run("start", id, &[], None).await.map(drop)
    }

    async fn kill(&self, id: &str, signal: &str, all: bool) -> Result<(), OciError> {
        let args: &[&str] = if all { &["--all"] } else { &[] };
        let mut cmd = self.command();
        cmd.arg("kill").args(args).arg(id).arg(signal).stdout(Stdio::null()).stderr(Stdio::piped());
        let out = cmd.output().await.map_err(|source| OciError::Spawn { binary: self.binary.clone(), source })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(OciError::Failed { command: "kill", id: id.to_string(), message: runc_message(&out.stderr) })
        }
    }

    async fn delete(&self, id: &str) -> Result<(), OciError> {
        self.run("delete", id, &["--force"], None).await.map(drop)
    }

    async fn state(&self, id: &str) -> Result<Option<RuntimeState>, OciError> {
        match self.run("state", id, &[], None).await {
            Ok(out) => serde_json::from_slice(&out).map(Some).map_err(|e| OciError::Failed {
                command: "state",
                id: id.to_string(),
                message: e.to_string(),
            }),
            Err(OciError::Failed { message, .. }) if message.contains("does not exist") => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn update(&self, id: &str, resources_json: &[u8]) -> Result<(), OciError> {
        self.run("update", id, &["--resources", "-"], Some(resources_json)).await.map(drop)
    }

    async fn exec(
        &self,
        id: &str,
        process_json: &[u8],
        timeout: Option<Duration>,
        cap: usize,
    ) -> Result<ExecOutput, OciError> {
        let dir = tempfile::tempdir().map_err(|source| OciError::Spawn { binary: self.binary.clone(), source })?;
        let process = dir.path().join("process.json");
        let pid_file = dir.path().join("pid");
        std::fs::write(&process, process_json)
            .map_err(|source| OciError::Spawn { binary: self.binary.clone(), source })?;
        let mut cmd = self.command();
        cmd.arg("exec").arg("--process").arg(&process).arg("--pid-file").arg(&pid_file).arg(id);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|source| OciError::Spawn { binary: self.binary.clone(), source })?;
        let stdout = tokio::spawn(read_capped(child.stdout.take().expect("piped"), cap));
        let stderr = tokio::spawn(read_capped(child.stderr.take().expect("piped"), cap));
        let status = match timeout {
            Some(t) => match tokio::time::timeout(t, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    if let Some(pid) = std::fs::read_to_string(&pid_file).ok().and_then(|s| s.trim().parse().ok()) {
                        kill_tree(pid);
                    }
                    let _ = child.kill().await;
                    return Err(OciError::Timeout(t));
                }
            },
            None => child.wait().await,
        }
        .map_err(|source| OciError::Spawn { binary: self.binary.clone(), source })?;
        let stdout = stdout.await.unwrap_or_default();
        let stderr = stderr.await.unwrap_or_default();
        let exit_code = super::exit_code(status);
        // runc itself failing (no such container, bad process) is an error, not an exit code.
        if exit_code != 0 && !pid_file.exists() {
            return Err(OciError::Failed { command: "exec", id: id.to_string(), message: runc_message(&stderr) });
        }
        Ok(ExecOutput { stdout, stderr, exit_code })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runc_messages() {
        let cases = [
            (
                &b"{\"level\":\"error\",\"msg\":\"container does not exist\",\"time\":\"x\"}\n"[..],
                "container does not exist",
            ),
            (b"time=\"2024\" level=error msg=\"container not running\"\n", "container not running"),
            (b"plain failure\n\n", "plain failure"),
        ];
        for (input, expected) in cases {
            assert_eq!(runc_message(input), expected);
        }
    }
}
