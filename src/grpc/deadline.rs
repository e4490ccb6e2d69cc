//! Every call runs to completion in a task of its own: a client's deadline or disconnect
//! ends its wait, never the work, so no handler is cut between two side effects (a CNI
//! address allocated and not recorded, a runc container created and not undone). The
//! daemon waits for these tasks, bounded, when it stops.
//!
//! A call whose work may be given up without harm (a pull: nothing of it is kept half-way)
//! watches `ClientGone`, cancelled when its client stops waiting.
//!
//! Calls whose client deadline (`grpc-timeout`) passes end with DEADLINE_EXCEEDED, as the
//! gRPC protocol says. The transport's own timer would answer CANCELLED; this one fires a
//! millisecond before it, so the client learns what happened.

use std::task::{Context, Poll};
use std::time::Duration;

use crate::error::CallEnd;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::codegen::http;
use tower::{Layer, Service};

/// How much earlier than the transport's timer this one fires.
const AHEAD: Duration = Duration::from_millis(1);

/// Runs calls as tasks of `calls`, which the daemon waits for when it stops.
#[derive(Clone)]
pub struct DeadlineLayer {
    pub calls: TaskTracker,
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Deadline { inner, calls: self.calls.clone() }
    }
}

#[derive(Clone)]
pub struct Deadline<S> {
    inner: S,
    calls: TaskTracker,
}

/// Cancelled when the call's client stops waiting for it: its deadline passed, or it went
/// away. In the request's extensions.
#[derive(Debug, Clone)]
pub struct ClientGone(pub CancellationToken);

/// `grpc-timeout`: at most 8 digits and a unit (H, M, S, m, u, n).
fn parse_timeout(value: &str) -> Option<Duration> {
    let unit_at = value.len().checked_sub(1)?;
    let (digits, unit) = value.split_at(unit_at);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

impl<S, B, RB> Service<http::Request<B>> for Deadline<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let timeout = request.headers().get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(parse_timeout);
        let method = request.uri().path().to_string();
        let gone = CancellationToken::new();
        request.extensions_mut().insert(ClientGone(gone.clone()));
        let running = self.calls.spawn(self.inner.call(request));
        // Dropped with this wait (a deadline passed, the client went away) unless the call
        // answered first.
        let waiting = gone.drop_guard();
        Box::pin(async move {
            let finished = async {
                match running.await {
                    Ok(response) => response,
                    Err(e) => {
                        tracing::error!(%method, error = %e, "the call's task failed");
                        Ok(tonic::Status::from(CallEnd::TaskFailed(e.to_string())).into_http())
                    }
                }
            };
            let Some(timeout) = timeout else {
                let response = finished.await;
                waiting.disarm();
                return response;
            };
            match tokio::time::timeout(timeout.saturating_sub(AHEAD), finished).await {
                Ok(response) => {
                    waiting.disarm();
                    response
                }
                Err(_) => {
                    tracing::info!(%method, "the client's deadline passed; the call goes on to its end");
                    Ok(tonic::Status::from(CallEnd::DeadlinePassed).into_http())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_by_unit_and_bad_ones_are_ignored() {
        let cases = [
            ("1H", Some(Duration::from_secs(3600))),
            ("2M", Some(Duration::from_secs(120))),
            ("30S", Some(Duration::from_secs(30))),
            ("999m", Some(Duration::from_millis(999))),
            ("1500u", Some(Duration::from_micros(1500))),
            ("7n", Some(Duration::from_nanos(7))),
            ("", None),
            ("S", None),
            ("10", None),
            ("10x", None),
            ("-1S", None),
            ("123456789S", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_timeout(value), expected, "{value:?}");
        }
    }

    #[tokio::test]
    async fn a_call_past_its_deadline_ends_with_deadline_exceeded() {
        let never = tower::service_fn(|_: http::Request<()>| async {
            std::future::pending::<Result<http::Response<String>, std::convert::Infallible>>().await
        });
        let layer = DeadlineLayer { calls: TaskTracker::new() };
        let mut service = layer.layer(never);
        let request = http::Request::builder().header("grpc-timeout", "5m").body(()).unwrap();
        let response = service.call(request).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "4");
        // Without a deadline the call is left alone.
        let quick = tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(String::from("ok")))
        });
        let response = layer.layer(quick).call(http::Request::new(())).await.unwrap();
        assert_eq!(response.into_body(), "ok");
    }

    #[tokio::test]
    async fn a_call_whose_client_left_runs_to_its_end() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let ended = std::sync::Arc::new(AtomicUsize::new(0));
        let counter = ended.clone();
        let slow = tower::service_fn(move |_: http::Request<()>| {
            let counter = counter.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
            }
        });
        let calls = TaskTracker::new();
        let mut service = DeadlineLayer { calls: calls.clone() }.layer(slow);
        // Past the deadline the client has its answer; the work carries on.
        let request = http::Request::builder().header("grpc-timeout", "5m").body(()).unwrap();
        let response = service.call(request).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "4");
        assert_eq!(ended.load(Ordering::SeqCst), 0, "answered before the work ended");
        // A client that disconnects drops the call's future: the work carries on too.
        drop(service.call(http::Request::new(())));
        calls.close();
        tokio::time::timeout(Duration::from_secs(5), calls.wait()).await.expect("both calls ended");
        assert_eq!(ended.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_call_learns_when_its_client_stopped_waiting() {
        use std::sync::Mutex;
        // Each call hands out its ClientGone and answers after 50 ms.
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let slow = tower::service_fn(move |request: http::Request<()>| {
            record.lock().unwrap().push(request.extensions().get::<ClientGone>().cloned().expect("ClientGone"));
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
            }
        });
        let mut service = DeadlineLayer { calls: TaskTracker::new() }.layer(slow);
        let cases = [("5m", true), ("5S", false)];
        for (timeout, gone) in cases {
            let request = http::Request::builder().header("grpc-timeout", timeout).body(()).unwrap();
            service.call(request).await.unwrap();
            let token = seen.lock().unwrap().last().unwrap().0.clone();
            assert_eq!(token.is_cancelled(), gone, "deadline {timeout}");
        }
        service.call(http::Request::new(())).await.unwrap();
        assert!(!seen.lock().unwrap().last().unwrap().0.is_cancelled(), "answered, no deadline");
        // A client that disconnects drops its wait.
        drop(service.call(http::Request::new(())));
        assert!(seen.lock().unwrap().last().unwrap().0.is_cancelled(), "the client went away");
    }
}
