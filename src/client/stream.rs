//! Interactive sessions of `swapcri client` (exec -i/-t, attach, port-forward) over the
//! daemon's streaming server, speaking WebSocket with `v5.channel.k8s.io` like
//! `crictl --transport websocket`.

use std::os::fd::{AsFd, AsRawFd};

use anyhow::{anyhow, bail, Context};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::streaming::terminal::TerminalSize;

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// Opens the WebSocket for a URL the daemon handed out.
async fn open(url: &str, protocol: &str) -> anyhow::Result<Ws> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("{url}: only plain-HTTP streaming URLs are supported here (the server uses TLS; use crictl)");
    };
    let host = rest.split('/').next().unwrap_or_default().to_string();
    let mut request = format!("ws://{rest}").into_client_request()?;
    request.headers_mut().insert("Sec-WebSocket-Protocol", protocol.parse()?);
    let tcp = tokio::net::TcpStream::connect(&host).await.with_context(|| format!("connecting to {host}"))?;
    let (ws, _) = tokio_tungstenite::client_async(request, tcp).await.context("WebSocket upgrade")?;
    Ok(ws)
}

/// The local terminal in raw mode for the session's length.
struct RawTerminal {
    saved: nix::sys::termios::Termios,
}

impl RawTerminal {
    fn enter() -> Option<RawTerminal> {
        use nix::sys::termios;
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok()?;
        crate::streaming::terminal::make_raw(stdin.as_fd()).ok()?;
        Some(RawTerminal { saved })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        let stdin = std::io::stdin();
        let _ = nix::sys::termios::tcsetattr(stdin.as_fd(), nix::sys::termios::SetArg::TCSANOW, &self.saved);
    }
}

/// The size of the local terminal, if stdout is one.
fn local_size() -> Option<TerminalSize> {
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: a valid fd and a winsize to fill.
    let rc = unsafe { libc::ioctl(std::io::stdout().as_raw_fd(), libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(TerminalSize { width: ws.ws_col, height: ws.ws_row })
}

fn message(channel: u8, data: &[u8]) -> Message {
    let mut bytes = Vec::with_capacity(data.len() + 1);
    bytes.push(channel);
    bytes.extend_from_slice(data);
    Message::Binary(bytes.into())
}

/// The exit code in the error channel's Status (`Success`, or `NonZeroExitCode`).
pub fn exit_code(status: &[u8]) -> anyhow::Result<i32> {
    if status.is_empty() {
        bail!("the session ended without a status");
    }
    let status: serde_json::Value = serde_json::from_slice(status).context("the session's status")?;
    if status["status"] == "Success" {
        return Ok(0);
    }
    if status["reason"] == "NonZeroExitCode" {
        if let Some(code) = status["details"]["causes"][0]["message"].as_str().and_then(|c| c.parse().ok()) {
            return Ok(code);
        }
    }
    Err(anyhow!("{}", status["message"].as_str().unwrap_or("the session failed")))
}

/// Runs an exec or attach session on the local stdio until it ends; the command's exit code.
pub async fn session(url: &str, stdin: bool, tty: bool) -> anyhow::Result<i32> {
    let ws = open(url, "v5.channel.k8s.io").await?;
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Message>(64);
    let _raw = if tty && stdin { RawTerminal::enter() } else { None };
    let sender = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            if sink.send(m).await.is_err() {
                break;
            }
        }
    });
    let mut tasks = Vec::new();
    if tty {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok();
            loop {
                if let Some(size) = local_size() {
                    let json = serde_json::to_vec(&size).unwrap_or_default();
                    if tx.send(message(RESIZE, &json)).await.is_err() {
                        break;
                    }
                }
                match winch.as_mut() {
                    Some(w) => {
                        if w.recv().await.is_none() {
                            break;
                        }
                    }
                    None => break,
                }
            }
        }));
    }
    if stdin {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut input = tokio::io::stdin();
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match input.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(message(STDIN, &buf[..n])).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(message(CLOSE, &[STDIN])).await;
        }));
    }
    drop(tx);
    let (mut out, mut err) = (tokio::io::stdout(), tokio::io::stderr());
    let mut status = Vec::new();
    while let Some(m) = source.next().await {
        let data = match m {
            Ok(Message::Binary(d)) => d,
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        match data.split_first() {
            Some((&STDOUT, rest)) => {
                out.write_all(rest).await?;
                out.flush().await?;
            }
            Some((&STDERR, rest)) => {
                err.write_all(rest).await?;
                err.flush().await?;
            }
            Some((&ERROR, rest)) => status.extend_from_slice(rest),
            _ => {}
        }
    }
    for t in tasks {
        t.abort();
    }
    sender.abort();
    exit_code(&status)
}

/// Joins one local connection to `port` in the pod through a fresh port-forward URL.
pub async fn forward_connection(url: &str, port: u16, local: tokio::net::TcpStream) -> anyhow::Result<()> {
    let url = format!("{url}?port={port}");
    let ws = open(&url, "v4.channel.k8s.io").await?;
    let (mut sink, mut source) = ws.split();
    let (mut from_local, mut to_local) = local.into_split();
    let upload = async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match from_local.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if sink.send(message(0, &buf[..n])).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = sink.close().await;
    };
    let download = async move {
        // Each channel starts with the port number (two bytes) before any data.
        let mut prefixed = [false, false];
        let mut error = Vec::new();
        while let Some(Ok(m)) = source.next().await {
            let Message::Binary(data) = m else { continue };
            let Some((&channel, rest)) = data.split_first() else { continue };
            let ch = usize::from(channel.min(1));
            let rest = if !prefixed[ch] {
                prefixed[ch] = true;
                rest.get(2..).unwrap_or_default()
            } else {
                rest
            };
            if channel == 0 {
                if to_local.write_all(rest).await.is_err() {
                    break;
                }
            } else {
                error.extend_from_slice(rest);
            }
        }
        let _ = to_local.shutdown().await;
        error
    };
    let (_, error) = tokio::join!(upload, download);
    if !error.is_empty() {
        bail!("{}", String::from_utf8_lossy(&error));
    }
    Ok(())
}
