//! Interactive sessions of `swapcri client` (exec -i/-t, attach, port-forward) over the
//! daemon's streaming server, speaking WebSocket with `v5.channel.k8s.io` like
//! `crictl --transport websocket`.

use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use futures::{SinkExt, StreamExt};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::TlsConnector;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::monitor::terminal::TerminalSize;
use crate::streaming::tls;

/// Any connection a WebSocket can run over: plain TCP, or TLS for `https://` URLs.
trait Transport: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Transport for T {}

type Ws = tokio_tungstenite::WebSocketStream<Box<dyn Transport>>;

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// Opens WebSockets to the URLs the daemon hands out. An `https://` URL (a daemon with
/// operator certificates) is checked against `ca_file` (PEM), or else the system's trusted
/// certificates.
#[derive(Clone, Default)]
pub struct Connector {
    ca_file: Option<PathBuf>,
    /// Built on the first `https://` URL, then shared by every connection.
    tls: Arc<tokio::sync::OnceCell<TlsConnector>>,
}

impl Connector {
    pub fn new(ca_file: Option<PathBuf>) -> Connector {
        Connector { ca_file, tls: Arc::default() }
    }

    async fn open(&self, url: &str, protocol: &str) -> anyhow::Result<Ws> {
        let uri: hyper::Uri = url.parse().with_context(|| format!("{url}: not a URL"))?;
        let secure = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => bail!("{url}: not an http or https URL"),
        };
        let (Some(authority), Some(host)) = (uri.authority(), uri.host()) else { bail!("{url}: no host") };
        let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        // The trusted certificates are settled before anything goes on the network.
        let tls = match secure {
            true => Some(self.tls.get_or_try_init(|| async { self.tls_connector() }).await?),
            false => None,
        };
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .with_context(|| format!("connecting to {host}:{port}"))?;
        let conn: Box<dyn Transport> = match tls {
            Some(tls) => {
                let name = ServerName::try_from(host.clone()).with_context(|| format!("{host}: not a server name"))?;
                Box::new(tls.connect(name, tcp).await.with_context(|| format!("TLS with {host}:{port}"))?)
            }
            None => Box::new(tcp),
        };
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut request = format!("{}://{authority}{path}", if secure { "wss" } else { "ws" }).into_client_request()?;
        request.headers_mut().insert("Sec-WebSocket-Protocol", protocol.parse()?);
        let (ws, _) = tokio_tungstenite::client_async(request, conn).await.context("WebSocket upgrade")?;
        Ok(ws)
    }

    fn tls_connector(&self) -> anyhow::Result<TlsConnector> {
        let mut roots = RootCertStore::empty();
        match &self.ca_file {
            Some(path) => {
                for cert in tls::read_certificates(path)? {
                    roots.add(cert).with_context(|| format!("{}: not a usable CA certificate", path.display()))?;
                }
            }
            None => {
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
                if roots.is_empty() {
                    bail!("no trusted certificates on this system for an https streaming URL: pass --streaming-ca");
                }
            }
        }
        Ok(tls::connector(roots)?)
    }
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
        crate::monitor::terminal::make_raw(stdin.as_fd()).ok()?;
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
pub async fn session(connector: &Connector, url: &str, stdin: bool, tty: bool) -> anyhow::Result<i32> {
    let ws = connector.open(url, "v5.channel.k8s.io").await?;
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
        tasks.push(tokio::spawn(send_sizes(tx.clone())));
    }
    if stdin {
        tasks.push(tokio::spawn(send_stdin(tx.clone())));
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

/// Sends the local terminal's size now and on every SIGWINCH.
async fn send_sizes(tx: tokio::sync::mpsc::Sender<Message>) {
    let mut winch = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok();
    loop {
        if let Some(size) = local_size() {
            let json = serde_json::to_vec(&size).unwrap_or_default();
            if tx.send(message(RESIZE, &json)).await.is_err() {
                return;
            }
        }
        let Some(w) = winch.as_mut() else { return };
        if w.recv().await.is_none() {
            return;
        }
    }
}

/// Sends local stdin, then closes the remote stdin at its end.
async fn send_stdin(tx: tokio::sync::mpsc::Sender<Message>) {
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
}

/// Joins one local connection to `port` in the pod through a fresh port-forward URL.
pub async fn forward_connection(
    connector: &Connector,
    url: &str,
    port: u16,
    local: tokio::net::TcpStream,
) -> anyhow::Result<()> {
    let url = format!("{url}?port={port}");
    let ws = connector.open(&url, "v4.channel.k8s.io").await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn open_error(connector: &Connector, url: &str) -> String {
        match connector.open(url, "v5.channel.k8s.io").await {
            Ok(_) => panic!("{url}: opened"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[tokio::test]
    async fn urls_that_are_not_streaming_urls_are_refused() {
        let connector = Connector::default();
        for (url, expected) in [
            ("ftp://127.0.0.1:1/exec/x", "not an http or https URL"),
            ("/exec/x", "not an http or https URL"),
            ("http:///exec/x", "not a URL"),
        ] {
            let err = open_error(&connector, url).await;
            assert!(err.contains(expected), "{url}: {err}");
        }
    }

    #[tokio::test]
    async fn a_ca_file_without_certificates_is_refused_before_connecting() {
        // Nobody listens there: an error about the file shows it was read before connecting.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let url = format!("https://{closed}/exec/x");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let err = open_error(&Connector::new(Some(empty)), &url).await;
        assert!(err.contains("no certificate in the file"), "{err}");
        let err = open_error(&Connector::new(Some(dir.path().join("missing.pem"))), &url).await;
        assert!(err.contains("missing.pem"), "{err}");
    }

    #[test]
    fn exit_codes_come_from_the_status() {
        let failed = br#"{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"7"}]}}"#;
        assert_eq!(exit_code(br#"{"status":"Success"}"#).unwrap(), 0);
        assert_eq!(exit_code(failed).unwrap(), 7);
        assert!(exit_code(br#"{"status":"Failure","message":"no such container"}"#)
            .unwrap_err()
            .to_string()
            .contains("no such container"));
        assert!(exit_code(b"").is_err());
    }
}
