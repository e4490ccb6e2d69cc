//! The HTTP side: single-use, expiring URLs handed out by the Exec and PortForward RPCs, and
//! the upgrade of a request for one of them to SPDY/3.1.

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

use super::exec::{self, ExecRequest};
use super::portforward;
use super::session;

const PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";

/// What a URL was issued for.
#[derive(Debug, Clone)]
pub enum Pending {
    Exec(ExecRequest),
    PortForward { netns: PathBuf },
}

impl Pending {
    fn path(&self) -> &'static str {
        match self {
            Pending::Exec(_) => "exec",
            Pending::PortForward { .. } => "portforward",
        }
    }
}

pub struct StreamingServer {
    base_url: String,
    ttl: Duration,
    tokens: Mutex<HashMap<String, (Pending, Instant)>>,
}

impl StreamingServer {
    /// Binds the listener (port 0: an ephemeral port) and serves it in the background.
    pub async fn start(address: &str, ttl: Duration) -> std::io::Result<Arc<StreamingServer>> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let bound = listener.local_addr()?;
        let server = Arc::new(StreamingServer { base_url: format!("http://{bound}"), ttl, tokens: Mutex::default() });
        tracing::info!(address = %bound, "streaming server (exec, port-forward) listening");
        let serving = server.clone();
        tokio::spawn(async move { serving.serve(listener).await });
        Ok(server)
    }

    /// A fresh single-use URL for `pending`, valid for the token lifetime.
    pub fn issue(&self, pending: Pending) -> Result<String, String> {
        let mut raw = [0u8; 24];
        getrandom::fill(&mut raw).map_err(|e| format!("no randomness for a token: {e}"))?;
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

    async fn serve(self: Arc<Self>, listener: tokio::net::TcpListener) {
        loop {
            let (conn, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "streaming server accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let server = self.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let server = server.clone();
                    async move { Ok::<_, std::convert::Infallible>(server.handle(req, peer)) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(conn), service)
                    .with_upgrades();
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "streaming connection ended");
                }
            });
        }
    }

    fn handle(&self, mut req: Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        let parts: Vec<&str> = req.uri().path().trim_matches('/').split('/').collect();
        let (kind, token) = match parts.as_slice() {
            [kind @ ("exec" | "portforward"), token] => (*kind, *token),
            _ => return plain(StatusCode::NOT_FOUND, "not found"),
        };
        let Some(pending) = self.redeem(kind, token) else {
            tracing::info!(%peer, kind, "streaming request with an unknown, used or expired token");
            return plain(StatusCode::NOT_FOUND, "unknown, used or expired streaming token");
        };
        let upgrade = req.headers().get(UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !upgrade.eq_ignore_ascii_case("SPDY/3.1") {
            return plain(StatusCode::BAD_REQUEST, "this endpoint needs Upgrade: SPDY/3.1");
        }
        let offered: Vec<String> = req
            .headers()
            .get_all(PROTOCOL_HEADER)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
            .collect();
        let supported: &[&str] = match pending {
            Pending::Exec(_) => exec::PROTOCOLS,
            Pending::PortForward { .. } => &[portforward::PROTOCOL],
        };
        let protocol = if offered.is_empty() {
            supported[supported.len() - 1]
        } else {
            match supported.iter().find(|p| offered.iter().any(|o| o == *p)) {
                Some(p) => *p,
                None => {
                    let msg = format!(
                        "unable to negotiate a protocol: client offered {offered:?}, server supports {supported:?}"
                    );
                    return plain(StatusCode::FORBIDDEN, &msg);
                }
            }
        };
        let upgraded = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let io = match upgraded.await {
                Ok(io) => TokioIo::new(io),
                Err(e) => {
                    tracing::warn!(error = %e, "streaming upgrade failed");
                    return;
                }
            };
            let session = session::start(io);
            match pending {
                Pending::Exec(req) => exec::serve(session, protocol, req).await,
                Pending::PortForward { netns } => portforward::serve(session, netns).await,
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

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(text.to_string())));
    *resp.status_mut() = status;
    resp
}
