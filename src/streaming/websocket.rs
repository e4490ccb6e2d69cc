//! The WebSocket transport of the channel protocols (`v5.channel.k8s.io` down to
//! `channel.k8s.io`, and port-forward's `v4.channel.k8s.io`): every binary message starts
//! with its channel number. The `base64.` variants (for clients that can only send text,
//! such as browsers) send text messages instead: the channel as a character counted from
//! '0', then the data in standard base64. In v5 a message on channel 255 naming a channel
//! closes the client's side of it (how a client ends stdin).

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Message, Role};
use tokio_tungstenite::WebSocketStream;

use super::budget::{self, Budget, Held};
use super::session::Limits;

/// The channel of v5's close signal.
pub const CLOSE_CHANNEL: u8 = 255;

/// How long a client has to answer our close frame.
const CLOSE_LINGER: std::time::Duration = std::time::Duration::from_secs(5);

/// Messages are cut to this size.
const CHUNK: usize = 32 * 1024;

/// How a negotiated protocol frames its channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    pub base64: bool,
    /// v5: channel 255 carries the client's close signals.
    pub close_signals: bool,
}

impl Framing {
    /// The channel protocols before v5.
    pub const BINARY: Framing = Framing { base64: false, close_signals: false };

    pub fn of(protocol: &str) -> Framing {
        Framing { base64: protocol.contains("base64."), close_signals: protocol == "v5.channel.k8s.io" }
    }

    /// The highest channel number this framing can carry: a base64 channel character must be
    /// ASCII to stand alone in a text message.
    pub const fn max_channel(self) -> u8 {
        match self.base64 {
            true => 0x7f - b'0',
            false => u8::MAX - 1,
        }
    }

    /// One message with `data` on `channel` (at most `max_channel`).
    fn encode(self, channel: u8, data: &[u8]) -> Message {
        if self.base64 {
            let mut text = String::with_capacity(1 + data.len().div_ceil(3) * 4);
            text.push(char::from(b'0' + channel.min(self.max_channel())));
            STANDARD.encode_string(data, &mut text);
            return Message::Text(text.into());
        }
        let mut message = Vec::with_capacity(data.len() + 1);
        message.push(channel);
        message.extend_from_slice(data);
        Message::Binary(message.into())
    }

    /// The channel and data of a client message; None when it carries neither or its base64
    /// does not decode.
    fn decode(self, message: &[u8]) -> Option<(u8, Vec<u8>)> {
        let (&first, rest) = message.split_first()?;
        if self.base64 {
            return Some((first.checked_sub(b'0')?, STANDARD.decode(rest).ok()?));
        }
        Some((first, rest.to_vec()))
    }
}

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
/// (v5) or the connection ends.
pub async fn start<IO>(io: IO, inputs: HashMap<u8, mpsc::Sender<Held>>, framing: Framing, limits: Limits) -> Connection
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(limits.max_frame))
        .max_frame_size(Some(limits.max_frame));
    let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (mut sink, mut source) = ws.split();
    let budget = Budget::new(limits.max_buffered);
    // Messages we send are at most CHUNK long: this queue holds at most 2 MiB.
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(64);
    let (gone_tx, gone_rx) = watch::channel(false);
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _closed = closed_tx; // dropped when we are done writing
        while let Some(item) = out_rx.recv().await {
            match item {
                Outgoing::Data(channel, data) => {
                    if sink.send(framing.encode(channel, &data)).await.is_err() {
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
            // Clients send text messages with the binary protocols too (the channel as a
            // character, then the data): their bytes mean the same.
            let message = match message {
                Ok(Message::Binary(data)) => framing.decode(&data),
                Ok(Message::Text(text)) => framing.decode(text.as_bytes()),
                Ok(Message::Close(_)) | Err(_) => break,
                Ok(_) => continue, // ping, pong
            };
            let Some((channel, data)) = message else {
                tracing::debug!("streaming: a WebSocket message without a channel or with bad base64 ignored");
                continue;
            };
            if channel == CLOSE_CHANNEL && framing.close_signals {
                if let Some(closed) = data.first() {
                    inputs.remove(closed);
                }
                continue;
            }
            if let Some(tx) = inputs.get(&channel) {
                if !data.is_empty() && !budget::deliver(&budget, tx, data).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_follows_the_protocol() {
        for (protocol, base64, close_signals) in [
            ("v5.channel.k8s.io", false, true),
            ("v4.channel.k8s.io", false, false),
            ("channel.k8s.io", false, false),
            ("v4.base64.channel.k8s.io", true, false),
            ("base64.channel.k8s.io", true, false),
        ] {
            assert_eq!(Framing::of(protocol), Framing { base64, close_signals }, "{protocol}");
        }
    }

    #[test]
    fn base64_messages_are_text_with_a_channel_character() {
        let framing = Framing::of("v4.base64.channel.k8s.io");
        for (channel, data, text) in [
            (1, &b"hello"[..], "1aGVsbG8="),
            (3, b"", "3"),
            (0, &[0xff, 0x00, 0x10][..], "0/wAQ"),
            (79, b"ab", "\x7fYWI="),
        ] {
            assert_eq!(framing.encode(channel, data), Message::Text(text.into()), "channel {channel}");
            assert_eq!(framing.decode(text.as_bytes()), Some((channel, data.to_vec())), "{text:?}");
        }
        // What does not decode carries nothing.
        for bad in [&b""[..], b"1not base64!", b"/AAAA", b"1aGVsbG8"] {
            assert_eq!(framing.decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn binary_messages_start_with_the_channel_number() {
        let framing = Framing::of("v5.channel.k8s.io");
        assert_eq!(framing.encode(2, b"err"), Message::Binary(b"\x02err".to_vec().into()));
        assert_eq!(framing.decode(b"\x00in"), Some((0, b"in".to_vec())));
        assert_eq!(framing.decode(b"\xff\x00"), Some((255, vec![0])));
        assert_eq!(framing.decode(b""), None);
        assert_eq!(Framing::of("v4.channel.k8s.io").max_channel(), 254);
        assert_eq!(Framing::of("base64.channel.k8s.io").max_channel(), 79);
    }
}
