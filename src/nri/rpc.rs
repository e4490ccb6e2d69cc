//! ttrpc over a multiplexed connection: calls into a plugin's service, and the runtime's own
//! service, whose two methods are dispatched here (ttrpc's code generator targets another
//! protobuf library than ours).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ttrpc::r#async::{MethodHandler, Service, TtrpcContext};

use super::api;

pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";

/// How a call into a plugin failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the plugin does not implement {0}")]
    Unimplemented(String),
    #[error("{0}")]
    Failed(String),
    #[error("connection lost: {0}")]
    Connection(String),
    #[error("undecodable answer: {0}")]
    Decode(#[from] prost::DecodeError),
    /// The plugin was dropped while the call waited its turn.
    #[error("the plugin was dropped")]
    Closed,
}

impl CallError {
    /// A plugin that timed out or lost its connection is dropped; one that answered an
    /// error stays.
    pub fn is_fatal(&self) -> bool {
        matches!(self, CallError::Timeout(_) | CallError::Connection(_) | CallError::Decode(_))
    }
}

/// A plugin's client whose calls go out one at a time, in the order they were made. The
/// ttrpc client numbers a request before it queues the frame, so two calls at once could
/// reach the socket with the higher stream ID first, and a Go ttrpc server refuses the
/// lower one ("StreamID cannot be re-used and must increment").
pub struct PluginClient {
    client: ttrpc::r#async::Client,
    /// Fair: waiting calls take their turn first come, first served.
    turn: tokio::sync::Mutex<()>,
    closed: AtomicBool,
}

impl PluginClient {
    pub fn new(client: ttrpc::r#async::Client) -> PluginClient {
        PluginClient { client, turn: tokio::sync::Mutex::new(()), closed: AtomicBool::new(false) }
    }

    /// Calls `method` once the calls before it are answered; `timeout` counts from when it
    /// goes out (each call before it is bounded by its own). A call whose plugin was
    /// dropped meanwhile fails at once with `Closed`.
    pub async fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        method: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        let _turn = self.turn.lock().await;
        if self.is_closed() {
            return Err(CallError::Closed);
        }
        call(&self.client, method, request, timeout).await
    }

    /// Marks the client dropped; true if it already was.
    pub fn close(&self) -> bool {
        self.closed.swap(true, Ordering::Relaxed)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
}

/// Calls `method` of the plugin's service, waiting at most `timeout`.
async fn call<Req: prost::Message, Resp: prost::Message + Default>(
    client: &ttrpc::r#async::Client,
    method: &str,
    request: &Req,
    timeout: Duration,
) -> Result<Resp, CallError> {
    let req = ttrpc::Request {
        service: PLUGIN_SERVICE.to_string(),
        method: method.to_string(),
        payload: request.encode_to_vec(),
        timeout_nano: timeout.as_nanos().min(i64::MAX as u128) as i64,
        metadata: Vec::new(),
    };
    // The client enforces the deadline itself; this bound also covers a stuck write.
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(timeout + Duration::from_millis(100), client.request(req)).await;
    let response = match answer {
        Err(_) => return Err(CallError::Timeout(timeout)),
        // The client's own deadline error is not typed: an error at the deadline is one.
        Ok(Err(_)) if started.elapsed() >= timeout => return Err(CallError::Timeout(timeout)),
        Ok(Err(e)) => return Err(classify(method, e, timeout)),
        Ok(Ok(response)) => response,
    };
    if let Some(status) = response.status.as_ref().filter(|s| s.code != ttrpc::Code::OK as i32) {
        return Err(status_error(method, status));
    }
    Ok(Resp::decode(response.payload.as_slice())?)
}

fn status_error(method: &str, status: &ttrpc::Status) -> CallError {
    if status.code == ttrpc::Code::UNIMPLEMENTED as i32 {
        CallError::Unimplemented(method.to_string())
    } else if status.code == ttrpc::Code::DEADLINE_EXCEEDED as i32 {
        CallError::Failed(format!("deadline exceeded: {}", status.message))
    } else {
        CallError::Failed(status.message.clone())
    }
}

fn classify(method: &str, e: ttrpc::Error, timeout: Duration) -> CallError {
    match e {
        ttrpc::Error::RpcStatus(status) if status.code == ttrpc::Code::DEADLINE_EXCEEDED as i32 => {
            CallError::Timeout(timeout)
        }
        ttrpc::Error::RpcStatus(status) => status_error(method, &status),
        other => CallError::Connection(other.to_string()),
    }
}

/// What the runtime's service does for one connected plugin.
#[async_trait]
pub trait RuntimeHandler: Send + Sync + 'static {
    async fn register(&self, request: api::RegisterPluginRequest) -> Result<(), String>;
    async fn update_containers(
        &self,
        request: api::UpdateContainersRequest,
    ) -> Result<api::UpdateContainersResponse, String>;
}

/// The runtime's ttrpc service for one connection.
pub fn runtime_service(handler: Arc<dyn RuntimeHandler>) -> HashMap<String, Service> {
    let mut methods: HashMap<String, Box<dyn MethodHandler + Send + Sync>> = HashMap::new();
    methods.insert("RegisterPlugin".into(), Box::new(Register(handler.clone())));
    methods.insert("UpdateContainers".into(), Box::new(Update(handler)));
    HashMap::from([(RUNTIME_SERVICE.to_string(), Service { methods, streams: HashMap::new() })])
}

struct Register(Arc<dyn RuntimeHandler>);
struct Update(Arc<dyn RuntimeHandler>);

#[async_trait]
impl MethodHandler for Register {
    async fn handler(&self, _ctx: TtrpcContext, req: ttrpc::Request) -> ttrpc::Result<ttrpc::Response> {
        let request = decode::<api::RegisterPluginRequest>(&req)?;
        Ok(respond(self.0.register(request).await.map(|()| api::Empty {})))
    }
}

#[async_trait]
impl MethodHandler for Update {
    async fn handler(&self, _ctx: TtrpcContext, req: ttrpc::Request) -> ttrpc::Result<ttrpc::Response> {
        let request = decode::<api::UpdateContainersRequest>(&req)?;
        Ok(respond(self.0.update_containers(request).await))
    }
}

fn decode<M: prost::Message + Default>(req: &ttrpc::Request) -> ttrpc::Result<M> {
    M::decode(req.payload.as_slice())
        .map_err(|e| ttrpc::Error::RpcStatus(ttrpc::get_status(ttrpc::Code::INVALID_ARGUMENT, e.to_string())))
}

fn respond<M: prost::Message>(result: Result<M, String>) -> ttrpc::Response {
    match result {
        Ok(message) => {
            ttrpc::Response { status: Some(ttrpc::get_status(ttrpc::Code::OK, "")), payload: message.encode_to_vec() }
        }
        Err(message) => ttrpc::Response {
            status: Some(ttrpc::get_status(ttrpc::Code::FAILED_PRECONDITION, message)),
            payload: Vec::new(),
        },
    }
}

/// The NRI revision swapcri speaks.
pub const NRI_VERSION: &str = "v0.12.1";

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A plugin's side read frame by frame: each request is answered with an empty
    /// response (status OK) once its stream ID is checked against the one before.
    async fn answer_in_order(mut socket: tokio::io::DuplexStream, calls: usize) -> Vec<u32> {
        let mut ids = Vec::with_capacity(calls);
        for _ in 0..calls {
            let mut header = [0u8; 10];
            socket.read_exact(&mut header).await.unwrap();
            let length = u32::from_be_bytes(header[0..4].try_into().unwrap()) as usize;
            let stream = u32::from_be_bytes(header[4..8].try_into().unwrap());
            let mut body = vec![0u8; length];
            socket.read_exact(&mut body).await.unwrap();
            ids.push(stream);
            let mut reply = [0u8; 10];
            reply[4..8].copy_from_slice(&stream.to_be_bytes());
            reply[8] = 2; // a response
            socket.write_all(&reply).await.unwrap();
        }
        ids
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_calls_reach_the_plugin_in_stream_order() {
        const CALLS: usize = 400;
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let client =
            Arc::new(PluginClient::new(ttrpc::r#async::Client::new(ttrpc::r#async::transport::Socket::new(ours))));
        let plugin = tokio::spawn(answer_in_order(theirs, CALLS));
        let calls = (0..CALLS).map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                client.call::<_, api::Empty>("StartContainer", &api::Empty {}, Duration::from_secs(10)).await
            })
        });
        for result in futures::future::join_all(calls).await {
            result.unwrap().unwrap();
        }
        let ids = plugin.await.unwrap();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "stream IDs out of order: {ids:?}");
    }

    #[tokio::test]
    async fn a_closed_client_refuses_calls_at_once() {
        let (ours, _theirs) = tokio::io::duplex(1024);
        let client = PluginClient::new(ttrpc::r#async::Client::new(ttrpc::r#async::transport::Socket::new(ours)));
        assert!(!client.close());
        assert!(client.close(), "closed once");
        let result = client.call::<_, api::Empty>("StartContainer", &api::Empty {}, Duration::from_secs(10)).await;
        assert!(matches!(result, Err(CallError::Closed)), "{result:?}");
    }
}
