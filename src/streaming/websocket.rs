//! The WebSocket transport of the channel protocols (`v5.channel.k8s.io` down to
//! `channel.k8s.io`, and port-forward's `v4.channel.k8s.io`): every binary message starts
//! with its channel number. In v5 a message on channel 255 naming a channel closes the
//! client's side of it (how a client ends stdin).

use std::collections::HashMap;

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Message, Role};
use tokio_tungstenite::WebSocketStream;

/// The channel of v5's close signal.
pub const CLOSE_CHANNEL: u8 = 255;

/// How long a client has to answer our close frame.
const CLOSE_LINGER: std::time::Duration = std::time::Duration::from_secs(5);

/// Messages are cut to this size.
const CHUNK: usize = 32 * 1024;

pub enum Outgoing {
    Data(u8, Vec<u8>),
    /// A close frame, then the end of the connection.
    Close,
}

pub struct Connection {
    pub out: mpsc::Sender<Outgoing>,
    /// Becomes true when the client closed the connection (or it broke).
    pub gone: watch::Receiver<bool>,
}

/// Serves a WebSocket on `io` (already upgraded): client messages on the channels in
/// `inputs` are delivered there; a channel's sender is dropped when the client closes it
/// (v5, when `close_signals`) or the connection ends.
pub async fn start<IO>(io: IO, inputs: HashMap<u8, mpsc::Sender<Vec<u8>>>, close_signals: bool) -> Connection
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let ws = WebSocketStream::from_raw_socket(io, Role::Server, None).await;
    let (mut sink, mut source) = ws.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(256);
    let (gone_tx, gone_rx) = watch::channel(false);
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _closed = closed_tx; // dropped when we are done writing
        while let Some(item) = out_rx.recv().await {
            match item {
                Outgoing::Data(channel, data) => {
                    let mut message = Vec::with_capacity(data.len() + 1);
                    message.push(channel);
                    message.extend_from_slice(&data);
                    if sink.send(Message::Binary(message.into())).await.is_err() {
                        break;
                    }
                }
                Outgoing::Close => {
                    let frame = CloseFrame { code: CloseCode::Normal, reason: "".into() };
                    let _ = sink.send(Message::Close(Some(frame))).await;
                    break;
                }
            }
        }
        let _ = sink.close().await;
    });
    tokio::spawn(async move {
        let mut inputs = inputs;
        // After our close frame the client has a moment to answer; then the connection goes.
        let linger = async {
            let _ = closed_rx.await;
            tokio::time::sleep(CLOSE_LINGER).await;
        };
        tokio::pin!(linger);
        loop {
            let message = tokio::select! {
                m = source.next() => m,
                _ = &mut linger => None,
            };
            let Some(message) = message else { break };
            let data = match message {
                Ok(Message::Binary(data)) => data,
                // Clients send text frames too (the channel as a character, then the data);
                // with the binary protocols their bytes mean the same.
                Ok(Message::Text(text)) => bytes::Bytes::from(text.as_str().as_bytes().to_vec()),
                Ok(Message::Close(_)) | Err(_) => break,
                Ok(_) => continue, // ping, pong
            };
            let Some((&channel, rest)) = data.split_first() else { continue };
            if channel == CLOSE_CHANNEL && close_signals {
                if let Some(closed) = rest.first() {
                    inputs.remove(closed);
                }
                continue;
            }
            if let Some(tx) = inputs.get(&channel) {
                if !rest.is_empty() && tx.send(rest.to_vec()).await.is_err() {
                    inputs.remove(&channel);
                }
            }
        }
        drop(inputs);
        let _ = gone_tx.send(true);
    });
    Connection { out: out_tx, gone: gone_rx }
}

/// Sends `data` on `channel`, cut into messages; false when the connection is gone.
pub async fn send(out: &mpsc::Sender<Outgoing>, channel: u8, data: &[u8]) -> bool {
    if data.is_empty() {
        return out.send(Outgoing::Data(channel, Vec::new())).await.is_ok();
    }
    for chunk in data.chunks(CHUNK) {
        if out.send(Outgoing::Data(channel, chunk.to_vec())).await.is_err() {
            return false;
        }
    }
    true
}
