//! A tower layer around the gRPC server counting requests by method and status code and
//! timing them.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use tonic::codegen::http;
use tower::{Layer, Service};

use crate::metrics::Metrics;

#[derive(Clone)]
pub struct GrpcMetricsLayer(pub Arc<Metrics>);

impl<S> Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetrics { inner, metrics: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

/// The status of a unary call: in the headers for errors (trailers-only responses); a
/// response without it carries OK in its trailers.
fn code_of<B>(response: &http::Response<B>) -> String {
    let code = response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<i32>().ok())
        .unwrap_or(0);
    format!("{:?}", tonic::Code::from_i32(code))
}

impl<S, B, RB> Service<http::Request<B>> for GrpcMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>> + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.uri().path().rsplit('/').next().unwrap_or("").to_string();
        let started = Instant::now();
        let metrics = self.metrics.clone();
        let future = self.inner.call(request);
        Box::pin(async move {
            // Counted as Cancelled if the client goes before the answer (the future is dropped).
            let mut pending = Abandoned(Some((metrics, method, started)));
            let response = future.await;
            let answered = pending.0.take();
            if let (Ok(r), Some((metrics, method, started))) = (&response, answered) {
                metrics.observe_rpc(&method, &code_of(r), started.elapsed());
            }
            response
        })
    }
}

/// A call whose client left before the answer.
struct Abandoned(Option<(Arc<Metrics>, String, Instant)>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some((metrics, method, started)) = self.0.take() {
            metrics.observe_rpc(&method, "Cancelled", started.elapsed());
        }
    }
}
