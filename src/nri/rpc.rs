//! ttrpc over a multiplexed connection: calls into a plugin's service, and the runtime's own
//! service, whose two methods are dispatched here (ttrpc's code generator targets another
//! protobuf library than ours).

use std::collections::HashMap;
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
}

impl CallError {
    /// A plugin that timed out or lost its connection is dropped; one that answered an
    /// error stays.
    pub fn is_fatal(&self) -> bool {
        matches!(self, CallError::Timeout(_) | CallError::Connection(_) | CallError::Decode(_))
    }
}

/// Calls `method` of the plugin's service, waiting at most `timeout`.
pub async fn call<Req: prost::Message, Resp: prost::Message + Default>(
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
