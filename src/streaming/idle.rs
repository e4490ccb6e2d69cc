//! An idle timeout for streaming connections: a connection that carries no byte either way
//! for the configured time fails its reads, which ends the session (and, for exec, kills the
//! command) as if the client had left. Sessions of clients that vanished without closing
//! their connection end this way.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

pub struct IdleTimeout<T> {
    inner: T,
    /// None: no timeout.
    timeout: Option<Duration>,
    deadline: Pin<Box<Sleep>>,
}

impl<T> IdleTimeout<T> {
    pub fn new(inner: T, timeout: Option<Duration>) -> Self {
        let first = Instant::now() + timeout.unwrap_or(Duration::from_secs(3600));
        IdleTimeout { inner, timeout, deadline: Box::pin(tokio::time::sleep_until(first)) }
    }

    fn touch(&mut self) {
        if let Some(t) = self.timeout {
            self.deadline.as_mut().reset(Instant::now() + t);
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.touch();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if self.timeout.is_some() => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "streaming connection idle")))
                }
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn reads_fail_after_the_idle_time_and_traffic_postpones_it() {
        let (ours, mut peer) = tokio::io::duplex(1024);
        let mut conn = IdleTimeout::new(ours, Some(Duration::from_secs(10)));
        let mut buf = [0u8; 16];

        // Traffic both ways at 6 s intervals keeps it alive past 10 s.
        tokio::time::sleep(Duration::from_secs(6)).await;
        peer.write_all(b"in").await.unwrap();
        assert_eq!(conn.read(&mut buf).await.unwrap(), 2);
        tokio::time::sleep(Duration::from_secs(6)).await;
        conn.write_all(b"out").await.unwrap();
        tokio::time::sleep(Duration::from_secs(6)).await;
        peer.write_all(b"x").await.unwrap();
        assert_eq!(conn.read(&mut buf).await.unwrap(), 1);

        // Then 10 s of silence.
        let started = Instant::now();
        let err = conn.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout_waits_for_ever() {
        let (ours, mut peer) = tokio::io::duplex(1024);
        let mut conn = IdleTimeout::new(ours, None);
        let mut buf = [0u8; 4];
        let read = tokio::time::timeout(Duration::from_secs(100_000), conn.read(&mut buf));
        assert!(read.await.is_err(), "still waiting after 100000 s");
        peer.write_all(b"late").await.unwrap();
        assert_eq!(conn.read(&mut buf).await.unwrap(), 4);
    }
}
