//! A SPDY/3.1 client for the streaming tests: the HTTP upgrade, then streams opened the way
//! kubectl and crictl open them, using the daemon's frame codec.

use std::collections::HashMap;

use swapcri::streaming::spdy::{self, Frame, FLAG_FIN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Client {
    conn: TcpStream,
    enc: spdy::HeaderEncoder,
    dec: spdy::HeaderDecoder,
    next_id: u32,
    /// Data received per stream, and whether the server finished it.
    pub data: HashMap<u32, (Vec<u8>, bool)>,
}

/// Sends the upgrade request; the status line and headers of the answer, and the client when
/// the server switched protocols.
pub async fn connect(url: &str, protocols: &[&str]) -> (String, Option<Client>) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest.split_once('/').unwrap();
    let mut conn = TcpStream::connect(host).await.unwrap();
    let mut request = format!("POST /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n");
    for p in protocols {
        request.push_str(&format!("X-Stream-Protocol-Version: {p}\r\n"));
    }
    request.push_str("Content-Length: 0\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        if conn.read(&mut b).await.unwrap() == 0 {
            break;
        }
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    if !head.starts_with("HTTP/1.1 101") {
        return (head, None);
    }
    let client = Client {
        conn,
        enc: spdy::HeaderEncoder::default(),
        dec: spdy::HeaderDecoder::default(),
        next_id: 1,
        data: HashMap::new(),
    };
    (head, Some(client))
}

impl Client {
    pub async fn open(&mut self, headers: &[(&str, &str)]) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        let headers = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.send(Frame::SynStream { stream: id, associated: 0, priority: 0, flags: 0, headers }).await;
        self.data.insert(id, (Vec::new(), false));
        id
    }

    /// The connection itself, for writing what no well-behaved client sends.
    pub fn raw(&mut self) -> &mut TcpStream {
        &mut self.conn
    }

    pub async fn send(&mut self, frame: Frame) {
        let bytes = spdy::encode(&frame, &mut self.enc);
        self.conn.write_all(&bytes).await.unwrap();
    }

    pub async fn write(&mut self, stream: u32, data: &[u8]) {
        for chunk in data.chunks(60_000) {
            self.send(Frame::Data { stream, flags: 0, data: chunk.to_vec() }).await;
        }
    }

    pub async fn finish(&mut self, stream: u32) {
        self.send(Frame::Data { stream, flags: FLAG_FIN, data: vec![] }).await;
    }

    /// Reads frames until `stream` is finished by the server (or the connection ends).
    pub async fn read_until_finished(&mut self, stream: u32) {
        self.read_until(|c| c.data.get(&stream).is_some_and(|(_, fin)| *fin)).await;
    }

    /// Reads frames until `done` holds; false when the connection ended first.
    pub async fn read_until(&mut self, done: impl Fn(&Client) -> bool) -> bool {
        while !done(self) {
            let mut head = [0u8; 8];
            if self.conn.read_exact(&mut head).await.is_err() {
                return false;
            }
            let mut payload = vec![0u8; spdy::payload_len(&head)];
            self.conn.read_exact(&mut payload).await.unwrap();
            match spdy::decode(&head, &payload, &mut self.dec).unwrap() {
                Frame::Data { stream, flags, data } => {
                    let entry = self.data.entry(stream).or_default();
                    entry.0.extend_from_slice(&data);
                    if flags & FLAG_FIN != 0 {
                        entry.1 = true;
                    }
                }
                Frame::GoAway { .. } => return false,
                _ => {}
            }
        }
        true
    }

    pub fn text(&self, stream: u32) -> String {
        String::from_utf8_lossy(self.received(stream)).into_owned()
    }

    pub fn received(&self, stream: u32) -> &[u8] {
        self.data.get(&stream).map(|(d, _)| d.as_slice()).unwrap_or_default()
    }
}
