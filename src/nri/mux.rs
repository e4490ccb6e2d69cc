//! NRI's connection multiplexer: the plugin's service and the runtime's share one unix
//! socket. Each frame carries its logical connection's id and its length (big-endian u32s),
//! then that many bytes of the ttrpc stream.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// The plugin serves its ttrpc service here; the runtime is its client.
pub const PLUGIN_SERVICE_CONN: u32 = 1;
/// The runtime serves its ttrpc service here (registration, unsolicited updates).
pub const RUNTIME_SERVICE_CONN: u32 = 2;

const FRAME_HEADER: usize = 8;
const TTRPC_HEADER: usize = 10;
/// ttrpc's own message limit.
pub const TTRPC_MAX_MESSAGE: usize = 4 << 20;
/// The largest frame a peer may send: one whole ttrpc message.
const MAX_FRAME: usize = TTRPC_HEADER + TTRPC_MAX_MESSAGE;
/// Frames sent stay within a Go peer's default read buffer and each ttrpc message starts a
/// frame of its own: Go's multiplexer fails a read into a buffer smaller than the frame.
const SEND_CHUNK: usize = 4096;
/// Bytes buffered per logical connection between the socket and ttrpc.
const PIPE_BYTES: usize = 256 << 10;

/// The tasks that carry a multiplexed socket's connections. Dropping it ends them.
pub struct Mux {
    tasks: Vec<JoinHandle<()>>,
}

/// A multiplexed socket's two logical connections, and what says the socket went away.
pub struct Split {
    pub mux: Mux,
    pub plugin: DuplexStream,
    pub runtime: DuplexStream,
    /// Resolves with why, once the peer is gone.
    pub closed: tokio::sync::oneshot::Receiver<String>,
}

impl Drop for Mux {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Mux {
    /// Splits `trunk` into the plugin and runtime connections.
    pub fn split<S: AsyncRead + AsyncWrite + Send + 'static>(trunk: S) -> Split {
        let (read, write) = tokio::io::split(trunk);
        let write = Arc::new(Mutex::new(write));
        let (plugin, plugin_ours) = tokio::io::duplex(PIPE_BYTES);
        let (runtime, runtime_ours) = tokio::io::duplex(PIPE_BYTES);
        let (plugin_rx, plugin_tx) = tokio::io::split(plugin_ours);
        let (runtime_rx, runtime_tx) = tokio::io::split(runtime_ours);
        let (closed_tx, closed) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn(async move {
            let why = match demultiplex(read, plugin_tx, runtime_tx).await {
                Ok(()) => "connection closed".to_string(),
                Err(e) => e.to_string(),
            };
            let _ = closed_tx.send(why);
        });
        let tasks = vec![
            reader,
            tokio::spawn(multiplex(PLUGIN_SERVICE_CONN, plugin_rx, write.clone())),
            tokio::spawn(multiplex(RUNTIME_SERVICE_CONN, runtime_rx, write)),
        ];
        Split { mux: Mux { tasks }, plugin, runtime, closed }
    }
}

/// Reads frames off the socket into their connection's stream until the socket ends, then
/// ends both streams, so that calls waiting on them fail at once.
async fn demultiplex<R: AsyncRead + Unpin>(
    read: R,
    mut plugin: WriteHalf<DuplexStream>,
    mut runtime: WriteHalf<DuplexStream>,
) -> std::io::Result<()> {
    let result = forward(read, &mut plugin, &mut runtime).await;
    let _ = plugin.shutdown().await;
    let _ = runtime.shutdown().await;
    result
}

async fn forward<R: AsyncRead + Unpin>(
    mut read: R,
    plugin: &mut WriteHalf<DuplexStream>,
    runtime: &mut WriteHalf<DuplexStream>,
) -> std::io::Result<()> {
    let mut header = [0u8; FRAME_HEADER];
    loop {
        match read.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let (id, len) = parse_header(&header);
        if len > MAX_FRAME {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("frame of {len} bytes on connection {id} exceeds {MAX_FRAME}"),
            ));
        }
        let mut payload = vec![0u8; len];
        read.read_exact(&mut payload).await?;
        // A frame for a connection nobody opened is dropped, as Go's multiplexer does.
        match id {
            PLUGIN_SERVICE_CONN => plugin.write_all(&payload).await?,
            RUNTIME_SERVICE_CONN => runtime.write_all(&payload).await?,
            _ => {}
        }
    }
}

fn parse_header(header: &[u8; FRAME_HEADER]) -> (u32, usize) {
    let id = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    (id, len as usize)
}

/// Reads whole ttrpc messages from one connection's stream and sends each as frames.
async fn multiplex<W: AsyncWrite + Unpin>(id: u32, mut from: ReadHalf<DuplexStream>, to: Arc<Mutex<W>>) {
    loop {
        let mut message = vec![0u8; TTRPC_HEADER];
        if from.read_exact(&mut message).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes([message[0], message[1], message[2], message[3]]) as usize;
        if len > TTRPC_MAX_MESSAGE {
            return;
        }
        message.resize(TTRPC_HEADER + len, 0);
        if from.read_exact(&mut message[TTRPC_HEADER..]).await.is_err() {
            return;
        }
        let frames = frames(id, &message);
        let mut to = to.lock().await;
        if to.write_all(&frames).await.is_err() || to.flush().await.is_err() {
            return;
        }
    }
}

/// One ttrpc message as frames of at most `SEND_CHUNK` bytes.
pub fn frames(id: u32, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + FRAME_HEADER * (message.len() / SEND_CHUNK + 1));
    for chunk in message.chunks(SEND_CHUNK) {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ttrpc message of `len` payload bytes.
    fn message(len: usize) -> Vec<u8> {
        let mut m = (len as u32).to_be_bytes().to_vec();
        m.extend_from_slice(&[0, 0, 0, 1, 1, 0]);
        m.extend((0..len).map(|i| i as u8));
        m
    }

    #[test]
    fn frames_split_at_the_chunk_size_and_keep_every_byte() {
        for (len, count) in [(0, 1), (100, 1), (4086, 1), (4087, 2), (10_000, 3)] {
            let m = message(len);
            let out = frames(7, &m);
            let mut rest = &out[..];
            let (mut seen, mut joined) = (0, Vec::new());
            while !rest.is_empty() {
                let header: [u8; 8] = rest[..8].try_into().unwrap();
                let (id, n) = parse_header(&header);
                assert_eq!(id, 7);
                assert!(n <= SEND_CHUNK, "{len}: frame of {n}");
                joined.extend_from_slice(&rest[8..8 + n]);
                rest = &rest[8 + n..];
                seen += 1;
            }
            assert_eq!((seen, joined), (count, m), "payload {len}");
        }
    }

    #[tokio::test]
    async fn both_directions_reach_the_right_connection() {
        let (ours, mut peer) = tokio::io::duplex(1 << 20);
        let Split { mux: _mux, plugin: mut plugin_conn, runtime: mut runtime_conn, closed } = Mux::split(ours);
        // Peer -> runtime connection, and a frame for an unknown connection is dropped.
        let m = message(9000);
        peer.write_all(&frames(9, &message(3))).await.unwrap();
        peer.write_all(&frames(RUNTIME_SERVICE_CONN, &m)).await.unwrap();
        let mut got = vec![0u8; m.len()];
        runtime_conn.read_exact(&mut got).await.unwrap();
        assert_eq!(got, m);
        // Plugin connection -> peer, as frames.
        let m = message(5000);
        plugin_conn.write_all(&m).await.unwrap();
        let mut got = vec![0u8; frames(PLUGIN_SERVICE_CONN, &m).len()];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(got, frames(PLUGIN_SERVICE_CONN, &m));
        // An oversized frame ends the connection.
        let mut bad = RUNTIME_SERVICE_CONN.to_be_bytes().to_vec();
        bad.extend_from_slice(&((MAX_FRAME + 1) as u32).to_be_bytes());
        peer.write_all(&bad).await.unwrap();
        assert!(closed.await.unwrap().contains("exceeds"));
    }
}
