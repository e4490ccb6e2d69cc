//! The plugin side of NRI, for plugins written in Rust (swapcri's tests and its example
//! plugin use it): connects to a runtime's socket, or takes the socket a runtime started it
//! with, registers, and answers the runtime's calls through a `Handler`.

use std::collections::HashMap;
use std::os::fd::FromRawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ttrpc::r#async::transport::{Listener, Socket};
use ttrpc::r#async::{Client, MethodHandler, Server, Service, TtrpcContext};

use super::api;
use super::mux::{Mux, Split};
use super::rpc::{PLUGIN_SERVICE, RUNTIME_SERVICE};

/// What a plugin does. Every method has a default that does nothing.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// The events to subscribe to (NRI's bits; 0: all) given the configuration.
    async fn configure(&self, _config: &str) -> Result<u32, String> {
        Ok(0)
    }
    async fn synchronize(
        &self,
        _pods: Vec<api::PodSandbox>,
        _containers: Vec<api::Container>,
    ) -> Result<Vec<api::ContainerUpdate>, String> {
        Ok(Vec::new())
    }
    async fn create_container(
        &self,
        _pod: api::PodSandbox,
        _container: api::Container,
    ) -> Result<api::CreateContainerResponse, String> {
        Ok(Default::default())
    }
    /// Every other event, by its method name ("StartContainer", ...).
    async fn event(
        &self,
        _method: &str,
        _pod: Option<api::PodSandbox>,
        _container: Option<api::Container>,
    ) -> Result<(), String> {
        Ok(())
    }
}

/// A connected plugin, configured and synchronised. Dropping it disconnects.
pub struct Stub {
    client: Client,
    _server: Server,
    _mux: Mux,
    closed: tokio::sync::oneshot::Receiver<String>,
}

/// A plugin's connection failed.
#[derive(Debug, thiserror::Error)]
#[error("NRI plugin: {0}")]
pub struct StubError(String);

impl Stub {
    /// Connects to `socket` and registers as `<index>-<name>`.
    pub async fn connect(socket: &Path, index: &str, name: &str, handler: Arc<dyn Handler>) -> Result<Stub, StubError> {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| StubError(format!("{}: {e}", socket.display())))?;
        Stub::start(stream, index, name, handler).await
    }

    /// A plugin the runtime started: its socket (NRI_PLUGIN_SOCKET), name and index from the
    /// environment.
    pub async fn from_env(handler: Arc<dyn Handler>) -> Result<Stub, StubError> {
        let var = |k: &str| std::env::var(k).map_err(|_| StubError(format!("{k} is not set")));
        let fd: i32 =
            var("NRI_PLUGIN_SOCKET")?.parse().map_err(|_| StubError("NRI_PLUGIN_SOCKET is not a descriptor".into()))?;
        // SAFETY: the runtime handed this descriptor over for the plugin's sole use.
        let std = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
        std.set_nonblocking(true).map_err(|e| StubError(e.to_string()))?;
        let stream = tokio::net::UnixStream::from_std(std).map_err(|e| StubError(e.to_string()))?;
        Stub::start(stream, &var("NRI_PLUGIN_IDX")?, &var("NRI_PLUGIN_NAME")?, handler).await
    }

    /// Registers over a connection already made, and returns once the runtime has
    /// configured and synchronised the plugin.
    pub async fn start(
        stream: tokio::net::UnixStream,
        index: &str,
        name: &str,
        handler: Arc<dyn Handler>,
    ) -> Result<Stub, StubError> {
        let Split { mux, plugin, runtime, closed } = Mux::split(stream);
        let listener = Listener::new(futures::stream::once(async move { Ok::<_, std::io::Error>(plugin) }));
        let sync = Arc::new(SyncState::default());
        let mut server = Server::new().register_service(service(handler, sync.clone())).add_listener(listener);
        server.start().await.map_err(|e| StubError(e.to_string()))?;
        let client = Client::new(Socket::new(runtime));
        let stub = Stub { client, _server: server, _mux: mux, closed };
        let request = api::RegisterPluginRequest {
            plugin_name: name.into(),
            plugin_idx: index.into(),
            nri_version: super::rpc::NRI_VERSION.into(),
        };
        let synchronised = sync.done.notified();
        stub.call::<_, api::Empty>("RegisterPlugin", &request).await?;
        let mut stub = stub;
        tokio::select! {
            _ = synchronised => Ok(stub),
            why = &mut stub.closed => Err(StubError(format!("closed before synchronisation: {}", why.unwrap_or_default()))),
        }
    }

    async fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        method: &str,
        request: &Req,
    ) -> Result<Resp, StubError> {
        let req = ttrpc::Request {
            service: RUNTIME_SERVICE.into(),
            method: method.into(),
            payload: request.encode_to_vec(),
            timeout_nano: Duration::from_secs(10).as_nanos() as i64,
            metadata: Vec::new(),
        };
        let response = self.client.request(req).await.map_err(|e| StubError(format!("{method}: {e}")))?;
        if let Some(status) = response.status.filter(|s| s.code != ttrpc::Code::OK as i32) {
            return Err(StubError(format!("{method}: {}", status.message)));
        }
        Resp::decode(response.payload.as_slice()).map_err(|e| StubError(e.to_string()))
    }

    /// Asks the runtime to update (and evict) containers; returns the updates that failed.
    pub async fn update_containers(
        &self,
        update: Vec<api::ContainerUpdate>,
        evict: Vec<api::ContainerEviction>,
    ) -> Result<Vec<api::ContainerUpdate>, StubError> {
        let reply: api::UpdateContainersResponse =
            self.call("UpdateContainers", &api::UpdateContainersRequest { update, evict }).await?;
        Ok(reply.failed)
    }

    /// Resolves when the runtime closes the connection.
    pub async fn closed(self) -> String {
        self.closed.await.unwrap_or_else(|_| "connection closed".into())
    }
}

const METHODS: [&str; 17] = [
    "Configure",
    "Synchronize",
    "Shutdown",
    "RunPodSandbox",
    "UpdatePodSandbox",
    "PostUpdatePodSandbox",
    "StopPodSandbox",
    "RemovePodSandbox",
    "CreateContainer",
    "PostCreateContainer",
    "StartContainer",
    "PostStartContainer",
    "UpdateContainer",
    "PostUpdateContainer",
    "StopContainer",
    "RemoveContainer",
    "StateChange",
];

/// Synchronize batches collected until the last, and the word that it came.
#[derive(Default)]
struct SyncState {
    batches: std::sync::Mutex<(Vec<api::PodSandbox>, Vec<api::Container>)>,
    done: tokio::sync::Notify,
}

fn service(handler: Arc<dyn Handler>, sync: Arc<SyncState>) -> HashMap<String, Service> {
    let mut methods: HashMap<String, Box<dyn MethodHandler + Send + Sync>> = HashMap::new();
    for method in METHODS {
        methods.insert(method.into(), Box::new(Dispatch { handler: handler.clone(), method, sync: sync.clone() }));
    }
    HashMap::from([(PLUGIN_SERVICE.to_string(), Service { methods, streams: HashMap::new() })])
}

struct Dispatch {
    handler: Arc<dyn Handler>,
    method: &'static str,
    sync: Arc<SyncState>,
}

/// The pod and container every event request carries (fields 1 and 2, or 2 and 3 in
/// StateChange), read without knowing the request's type.
#[derive(Clone, PartialEq, prost::Message)]
struct PodAndContainer {
    #[prost(message, optional, tag = "1")]
    pod: Option<api::PodSandbox>,
    #[prost(message, optional, tag = "2")]
    container: Option<api::Container>,
}

impl Dispatch {
    async fn answer(&self, payload: &[u8]) -> Result<Vec<u8>, String> {
        let h = &self.handler;
        let bad = |e: prost::DecodeError| e.to_string();
        use prost::Message;
        Ok(match self.method {
            "Configure" => {
                let r = api::ConfigureRequest::decode(payload).map_err(bad)?;
                api::ConfigureResponse { events: h.configure(&r.config).await? as i32 }.encode_to_vec()
            }
            "Synchronize" => {
                let r = api::SynchronizeRequest::decode(payload).map_err(bad)?;
                let (pods, containers) = {
                    let mut batches = self.sync.batches.lock().unwrap_or_else(|p| p.into_inner());
                    batches.0.extend(r.pods);
                    batches.1.extend(r.containers);
                    if r.more {
                        return Ok(api::SynchronizeResponse { update: Vec::new(), more: true }.encode_to_vec());
                    }
                    std::mem::take(&mut *batches)
                };
                let update = h.synchronize(pods, containers).await?;
                self.sync.done.notify_one();
                api::SynchronizeResponse { update, more: false }.encode_to_vec()
            }
            "CreateContainer" => {
                let r = api::CreateContainerRequest::decode(payload).map_err(bad)?;
                h.create_container(r.pod.unwrap_or_default(), r.container.unwrap_or_default()).await?.encode_to_vec()
            }
            "UpdatePodSandbox" => {
                let r = api::UpdatePodSandboxRequest::decode(payload).map_err(bad)?;
                h.event("UpdatePodSandbox", r.pod, None).await?;
                Vec::new()
            }
            "StateChange" => {
                let r = api::StateChangeEvent::decode(payload).map_err(bad)?;
                h.event("StateChange", r.pod, r.container).await?;
                api::Empty {}.encode_to_vec()
            }
            method => {
                let r = PodAndContainer::decode(payload).map_err(bad)?;
                h.event(method, r.pod, r.container).await?;
                // Every other reply's fields are optional: empty bytes decode as any of them.
                Vec::new()
            }
        })
    }
}

#[async_trait]
impl MethodHandler for Dispatch {
    async fn handler(&self, _ctx: TtrpcContext, req: ttrpc::Request) -> ttrpc::Result<ttrpc::Response> {
        Ok(match self.answer(&req.payload).await {
            Ok(payload) => ttrpc::Response { status: Some(ttrpc::get_status(ttrpc::Code::OK, "")), payload },
            Err(message) => {
                ttrpc::Response { status: Some(ttrpc::get_status(ttrpc::Code::UNKNOWN, message)), payload: Vec::new() }
            }
        })
    }
}
