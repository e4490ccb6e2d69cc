//! One SPDY/3.1 connection, server side: the peer opens streams (SYN_STREAM), we accept each
//! one (SYN_REPLY) and hand it over with its headers; data flows per stream until FIN.
//! Consumed data is acknowledged with WINDOW_UPDATE so a flow-controlled peer never stalls.

use std::collections::HashMap;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::budget::{self, Budget, Held};
use super::spdy::{self, Frame, Headers, FLAG_FIN};

/// Data frames we send are cut to this size.
const CHUNK: usize = 32 * 1024;

/// A stream the peer opened.
pub struct Stream {
    pub id: u32,
    pub headers: Headers,
    data: mpsc::Receiver<Held>,
    out: mpsc::Sender<Frame>,
}

impl Stream {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The next chunk from the peer; None once it finished (or reset) the stream.
    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        self.data.recv().await.map(Held::take)
    }

    pub fn writer(&self) -> StreamWriter {
        StreamWriter { id: self.id, out: self.out.clone() }
    }

    /// What the peer sends on the stream, apart from the stream.
    pub fn into_receiver(self) -> mpsc::Receiver<Held> {
        self.data
    }
}

/// Our half of a stream.
#[derive(Clone)]
pub struct StreamWriter {
    id: u32,
    out: mpsc::Sender<Frame>,
}

impl StreamWriter {
    /// Sends data; false when the connection is gone.
    pub async fn write(&self, data: &[u8]) -> bool {
        for chunk in data.chunks(CHUNK) {
            let frame = Frame::Data { stream: self.id, flags: 0, data: chunk.to_vec() };
            if self.out.send(frame).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Half-closes our side (FIN).
    pub async fn close(&self) {
        let _ = self.out.send(Frame::Data { stream: self.id, flags: FLAG_FIN, data: Vec::new() }).await;
    }
}

/// The streams of a connection, in the order the peer opens them.
pub struct Session {
    incoming: mpsc::Receiver<Stream>,
    out: mpsc::Sender<Frame>,
}

impl Session {
    /// The next stream; None when the connection closed.
    pub async fn accept(&mut self) -> Option<Stream> {
        self.incoming.recv().await
    }

    /// Ends the connection: GOAWAY, then the writer closes the transport.
    pub async fn close(self) {
        self.closer().close().await;
    }

    /// A handle that can end the connection after the session itself was given away.
    pub fn closer(&self) -> SessionCloser {
        SessionCloser { out: self.out.clone() }
    }
}

#[derive(Clone)]
pub struct SessionCloser {
    out: mpsc::Sender<Frame>,
}

impl SessionCloser {
    pub async fn close(&self) {
        let _ = self.out.send(Frame::GoAway { last_stream: 0, status: 0 }).await;
    }
}

/// What a peer may make a connection hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest frame payload (and decompressed header block) read.
    pub max_frame: usize,
    /// Client data the streams' consumers have not taken yet.
    pub max_buffered: usize,
}

/// Streams open at once on a connection; a SYN_STREAM past this is refused (RST_STREAM
/// REFUSED_STREAM). Exec uses five; port-forward two per forwarded connection.
const MAX_STREAMS: usize = 1024;

/// Runs the connection's reader and writer tasks over `io`.
pub fn start<IO>(io: IO, limits: Limits) -> Session
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, writer) = tokio::io::split(io);
    // Frames we send are at most CHUNK long: this queue holds at most 2 MiB.
    let (out_tx, out_rx) = mpsc::channel::<Frame>(64);
    let (in_tx, in_rx) = mpsc::channel::<Stream>(64);
    let out_tx_reader = out_tx.clone();
    // Once our side is done (GOAWAY sent or the transport broke), reading stops too, so a
    // client that never hangs up does not hold the connection.
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        write_frames(writer, out_rx).await;
        drop(done_tx);
    });
    tokio::spawn(async move {
        tokio::select! {
            _ = read_frames(reader, in_tx, out_tx_reader, limits) => {}
            _ = done_rx => {}
        }
    });
    Session { incoming: in_rx, out: out_tx }
}

async fn write_frames(mut io: impl AsyncWrite + Unpin, mut frames: mpsc::Receiver<Frame>) {
    let mut headers = spdy::HeaderEncoder::default();
    while let Some(frame) = frames.recv().await {
        let last = matches!(frame, Frame::GoAway { .. });
        if io.write_all(&spdy::encode(&frame, &mut headers)).await.is_err() {
            break;
        }
        if last {
            break;
        }
    }
    let _ = io.flush().await;
    let _ = io.shutdown().await;
}

async fn read_frames(
    mut io: impl AsyncRead + Unpin,
    incoming: mpsc::Sender<Stream>,
    out: mpsc::Sender<Frame>,
    limits: Limits,
) {
    let mut headers = spdy::HeaderDecoder::new(limits.max_frame);
    let mut streams: HashMap<u32, mpsc::Sender<Held>> = HashMap::new();
    let budget = Budget::new(limits.max_buffered);
    let mut head = [0u8; 8];
    loop {
        if io.read_exact(&mut head).await.is_err() {
            break;
        }
        let len = spdy::payload_len(&head);
        if len > limits.max_frame {
            tracing::info!(
                len,
                limit = limits.max_frame,
                "SPDY frame over streaming.max_frame_bytes; closing the connection"
            );
            let _ = out.send(Frame::GoAway { last_stream: 0, status: 1 }).await;
            break;
        }
        let mut payload = vec![0u8; len];
        if io.read_exact(&mut payload).await.is_err() {
            break;
        }
        let frame = match spdy::decode(&head, &payload, &mut headers) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::debug!(error = %e, "bad SPDY frame; closing the connection");
                let _ = out.send(Frame::GoAway { last_stream: 0, status: 1 }).await;
                break;
            }
        };
        match frame {
            Frame::SynStream { stream, .. } if streams.len() >= MAX_STREAMS => {
                let _ = out.send(Frame::RstStream { stream, status: 3 }).await;
            }
            Frame::SynStream { stream, flags, headers, .. } => {
                let _ = out.send(Frame::SynReply { stream, flags: 0, headers: Vec::new() }).await;
                let (tx, rx) = mpsc::channel(64);
                if flags & FLAG_FIN == 0 {
                    streams.insert(stream, tx);
                }
                let accepted = Stream { id: stream, headers, data: rx, out: out.clone() };
                if incoming.send(accepted).await.is_err() {
                    let _ = out.send(Frame::RstStream { stream, status: 3 }).await;
                }
            }
            Frame::Data { stream, flags, data } => {
                let len = data.len() as u32;
                if let Some(tx) = streams.get(&stream) {
                    if !data.is_empty() && !budget::deliver(&budget, tx, data).await {
                        streams.remove(&stream);
                    }
                }
                if len > 0 {
                    let _ = out.send(Frame::WindowUpdate { stream, delta: len }).await;
                    let _ = out.send(Frame::WindowUpdate { stream: 0, delta: len }).await;
                }
                if flags & FLAG_FIN != 0 {
                    streams.remove(&stream);
                }
            }
            Frame::Headers { stream, flags, .. } if flags & FLAG_FIN != 0 => {
                streams.remove(&stream);
            }
            Frame::RstStream { stream, .. } => {
                streams.remove(&stream);
            }
            Frame::Ping { id } => {
                let _ = out.send(Frame::Ping { id }).await;
            }
            Frame::GoAway { .. } => break,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer opening a stream, sending data and a ping over an in-memory pipe.
    #[tokio::test]
    async fn streams_data_and_pings() {
        let (server_io, mut client) = tokio::io::duplex(1 << 20);
        let mut session = start(server_io, Limits { max_frame: 1 << 20, max_buffered: 1 << 20 });
        let (mut enc, mut dec) = (spdy::HeaderEncoder::default(), spdy::HeaderDecoder::default());
        let syn = Frame::SynStream {
            stream: 1,
            associated: 0,
            priority: 0,
            flags: 0,
            headers: vec![("streamType".into(), "stdin".into())],
        };
        client.write_all(&spdy::encode(&syn, &mut enc)).await.unwrap();
        let data = Frame::Data { stream: 1, flags: FLAG_FIN, data: b"hello".to_vec() };
        client.write_all(&spdy::encode(&data, &mut enc)).await.unwrap();
        client.write_all(&spdy::encode(&Frame::Ping { id: 9 }, &mut enc)).await.unwrap();

        let mut stream = session.accept().await.unwrap();
        assert_eq!(stream.header("streamtype"), Some("stdin"));
        assert_eq!(stream.recv().await.unwrap(), b"hello");
        assert_eq!(stream.recv().await, None, "FIN ends the stream");
        stream.writer().write(b"out").await;
        stream.writer().close().await;

        let mut seen = Vec::new();
        while seen.len() < 6 {
            let mut head = [0u8; 8];
            client.read_exact(&mut head).await.unwrap();
            let mut payload = vec![0; spdy::payload_len(&head)];
            client.read_exact(&mut payload).await.unwrap();
            seen.push(spdy::decode(&head, &payload, &mut dec).unwrap());
        }
        assert_eq!(seen[0], Frame::SynReply { stream: 1, flags: 0, headers: vec![] });
        assert!(seen.contains(&Frame::WindowUpdate { stream: 1, delta: 5 }));
        assert!(seen.contains(&Frame::Ping { id: 9 }));
        assert!(seen.contains(&Frame::Data { stream: 1, flags: 0, data: b"out".to_vec() }));
        assert!(seen.contains(&Frame::Data { stream: 1, flags: FLAG_FIN, data: vec![] }));
    }
}
