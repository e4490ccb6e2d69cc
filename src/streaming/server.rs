//! The HTTP side: single-use, expiring URLs handed out by the Exec, Attach and PortForward
//! RPCs, and the upgrade of a request for one of them to SPDY/3.1 or WebSocket.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::attach::{self, AttachRequest};
use super::channels::{Channels, Wants};
use super::error::StreamError;
use super::exec::{self, ExecRequest};
use super::idle::IdleTimeout;
use super::portforward;
use super::session::{self, Limits};
use super::websocket::Framing;
use crate::config::StreamingConfig;
use crate::metrics::StreamingMetrics;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

const PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";

/// What a URL was issued for.
#[derive(Debug, Clone)]
pub enum Pending {
    Exec(ExecRequest),
    Attach(AttachRequest),
    /// `ports`: what the request named; a WebSocket client may name them in the URL instead.
    PortForward {
        netns: PathBuf,
        ports: Vec<u16>,
    },
}

impl Pending {
    fn path(&self) -> &'static str {
        match self {
            Pending::Exec(_) => "exec",
            Pending::Attach(_) => "attach",
            Pending::PortForward { .. } => "portforward",
        }
    }

    fn wants(&self) -> Wants {
        match self {
            Pending::Exec(r) => Wants { stdin: r.stdin, stdout: r.stdout, stderr: r.stderr, tty: r.tty },
            Pending::Attach(r) => Wants { stdin: r.stdin, stdout: r.stdout, stderr: r.stderr, tty: r.tty },
            Pending::PortForward { .. } => Wants { stdin: false, stdout: false, stderr: false, tty: false },
        }
    }

    fn protocols(&self, websocket: bool) -> Protocols {
        let (preferred, unnamed) = match (self, websocket) {
            (Pending::PortForward { .. }, false) => (&[portforward::PROTOCOL][..], portforward::PROTOCOL),
            (Pending::PortForward { .. }, true) => {
                (portforward::WEBSOCKET_PROTOCOLS, portforward::WEBSOCKET_PROTOCOLS[0])
            }
            (_, false) => (exec::PROTOCOLS, exec::V1),
            (_, true) => (exec::WEBSOCKET_PROTOCOLS, exec::V1),
        };
        Protocols { preferred, unnamed }
    }

    /// Runs the session over its channels.
    async fn serve_channels(self, channels: Channels) {
        match self {
            Pending::Exec(req) => exec::serve(channels, req).await,
            Pending::Attach(req) => attach::serve(channels, req).await,
            Pending::PortForward { .. } => {}
        }
    }
}

/// The sub-protocols a kind of session speaks over one transport.
struct Protocols {
    /// Newest first; binary before base64 of the same version.
    preferred: &'static [&'static str],
    /// What a client that names no protocol speaks.
    unnamed: &'static str,
}

/// The protocol to speak: the first we prefer among those offered, or, when the client
/// offered none, the one such a client speaks.
fn negotiate(offered: &[String], supported: &Protocols) -> Result<&'static str, StreamError> {
    if offered.is_empty() {
        return Ok(supported.unnamed);
    }
    supported.preferred.iter().copied().find(|p| offered.iter().any(|o| o == p)).ok_or_else(|| {
        StreamError::Protocol(format!(
            "unable to negotiate a protocol: client offered {offered:?}, server supports {:?}",
            supported.preferred
        ))
    })
}

fn header_list(req: &Request<Incoming>, name: &str) -> Vec<String> {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .filter(|p| !p.is_empty())
        .collect()
}

/// `port` query parameters (`?port=80&port=8080` or `?port=80,8080`; the API server's
/// spelling `ports` too).
fn query_ports(req: &Request<Incoming>) -> Result<Vec<u16>, StreamError> {
    let mut ports = Vec::new();
    for pair in req.uri().query().unwrap_or_default().split('&') {
        let Some(value) = pair.strip_prefix("port=").or_else(|| pair.strip_prefix("ports=")) else { continue };
        let value = value.replace("%2C", ",").replace("%2c", ",");
        for p in value.split(',').filter(|p| !p.is_empty()) {
            match p.parse::<u16>() {
                Ok(port) if port > 0 => ports.push(port),
                _ => return Err(StreamError::Protocol(format!("{p:?} is not a port"))),
            }
        }
    }
    Ok(ports)
}

pub struct StreamingServer {
    base_url: String,
    ttl: Duration,
    idle_timeout: Option<Duration>,
    handshake_timeout: Duration,
    limits: Limits,
    /// One permit per connection, held from accept to the end of its session.
    connections: Arc<Semaphore>,
    metrics: StreamingMetrics,
    tokens: Mutex<HashMap<String, (Pending, Instant)>>,
}

impl StreamingServer {
    /// Binds the listener (port 0: an ephemeral port) and serves it in the background, over
    /// TLS when an acceptor is given.
    pub async fn start(
        config: &StreamingConfig,
        tls: Option<tokio_rustls::TlsAcceptor>,
        metrics: StreamingMetrics,
    ) -> std::io::Result<Arc<StreamingServer>> {
        let listener = tokio::net::TcpListener::bind(&config.address).await?;
        let bound = listener.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let server = Arc::new(StreamingServer {
            base_url: format!("{scheme}://{bound}"),
            ttl: Duration::from_secs(config.token_ttl_seconds),
            idle_timeout: Some(config.stream_idle_timeout_seconds).filter(|s| *s > 0).map(Duration::from_secs),
            handshake_timeout: Duration::from_secs(config.handshake_timeout_seconds),
            limits: Limits { max_frame: config.max_frame_bytes, max_buffered: config.max_buffered_bytes },
            connections: Arc::new(Semaphore::new(config.max_connections)),
            metrics,
            tokens: Mutex::default(),
        });
        tracing::info!(address = %bound, tls = tls.is_some(), "streaming server (exec, attach, port-forward) listening");
        let serving = server.clone();
        tokio::spawn(async move { serving.serve(listener, tls).await });
        Ok(server)
    }

    /// A fresh single-use URL for `pending`, valid for the token lifetime.
    pub fn issue(&self, pending: Pending) -> Result<String, StreamError> {
        let mut raw = [0u8; 24];
        getrandom::fill(&mut raw)
            .map_err(|e| StreamError::Io { what: "no randomness for a token".into(), source: e.into() })?;
        let token = hex::encode(raw);
        let url = format!("{}/{}/{token}", self.base_url, pending.path());
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        tokens.retain(|_, (_, issued)| now.duration_since(*issued) < self.ttl);
        tokens.insert(token, (pending, now));
        Ok(url)
    }

    /// Consumes a token: valid once, and only before it expires.
    fn redeem(&self, kind: &str, token: &str) -> Option<Pending> {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        let (pending, issued) = tokens.remove(token)?;
        (pending.path() == kind && issued.elapsed() < self.ttl).then_some(pending)
    }

    async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener, tls: Option<tokio_rustls::TlsAcceptor>) {
        loop {
            let (conn, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "streaming server accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(slot) = self.connections.clone().try_acquire_owned() else {
                // Closed at once: a flood of connections costs no memory and no task.
                self.metrics.refused();
                tracing::debug!(%peer, "streaming connection refused: streaming.max_connections reached");
                continue;
            };
            let slot = Arc::new(slot);
            let (server, tls) = (self.clone(), tls.clone());
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + server.handshake_timeout;
                match tls {
                    None => server.serve_connection(conn, peer, deadline, slot).await,
                    Some(tls) => match tokio::time::timeout_at(deadline, tls.accept(conn)).await {
                        Ok(Ok(conn)) => server.serve_connection(conn, peer, deadline, slot).await,
                        Ok(Err(e)) => tracing::info!(%peer, error = %e, "streaming TLS handshake failed"),
                        Err(_) => tracing::info!(%peer, "streaming TLS handshake timed out"),
                    },
                }
            });
        }
    }

    /// Serves the HTTP exchange, which must be over (answered, or upgraded and handed to
    /// its session) by `deadline`.
    async fn serve_connection<IO>(
        self: Arc<Self>,
        io: IO,
        peer: SocketAddr,
        deadline: tokio::time::Instant,
        slot: Arc<OwnedSemaphorePermit>,
    ) where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let service = hyper::service::service_fn(move |req| {
            let (server, slot) = (self.clone(), slot.clone());
            async move { Ok::<_, std::convert::Infallible>(server.handle(req, peer, slot)) }
        });
        // No keep-alive switch: it would turn the 101's `Connection: Upgrade` into `close`.
        // The deadline ends a kept-alive connection all the same.
        let conn = hyper::server::conn::http1::Builder::new()
            .max_buf_size(64 * 1024)
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        match tokio::time::timeout_at(deadline, conn).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "streaming connection ended"),
            Err(_) => {
                tracing::info!(%peer, "streaming request not completed in streaming.handshake_timeout_seconds; closed")
            }
        }
    }

    fn handle(
        &self,
        mut req: Request<Incoming>,
        peer: SocketAddr,
        slot: Arc<OwnedSemaphorePermit>,
    ) -> Response<Full<Bytes>> {
        let parts: Vec<&str> = req.uri().path().trim_matches('/').split('/').collect();
        let (kind, token) = match parts.as_slice() {
            [kind @ ("exec" | "attach" | "portforward"), token] => (*kind, *token),
            _ => return plain(StatusCode::NOT_FOUND, "not found"),
        };
        let Some(pending) = self.redeem(kind, token) else {
            tracing::info!(%peer, kind, "streaming request with an unknown, used or expired token");
            return plain(StatusCode::NOT_FOUND, "unknown, used or expired streaming token");
        };
        let upgrade = req.headers().get(UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if upgrade.eq_ignore_ascii_case("websocket") {
            return upgrade_websocket(req, pending, self.idle_timeout, self.limits, &self.metrics, slot);
        }
        if !upgrade.eq_ignore_ascii_case("SPDY/3.1") {
            return plain(StatusCode::BAD_REQUEST, "this endpoint needs Upgrade: SPDY/3.1 or websocket");
        }
        let protocol = match negotiate(&header_list(&req, PROTOCOL_HEADER), &pending.protocols(false)) {
            Ok(p) => p,
            Err(e) => return plain(StatusCode::FORBIDDEN, &e.to_string()),
        };
        let upgraded = hyper::upgrade::on(&mut req);
        let (idle, limits) = (self.idle_timeout, self.limits);
        let active = self.metrics.session(pending.path(), "spdy");
        tokio::spawn(async move {
            let (_active, _slot) = (active, slot);
            let Some(io) = take_over(upgraded, idle).await else { return };
            let session = session::start(io, limits);
            if let Pending::PortForward { netns, .. } = pending {
                return portforward::serve(session, netns).await;
            }
            match Channels::from_spdy(session, pending.wants(), protocol).await {
                Ok(channels) => pending.serve_channels(channels).await,
                Err(e) => tracing::warn!("streaming session: {e}"),
            }
        });
        let mut resp = Response::new(Full::new(Bytes::new()));
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = resp.headers_mut();
        headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        headers.insert(PROTOCOL_HEADER, HeaderValue::from_static(protocol));
        resp
    }
}

/// The WebSocket handshake (RFC 6455) with the channel protocol as sub-protocol.
fn upgrade_websocket(
    mut req: Request<Incoming>,
    pending: Pending,
    idle_timeout: Option<Duration>,
    limits: Limits,
    metrics: &StreamingMetrics,
    slot: Arc<OwnedSemaphorePermit>,
) -> Response<Full<Bytes>> {
    let Some(key) = req.headers().get("Sec-WebSocket-Key").map(|k| k.as_bytes().to_vec()) else {
        return plain(StatusCode::BAD_REQUEST, "a WebSocket upgrade needs Sec-WebSocket-Key");
    };
    let offered = header_list(&req, "Sec-WebSocket-Protocol");
    let protocol = match negotiate(&offered, &pending.protocols(true)) {
        Ok(p) => p,
        Err(e) => return plain(StatusCode::FORBIDDEN, &e.to_string()),
    };
    let framing = Framing::of(protocol);
    let pending = match pending {
        Pending::PortForward { netns, ports } => {
            let ports = match query_ports(&req) {
                Ok(q) if !q.is_empty() => q,
                Ok(_) => ports,
                Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
            };
            if ports.is_empty() {
                return plain(
                    StatusCode::BAD_REQUEST,
                    "port-forward over WebSocket needs ports (query parameter port)",
                );
            }
            let most = portforward::max_websocket_ports(framing);
            if ports.len() > most {
                return plain(StatusCode::BAD_REQUEST, &format!("at most {most} ports per session over {protocol}"));
            }
            Pending::PortForward { netns, ports }
        }
        other => other,
    };
    let active = metrics.session(pending.path(), "websocket");
    let upgraded = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let (_active, _slot) = (active, slot);
        let Some(io) = take_over(upgraded, idle_timeout).await else { return };
        if let Pending::PortForward { netns, ports } = pending {
            return portforward::serve_websocket(io, framing, netns, ports, limits).await;
        }
        let channels = Channels::from_websocket(io, pending.wants(), protocol, limits).await;
        pending.serve_channels(channels).await;
    });
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(&key);
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = resp.headers_mut();
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        headers.insert("Sec-WebSocket-Accept", v);
    }
    if !offered.is_empty() {
        headers.insert("Sec-WebSocket-Protocol", HeaderValue::from_static(protocol));
    }
    resp
}

/// The connection once the 101 answer went out, closed when idle for `idle_timeout`.
async fn take_over(
    upgrade: hyper::upgrade::OnUpgrade,
    idle_timeout: Option<Duration>,
) -> Option<IdleTimeout<TokioIo<hyper::upgrade::Upgraded>>> {
    match upgrade.await {
        Ok(io) => Some(IdleTimeout::new(TokioIo::new(io), idle_timeout)),
        Err(e) => {
            tracing::warn!(error = %e, "streaming upgrade failed");
            None
        }
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(text.to_string())));
    *resp.status_mut() = status;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(protocols: &[&str]) -> Vec<String> {
        protocols.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn negotiation_prefers_the_newest_binary_protocol() {
        let attach = || {
            let (container_id, socket) = (String::new(), PathBuf::new());
            Pending::Attach(AttachRequest {
                container_id,
                socket,
                tty: false,
                stdin: false,
                stdout: true,
                stderr: false,
            })
        };
        let (exec, spdy) = (attach().protocols(true), attach().protocols(false));
        let forward = Pending::PortForward { netns: PathBuf::new(), ports: vec![] }.protocols(true);
        for (supported, offered, expected) in [
            (&exec, &[][..], Ok("channel.k8s.io")),
            (&exec, &["v4.base64.channel.k8s.io", "v4.channel.k8s.io"][..], Ok("v4.channel.k8s.io")),
            (&exec, &["base64.channel.k8s.io", "v4.base64.channel.k8s.io"][..], Ok("v4.base64.channel.k8s.io")),
            (&exec, &["base64.channel.k8s.io"][..], Ok("base64.channel.k8s.io")),
            (&exec, &["channel.k8s.io", "v5.channel.k8s.io"][..], Ok("v5.channel.k8s.io")),
            (&exec, &["v9.channel.k8s.io"][..], Err(())),
            (&forward, &[][..], Ok("v4.channel.k8s.io")),
            (&forward, &["v4.base64.channel.k8s.io"][..], Ok("v4.base64.channel.k8s.io")),
            (&forward, &["v5.channel.k8s.io"][..], Err(())),
            (&spdy, &[][..], Ok("channel.k8s.io")),
            (&spdy, &["v4.base64.channel.k8s.io"][..], Err(())),
        ] {
            let got = negotiate(&offer(offered), supported).map_err(|_| ());
            assert_eq!(got, expected, "{offered:?} against {:?}", supported.preferred);
        }
    }
}
