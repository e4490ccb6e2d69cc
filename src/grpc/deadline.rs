//! Calls whose client deadline (`grpc-timeout`) passes end with DEADLINE_EXCEEDED, as the
//! gRPC protocol says. The transport's own timer would answer CANCELLED; this one fires a
//! millisecond before it, so the client learns what happened.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use tonic::codegen::http;
use tower::{Layer, Service};

/// How much earlier than the transport's timer this one fires.
const AHEAD: Duration = Duration::from_millis(1);

#[derive(Clone, Copy)]
pub struct DeadlineLayer;

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Deadline { inner }
    }
}

#[derive(Clone)]
pub struct Deadline<S> {
    inner: S,
}

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
    B: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let timeout = request.headers().get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(parse_timeout);
        let future = self.inner.call(request);
        Box::pin(async move {
            let Some(timeout) = timeout else { return future.await };
            match tokio::time::timeout(timeout.saturating_sub(AHEAD), future).await {
                Ok(response) => response,
                Err(_) => Ok(tonic::Status::deadline_exceeded("the client's deadline passed").into_http()),
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
        let mut service = DeadlineLayer.layer(never);
        let request = http::Request::builder().header("grpc-timeout", "5m").body(()).unwrap();
        let response = service.call(request).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "4");
        // Without a deadline the call is left alone.
        let quick = tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(String::from("ok")))
        });
        let response = DeadlineLayer.layer(quick).call(http::Request::new(())).await.unwrap();
        assert_eq!(response.into_body(), "ok");
    }
}
