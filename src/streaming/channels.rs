//! The streams of one exec or attach session, whatever carries them: SPDY streams named by
//! `streamType`, or WebSocket channels numbered stdin 0, stdout 1, stderr 2, error 3,
//! resize 4. Sessions read inputs and write outputs without knowing which.

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::{mpsc, watch};

use super::budget::Held;
use super::error::StreamError;
use super::session::{Limits, Session, SessionCloser, Stream, StreamWriter};
use super::websocket::{self, Framing, Outgoing};

/// How long the client has to open the streams it asked for.
const STREAM_WAIT: Duration = Duration::from_secs(30);

/// Outputs are read in pieces of this size.
const CHUNK: usize = 32 * 1024;

/// What the request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wants {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// Bytes from the client.
pub struct Input(mpsc::Receiver<Held>);

impl Input {
    pub fn new(rx: mpsc::Receiver<Held>) -> Input {
        Input(rx)
    }

    /// The next chunk; None once the client closed the stream. Taking it frees its room in
    /// the connection's budget.
    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        self.0.recv().await.map(Held::take)
    }
}

/// Bytes to the client.
#[derive(Clone)]
pub enum Output {
    Spdy(StreamWriter),
    WebSocket { channel: u8, out: mpsc::Sender<Outgoing> },
}

impl Output {
    /// Sends data; false when the connection is gone.
    pub async fn write(&self, data: &[u8]) -> bool {
        match self {
            Output::Spdy(w) => w.write(data).await,
            Output::WebSocket { channel, out } => websocket::send(out, *channel, data).await,
        }
    }

    /// Ends this output (a SPDY FIN; WebSocket channels end with the connection).
    pub async fn close(&self) {
        if let Output::Spdy(w) = self {
            w.close().await;
        }
    }

    /// Sends everything `from` yields until its end (or the connection is gone), then closes.
    pub async fn copy_from(self, mut from: impl AsyncRead + Unpin) {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if !self.write(&buf[..n]).await {
                        break;
                    }
                }
            }
        }
        self.close().await;
    }
}

enum Ending {
    Spdy(SessionCloser),
    WebSocket(mpsc::Sender<Outgoing>),
}

pub struct Channels {
    /// The negotiated protocol (`v4.channel.k8s.io`, …): it decides the status format.
    pub protocol: &'static str,
    pub stdin: Option<Input>,
    pub stdout: Option<Output>,
    pub stderr: Option<Output>,
    pub error: Option<Output>,
    pub resize: Option<Input>,
    ending: Ending,
    gone: watch::Receiver<bool>,
}

impl Channels {
    /// Waits until the client closed the connection.
    pub fn gone(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut gone = self.gone.clone();
        async move {
            let _ = gone.wait_for(|g| *g).await;
        }
    }

    /// Ends the connection.
    pub async fn close(self) {
        match self.ending {
            Ending::Spdy(closer) => closer.close().await,
            Ending::WebSocket(out) => {
                let _ = out.send(Outgoing::Close).await;
            }
        }
    }

    /// Waits for the streams the client opens on a SPDY session until those `wants` needs
    /// are there.
    pub async fn from_spdy(
        mut session: Session,
        wants: Wants,
        protocol: &'static str,
    ) -> Result<Channels, StreamError> {
        let resize_expected = wants.tty && !matches!(protocol, "v2.channel.k8s.io" | "channel.k8s.io");
        let complete = |s: &HashMap<&'static str, Stream>| {
            s.contains_key("error")
                && (!wants.stdin || s.contains_key("stdin"))
                && (!wants.stdout || s.contains_key("stdout"))
                && (!wants.stderr || wants.tty || s.contains_key("stderr"))
                && (!resize_expected || s.contains_key("resize"))
        };
        let mut streams: HashMap<&'static str, Stream> = HashMap::new();
        let deadline = tokio::time::Instant::now() + STREAM_WAIT;
        let closer = session.closer();
        while !complete(&streams) {
            let stream = match tokio::time::timeout_at(deadline, session.accept()).await {
                Ok(Some(s)) => s,
                Ok(None) => return Err(StreamError::Protocol("the client closed the connection".into())),
                Err(_) => {
                    closer.close().await;
                    return Err(StreamError::Protocol("timed out waiting for the client's streams".into()));
                }
            };
            let kind = match stream.header("streamType") {
                Some("error") => "error",
                Some("stdin") => "stdin",
                Some("stdout") => "stdout",
                Some("stderr") => "stderr",
                Some("resize") => "resize",
                other => {
                    closer.close().await;
                    return Err(StreamError::Protocol(format!("unexpected stream type {other:?}")));
                }
            };
            streams.insert(kind, stream);
        }
        // Whatever the client opens later is ignored; the end of the session is what counts.
        let (gone_tx, gone) = watch::channel(false);
        tokio::spawn(async move {
            while session.accept().await.is_some() {}
            let _ = gone_tx.send(true);
        });
        let mut input = |kind: &str| streams.remove(kind).map(|s| Input(s.into_receiver()));
        let (stdin, resize) = (input("stdin"), input("resize"));
        let output = |kind: &str| streams.get(kind).map(|s| Output::Spdy(s.writer()));
        Ok(Channels {
            protocol,
            stdin,
            stdout: output("stdout"),
            stderr: output("stderr"),
            error: output("error"),
            resize,
            ending: Ending::Spdy(closer),
            gone,
        })
    }

    /// Numbers the channels of a WebSocket connection; the first (empty) message tells the
    /// client the session is up.
    pub async fn from_websocket<IO>(io: IO, wants: Wants, protocol: &'static str, limits: Limits) -> Channels
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut inputs = HashMap::new();
        let mut input = |channel: u8, wanted: bool| {
            wanted.then(|| {
                let (tx, rx) = mpsc::channel(64);
                inputs.insert(channel, tx);
                Input(rx)
            })
        };
        let (stdin, resize) = (input(0, wants.stdin), input(4, wants.tty));
        let conn = websocket::start(io, inputs, Framing::of(protocol), limits).await;
        let output = |channel: u8, wanted: bool| wanted.then(|| Output::WebSocket { channel, out: conn.out.clone() });
        let channels = Channels {
            protocol,
            stdin,
            stdout: output(1, wants.stdout),
            stderr: output(2, wants.stderr && !wants.tty),
            error: output(3, true),
            resize,
            ending: Ending::WebSocket(conn.out.clone()),
            gone: conn.gone,
        };
        let first = channels.stdout.as_ref().or(channels.stderr.as_ref()).or(channels.error.as_ref());
        if let Some(first) = first {
            first.write(&[]).await;
        }
        channels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::protocol::{Message, Role};
    use tokio_tungstenite::WebSocketStream;

    fn frame(channel: u8, data: &[u8]) -> Message {
        Message::Binary([&[channel][..], data].concat().into())
    }

    async fn next_binary(client: &mut WebSocketStream<tokio::io::DuplexStream>) -> Vec<u8> {
        loop {
            match client.next().await.unwrap().unwrap() {
                Message::Binary(b) => return b.to_vec(),
                Message::Close(_) => return Vec::new(),
                _ => {}
            }
        }
    }

    const LIMITS: Limits = Limits { max_frame: 1 << 20, max_buffered: 1 << 20 };

    /// A v5 WebSocket session: inputs demultiplexed by channel, the close signal ending stdin,
    /// outputs tagged with their channel, the empty first message, the close frame at the end.
    #[tokio::test]
    async fn websocket_channels_multiplex_both_ways() {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let wants = Wants { stdin: true, stdout: true, stderr: false, tty: true };
        let (channels, mut client) = tokio::join!(
            Channels::from_websocket(server_io, wants, "v5.channel.k8s.io", LIMITS),
            WebSocketStream::from_raw_socket(client_io, Role::Client, None)
        );
        let mut channels = channels;
        assert!(channels.stderr.is_none(), "a terminal has no stderr");
        assert_eq!(next_binary(&mut client).await, vec![1], "the first message: empty, on stdout");

        client.send(frame(0, b"typed")).await.unwrap();
        client.send(frame(4, br#"{"Width":80,"Height":25}"#)).await.unwrap();
        client.send(frame(7, b"unknown channel, ignored")).await.unwrap();
        client.send(Message::Text("\u{0}as text".into())).await.unwrap();
        client.send(frame(255, &[0])).await.unwrap();
        let stdin = channels.stdin.as_mut().unwrap();
        assert_eq!(stdin.recv().await.unwrap(), b"typed");
        assert_eq!(stdin.recv().await.unwrap(), b"as text");
        assert_eq!(stdin.recv().await, None, "closed by the v5 signal");
        let resize = channels.resize.as_mut().unwrap();
        assert_eq!(resize.recv().await.unwrap(), br#"{"Width":80,"Height":25}"#);

        channels.stdout.as_ref().unwrap().write(b"out").await;
        channels.error.as_ref().unwrap().write(b"{}").await;
        assert_eq!(next_binary(&mut client).await, b"\x01out");
        assert_eq!(next_binary(&mut client).await, b"\x03{}");
        channels.close().await;
        assert!(matches!(client.next().await, Some(Ok(Message::Close(_)))));
    }

    /// Before v5 there is no close signal: channel 255 is just an unknown channel.
    #[tokio::test]
    async fn no_close_signal_before_v5() {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let wants = Wants { stdin: true, stdout: false, stderr: true, tty: false };
        let (channels, mut client) = tokio::join!(
            Channels::from_websocket(server_io, wants, "v4.channel.k8s.io", LIMITS),
            WebSocketStream::from_raw_socket(client_io, Role::Client, None)
        );
        let mut channels = channels;
        assert!(channels.resize.is_none());
        assert_eq!(next_binary(&mut client).await, vec![2], "the first message: empty, on stderr");
        client.send(frame(255, &[0])).await.unwrap();
        client.send(frame(0, b"still open")).await.unwrap();
        assert_eq!(channels.stdin.as_mut().unwrap().recv().await.unwrap(), b"still open");
    }
}
