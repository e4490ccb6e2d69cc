//! A bare HTTP/1.1 server on loopback, for registries that misbehave on purpose.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Gets a request's path and its connection, writes the whole answer and hands the
/// connection back to serve the next request on it (None closes it).
pub type Answer = Arc<dyn Fn(String, TcpStream) -> BoxFuture<'static, Option<TcpStream>> + Send + Sync>;

/// Listens on an ephemeral loopback port and serves every connection with `answer`.
pub async fn serve(answer: Answer) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                loop {
                    let n = match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let request = String::from_utf8_lossy(&buf[..n]).to_string();
                    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                    match answer(path, conn).await {
                        Some(back) => conn = back,
                        None => return,
                    }
                }
            });
        }
    });
    port
}
