//! A WebSocket client for the streaming tests, speaking the k8s channel protocols: every
//! binary message is a channel number and data; with the `base64.` protocols every message
//! is text, the channel a digit from '0' and the data in base64.

use std::collections::HashMap;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

pub struct WsClient {
    ws: WebSocketStream<TcpStream>,
    /// Data received per channel, in order.
    pub channels: HashMap<u8, Vec<u8>>,
    /// Channels that have received at least one message (even an empty one).
    pub seen: Vec<u8>,
    pub protocol: Option<String>,
    base64: bool,
}

/// Upgrades `url` (the http:// URL the RPC returned) offering `protocols`; the HTTP status
/// on refusal.
pub async fn connect(url: &str, protocols: &[&str]) -> Result<WsClient, String> {
    let ws_url = url.replacen("http://", "ws://", 1);
    let host = ws_url.trim_start_matches("ws://").split('/').next().unwrap().to_string();
    let mut request = ws_url.into_client_request().unwrap();
    if !protocols.is_empty() {
        request.headers_mut().insert("Sec-WebSocket-Protocol", protocols.join(", ").parse().unwrap());
    }
    let conn = TcpStream::connect(&host).await.unwrap();
    match tokio_tungstenite::client_async(request, conn).await {
        Ok((ws, resp)) => {
            let protocol =
                resp.headers().get("Sec-WebSocket-Protocol").map(|v| v.to_str().unwrap_or_default().to_string());
            let base64 = protocol.as_deref().is_some_and(|p| p.contains("base64."));
            Ok(WsClient { ws, channels: HashMap::new(), seen: Vec::new(), protocol, base64 })
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().to_string()),
        Err(e) => Err(e.to_string()),
    }
}

impl WsClient {
    /// The WebSocket itself, for sending what no well-behaved client sends.
    pub fn raw(&mut self) -> &mut WebSocketStream<TcpStream> {
        &mut self.ws
    }

    pub async fn send(&mut self, channel: u8, data: &[u8]) {
        let message = if self.base64 {
            let text =
                format!("{}{}", (b'0' + channel) as char, base64::engine::general_purpose::STANDARD.encode(data));
            Message::Text(text.into())
        } else {
            Message::Binary([&[channel][..], data].concat().into())
        };
        self.ws.send(message).await.unwrap();
    }

    /// Reads messages until `done` holds; false when the connection closed first.
    pub async fn read_until(&mut self, done: impl Fn(&WsClient) -> bool) -> bool {
        while !done(self) {
            let (channel, data) = match self.ws.next().await {
                Some(Ok(Message::Binary(data))) if !self.base64 => match data.split_first() {
                    Some((&channel, rest)) => (channel, rest.to_vec()),
                    None => continue,
                },
                Some(Ok(Message::Text(text))) if self.base64 => {
                    let (channel, rest) = text.as_bytes().split_first().expect("a channel character");
                    let data = base64::engine::general_purpose::STANDARD.decode(rest).expect("base64 data");
                    (channel - b'0', data)
                }
                Some(Ok(m @ (Message::Binary(_) | Message::Text(_)))) => {
                    panic!("{:?} framing got {m:?}", self.protocol)
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return false,
                Some(Ok(_)) => continue,
            };
            self.seen.push(channel);
            self.channels.entry(channel).or_default().extend_from_slice(&data);
        }
        true
    }

    /// Reads until the server closes the connection.
    pub async fn read_to_end(&mut self) {
        self.read_until(|_| false).await;
    }

    pub fn text(&self, channel: u8) -> String {
        String::from_utf8_lossy(self.channels.get(&channel).map(|v| v.as_slice()).unwrap_or_default()).into_owned()
    }
}
