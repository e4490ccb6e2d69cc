//! Port forwarding. Over SPDY every forwarded connection is a pair of streams (error and
//! data) with the same `requestID` and a `port` header. Over WebSocket the ports are fixed
//! for the session: channel 2n carries port n's data and 2n+1 its errors, each starting with
//! the port number (16 bits, little-endian). Either way the data is joined to a TCP
//! connection to 127.0.0.1:<port> made inside the pod's network namespace.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::channels::{Input, Output};
use super::error::StreamError;
use super::session::{Limits, Session, Stream};
use super::websocket::{self, Framing};

pub const PROTOCOL: &str = "portforward.k8s.io";
/// Over WebSocket, binary first; the first is what a client that names no protocol speaks.
pub const WEBSOCKET_PROTOCOLS: &[&str] = &["v4.channel.k8s.io", "v4.base64.channel.k8s.io"];

/// A stream whose partner has not come within this time is dropped.
const PAIR_WAIT: Duration = Duration::from_secs(30);

/// How many ports one WebSocket session can forward with `framing`: two channels a port,
/// numbered from 0 to `max_channel`.
pub const fn max_websocket_ports(framing: Framing) -> usize {
    (framing.max_channel() as usize).div_ceil(2)
}

/// The most a request may name (binary framing; base64 carries fewer).
pub const MAX_WEBSOCKET_PORTS: usize = max_websocket_ports(Framing::BINARY);

/// Serves a SPDY port-forward session until the client closes it.
pub async fn serve(mut session: Session, netns: PathBuf) {
    type Half = Option<Stream>;
    let mut pending: HashMap<String, (Half, Half, Instant)> = HashMap::new();
    while let Some(stream) = session.accept().await {
        pending.retain(|_, (_, _, since)| since.elapsed() < PAIR_WAIT);
        let key =
            format!("{}/{}", stream.header("requestID").unwrap_or_default(), stream.header("port").unwrap_or_default());
        let entry = pending.entry(key.clone()).or_insert_with(|| (None, None, Instant::now()));
        match stream.header("streamType") {
            Some("error") => entry.0 = Some(stream),
            Some("data") => entry.1 = Some(stream),
            other => {
                tracing::debug!(stream_type = ?other, "port-forward: unexpected stream ignored");
                continue;
            }
        }
        if let Some((Some(_), Some(_), _)) = pending.get(&key) {
            if let Some((Some(error), Some(data), _)) = pending.remove(&key) {
                let port = data.header("port").and_then(|p| p.parse::<u16>().ok()).filter(|p| *p > 0);
                let (errors, to_client) = (Output::Spdy(error.writer()), Output::Spdy(data.writer()));
                let from_client = Input::new(data.into_receiver());
                let netns = netns.clone();
                tokio::spawn(async move {
                    match port {
                        Some(port) => forward(&netns, port, from_client, to_client, errors, true).await,
                        None => fail(&errors, &to_client, "invalid port".into()).await,
                    }
                });
            }
        }
    }
    session.close().await;
}

/// Serves a WebSocket port-forward session for `ports` (at most `max_websocket_ports`) until
/// the client closes it or every forwarded connection ended.
pub async fn serve_websocket<IO>(io: IO, framing: Framing, netns: PathBuf, ports: Vec<u16>, limits: Limits)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let ports: Vec<u16> = ports.into_iter().take(max_websocket_ports(framing)).collect();
    let mut inputs = HashMap::new();
    let mut receivers = Vec::new();
    for i in 0..ports.len() {
        let (tx, rx) = mpsc::channel(64);
        inputs.insert((2 * i) as u8, tx);
        receivers.push(rx);
    }
    let conn = websocket::start(io, inputs, framing, limits).await;
    let mut forwards = Vec::new();
    for (i, (port, rx)) in ports.into_iter().zip(receivers).enumerate() {
        let data = Output::WebSocket { channel: (2 * i) as u8, out: conn.out.clone() };
        let errors = Output::WebSocket { channel: (2 * i + 1) as u8, out: conn.out.clone() };
        data.write(&port.to_le_bytes()).await;
        errors.write(&port.to_le_bytes()).await;
        let netns = netns.clone();
        forwards.push(tokio::spawn(async move { forward(&netns, port, Input::new(rx), data, errors, false).await }));
    }
    let mut gone = conn.gone.clone();
    let all = futures::future::join_all(forwards.iter_mut());
    tokio::select! {
        _ = all => {}
        _ = gone.wait_for(|g| *g) => {}
    }
    for f in &forwards {
        f.abort();
    }
    let _ = conn.out.send(websocket::Outgoing::Close).await;
}

async fn fail(errors: &Output, data: &Output, message: String) {
    errors.write(message.as_bytes()).await;
    errors.close().await;
    data.close().await;
}

/// Joins the client's data to a new connection to `port` in the pod. With `half_close` (SPDY)
/// the client's end of data shuts down our sending side and the pod's answer still arrives;
/// otherwise (WebSocket) the forward ends when either side ends.
async fn forward(netns: &Path, port: u16, mut from_client: Input, to_client: Output, errors: Output, half_close: bool) {
    let conn = match connect_in(netns, port).await {
        Ok(conn) => conn,
        Err(e) => return fail(&errors, &to_client, e.to_string()).await,
    };
    let (from_pod, mut to_pod) = conn.into_split();
    let mut upstream = tokio::spawn(to_client.copy_from(from_pod));
    let downstream = async move {
        while let Some(chunk) = from_client.recv().await {
            if to_pod.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to_pod.shutdown().await;
    };
    if half_close {
        downstream.await;
        let _ = upstream.await;
    } else {
        tokio::select! {
            _ = downstream => upstream.abort(),
            _ = &mut upstream => {}
        }
    }
    errors.close().await;
}

/// Connects to 127.0.0.1:`port` in the network namespace pinned at `netns`. The socket is
/// made on a short-lived thread that entered the namespace, and keeps that namespace.
async fn connect_in(netns: &Path, port: u16) -> Result<tokio::net::TcpStream, StreamError> {
    let netns = netns.to_path_buf();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let result = (|| -> Result<std::net::TcpStream, StreamError> {
            let ns = std::fs::File::open(&netns).map_err(StreamError::io(netns.display().to_string()))?;
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(StreamError::sys("entering the pod's network namespace"))?;
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let conn = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| {
                StreamError::Unreachable(format!("failed to connect to localhost:{port} inside the pod: {e}"))
            })?;
            conn.set_nonblocking(true).map_err(StreamError::io("port-forward socket"))?;
            Ok(conn)
        })();
        let _ = tx.send(result);
    });
    let conn = rx.await.map_err(|_| StreamError::Unreachable("the connecting thread died".into()))??;
    tokio::net::TcpStream::from_std(conn).map_err(StreamError::io("port-forward socket"))
}
