//! The port-forward protocol over a SPDY session: every forwarded connection is a pair of
//! streams (error and data) with the same `requestID` and a `port` header; the data stream is
//! joined to a TCP connection to 127.0.0.1:<port> made inside the pod's network namespace.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::session::{Session, Stream};

pub const PROTOCOL: &str = "portforward.k8s.io";

/// Serves a port-forward session until the client closes it.
pub async fn serve(mut session: Session, netns: PathBuf) {
    let mut pending: HashMap<String, (Option<Stream>, Option<Stream>)> = HashMap::new();
    while let Some(stream) = session.accept().await {
        let key =
            format!("{}/{}", stream.header("requestID").unwrap_or_default(), stream.header("port").unwrap_or_default());
        let entry = pending.entry(key.clone()).or_default();
        match stream.header("streamType") {
            Some("error") => entry.0 = Some(stream),
            Some("data") => entry.1 = Some(stream),
            other => {
                tracing::debug!(stream_type = ?other, "port-forward: unexpected stream ignored");
                continue;
            }
        }
        if let Some((Some(_), Some(_))) = pending.get(&key) {
            if let Some((Some(error), Some(data))) = pending.remove(&key) {
                tokio::spawn(forward(error, data, netns.clone()));
            }
        }
    }
    session.close().await;
}

async fn forward(error: Stream, mut data: Stream, netns: PathBuf) {
    let errors = error.writer();
    let port = data.header("port").and_then(|p| p.parse::<u16>().ok());
    let conn = match port {
        Some(port) if port > 0 => connect_in(&netns, port).await,
        _ => Err(format!("invalid port {:?}", data.header("port"))),
    };
    let conn = match conn {
        Ok(conn) => conn,
        Err(e) => {
            errors.write(e.as_bytes()).await;
            errors.close().await;
            data.writer().close().await;
            return;
        }
    };
    let (from_pod, mut to_pod) = conn.into_split();
    let upstream = tokio::spawn(data.writer().copy_from(from_pod));
    while let Some(chunk) = data.recv().await {
        if to_pod.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = to_pod.shutdown().await;
    let _ = upstream.await;
    errors.close().await;
}

/// Connects to 127.0.0.1:`port` in the network namespace pinned at `netns`. The socket is
/// made on a short-lived thread that entered the namespace, and keeps that namespace.
async fn connect_in(netns: &Path, port: u16) -> Result<tokio::net::TcpStream, String> {
    let netns = netns.to_path_buf();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let result = (|| -> Result<std::net::TcpStream, String> {
            let ns = std::fs::File::open(&netns).map_err(|e| format!("{}: {e}", netns.display()))?;
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("entering the pod's network namespace: {e}"))?;
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let conn = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .map_err(|e| format!("failed to connect to localhost:{port} inside the pod: {e}"))?;
            conn.set_nonblocking(true).map_err(|e| e.to_string())?;
            Ok(conn)
        })();
        let _ = tx.send(result);
    });
    let conn = rx.await.map_err(|_| "the connecting thread died".to_string())??;
    tokio::net::TcpStream::from_std(conn).map_err(|e| e.to_string())
}
