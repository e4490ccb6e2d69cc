//! Attach over the remote-command protocol: the session is joined to the container's
//! monitor through its attach socket (see `monitor::attach`), so it reads the live output of
//! the container's own process and writes to its stdin.

use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::channels::{Channels, Input, Output};
use super::error::StreamError;
use super::exec;
use crate::monitor::attach::{self, Hello};
use crate::monitor::terminal::SizeDecoder;

/// What an Attach request asked for, kept until its URL is used.
#[derive(Debug, Clone)]
pub struct AttachRequest {
    pub container_id: String,
    pub socket: PathBuf,
    pub tty: bool,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// Serves one attach session until the container exits or the client leaves.
pub async fn serve(mut channels: Channels, req: AttachRequest) {
    let outcome = relay(&req, &mut channels).await;
    if let Err(e) = &outcome {
        tracing::warn!(container = %req.container_id, "attach failed: {e}");
    }
    exec::finish(channels, outcome.map(|()| 0)).await;
}

async fn relay(req: &AttachRequest, channels: &mut Channels) -> Result<(), StreamError> {
    let conn = tokio::net::UnixStream::connect(&req.socket).await.map_err(|e| {
        StreamError::Unreachable(format!("the container's monitor does not answer on {}: {e}", req.socket.display()))
    })?;
    let (mut from_monitor, mut to_monitor) = conn.into_split();
    let hello = Hello { stdin: req.stdin, stdout: channels.stdout.is_some(), stderr: channels.stderr.is_some() };
    let mut line = serde_json::to_vec(&hello).map_err(|e| StreamError::Protocol(e.to_string()))?;
    line.push(b'\n');
    to_monitor.write_all(&line).await.map_err(StreamError::io("the container's monitor"))?;
    let (stdin, resize) = (channels.stdin.take(), channels.resize.take());
    // Input runs until the session ends; the write half stays open so the monitor keeps
    // sending output after stdin ended.
    let input = tokio::spawn(async move {
        let _ = forward_input(stdin, resize, &mut to_monitor).await;
        std::future::pending::<()>().await;
        drop(to_monitor);
    });
    let (stdout, stderr) = (channels.stdout.clone(), channels.stderr.clone());
    let output = async move {
        let mut head = [0u8; 5];
        loop {
            if from_monitor.read_exact(&mut head).await.is_err() {
                break; // the container exited and its output is all here
            }
            let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
            if len > attach::MAX_FRAME {
                break;
            }
            let mut payload = vec![0u8; len];
            if from_monitor.read_exact(&mut payload).await.is_err() {
                break;
            }
            let target = match head[0] {
                attach::OUT_STDOUT => &stdout,
                attach::OUT_STDERR => &stderr,
                _ => continue,
            };
            if let Some(out) = target {
                if !out.write(&payload).await {
                    break;
                }
            }
        }
    };
    tokio::select! {
        _ = output => {}
        _ = channels.gone() => {}
    }
    input.abort();
    for out in [&channels.stdout, &channels.stderr].into_iter().flatten() {
        Output::close(out).await;
    }
    Ok(())
}

/// Passes stdin (and its end) and terminal sizes to the monitor as frames.
async fn forward_input(
    mut stdin: Option<Input>,
    mut resize: Option<Input>,
    to: &mut tokio::net::unix::OwnedWriteHalf,
) -> std::io::Result<()> {
    let mut sizes = SizeDecoder::default();
    while stdin.is_some() || resize.is_some() {
        tokio::select! {
            chunk = async { stdin.as_mut()?.recv().await }, if stdin.is_some() => match chunk {
                Some(data) => to.write_all(&attach::frame(attach::IN_STDIN, &data)).await?,
                None => {
                    stdin = None;
                    to.write_all(&attach::frame(attach::IN_CLOSE_STDIN, &[])).await?;
                }
            },
            chunk = async { resize.as_mut()?.recv().await }, if resize.is_some() => match chunk {
                Some(data) => {
                    for size in sizes.feed(&data) {
                        to.write_all(&attach::frame(attach::IN_RESIZE, &attach::size_payload(size))).await?;
                    }
                }
                None => resize = None,
            },
        }
    }
    Ok(())
}
