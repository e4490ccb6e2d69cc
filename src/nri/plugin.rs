//! One connected plugin: its connection, its registration and configuration, and calls into
//! it bounded by the request timeout.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ttrpc::r#async::transport::{Listener, Socket};
use ttrpc::r#async::{Client, Server};

use super::api;
use super::mux::Mux;
use super::rpc::{self, CallError};

/// A plugin's name and index, as it registered ("10-swapper").
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PluginId {
    pub index: String,
    pub name: String,
}

impl std::fmt::Display for PluginId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.index, self.name)
    }
}

impl PluginId {
    /// An index is two digits; a name is non-empty and has no '/' (it names files).
    pub fn new(index: &str, name: &str) -> Result<PluginId, String> {
        if index.len() != 2 || !index.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("plugin index {index:?} is not two digits"));
        }
        if name.is_empty() || name.len() > 128 || name.contains('/') || name.chars().any(char::is_control) {
            return Err(format!("plugin name {name:?} is not a valid name"));
        }
        Ok(PluginId { index: index.to_string(), name: name.to_string() })
    }

    /// "<index>-<name>" as pre-installed plugins' files are named.
    pub fn parse_file_name(file: &str) -> Result<PluginId, String> {
        let (index, name) = file.split_once('-').ok_or_else(|| format!("{file:?} is not <index>-<name>"))?;
        PluginId::new(index, name)
    }
}

/// Event bits as NRI numbers them: bit (event - 1).
pub fn event_bit(event: api::Event) -> u32 {
    1 << (event as u32 - 1)
}

/// Every event a plugin may subscribe to.
pub const VALID_EVENTS: u32 = (1 << (api::Event::Last as u32 - 1)) - 1;

pub struct Plugin {
    pub id: PluginId,
    events: AtomicU32,
    client: rpc::PluginClient,
    request_timeout: Duration,
    /// Told when the runtime closes the plugin, so its connection is let go.
    gone: tokio::sync::Notify,
    /// Answered Unimplemented for a dedicated event method: it takes StateChange only.
    state_change_only: AtomicBool,
    /// Kept for the connection's life.
    _mux: Mux,
    server: tokio::sync::Mutex<Server>,
    /// The process, for a pre-installed plugin.
    pub child: Mutex<Option<tokio::process::Child>>,
}

/// A connection before registration: the runtime's service is up and the plugin's client
/// is ready.
pub struct Pending {
    pub mux: Mux,
    pub client: Client,
    pub server: Server,
}

/// Starts the runtime's service on the connection and a client for the plugin's.
pub async fn open(
    mux: Mux,
    plugin_stream: tokio::io::DuplexStream,
    runtime_stream: tokio::io::DuplexStream,
    handler: Arc<dyn rpc::RuntimeHandler>,
) -> Result<Pending, String> {
    let listener = Listener::new(futures::stream::once(async move { Ok::<_, std::io::Error>(runtime_stream) }));
    let mut server = Server::new().register_service(rpc::runtime_service(handler)).add_listener(listener);
    server.start().await.map_err(|e| format!("starting the runtime service: {e}"))?;
    let client = Client::new(Socket::new(plugin_stream));
    Ok(Pending { mux, client, server })
}

impl Plugin {
    pub fn new(
        id: PluginId,
        pending: Pending,
        request_timeout: Duration,
        child: Option<tokio::process::Child>,
    ) -> Plugin {
        Plugin {
            id,
            events: AtomicU32::new(0),
            client: rpc::PluginClient::new(pending.client),
            request_timeout,
            gone: tokio::sync::Notify::new(),
            state_change_only: AtomicBool::new(false),
            _mux: pending.mux,
            server: tokio::sync::Mutex::new(pending.server),
            child: Mutex::new(child),
        }
    }

    /// Configure: hands over the plugin's configuration and takes its event subscription.
    pub async fn configure(&self, config: String, registration: Duration) -> Result<(), CallError> {
        let request = api::ConfigureRequest {
            config,
            runtime_name: "swapcri".into(),
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            registration_timeout: registration.as_millis() as i64,
            request_timeout: self.request_timeout.as_millis() as i64,
            nri_version: super::rpc::NRI_VERSION.into(),
        };
        let reply: api::ConfigureResponse = self.client.call("Configure", &request, registration).await?;
        let mut events = reply.events as u32 & VALID_EVENTS;
        if events == 0 {
            // Every event; validation is asked for by name only.
            events = VALID_EVENTS & !event_bit(api::Event::ValidateContainerAdjustment);
        }
        self.events.store(events, Ordering::Relaxed);
        Ok(())
    }

    /// Resolves once the runtime has closed the plugin.
    pub async fn gone(&self) {
        self.gone.notified().await
    }

    pub fn subscribed(&self, event: api::Event) -> bool {
        !self.is_closed() && self.events.load(Ordering::Relaxed) & event_bit(event) != 0
    }

    pub fn events(&self) -> u32 {
        self.events.load(Ordering::Relaxed)
    }

    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Marks the plugin gone (the caller removes it from the list) and ends its connection
    /// and process in the background: a request never waits on a plugin going away.
    pub fn close(self: &Arc<Self>) {
        if self.client.close() {
            return;
        }
        self.gone.notify_one();
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        let plugin = self.clone();
        tokio::spawn(async move {
            if let Some(mut child) = child {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            // The server's listener ended with its one connection: disconnect, not shutdown
            // (which would signal the finished accept loop).
            plugin.server.lock().await.disconnect().await;
        });
    }

    /// A call bounded by `timeout` (the request timeout unless the call has its own).
    pub async fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        method: &str,
        request: &Req,
        timeout: Option<Duration>,
    ) -> Result<Resp, CallError> {
        self.client.call(method, request, timeout.unwrap_or(self.request_timeout)).await
    }

    /// A pod or container event: its dedicated method, or StateChange (and an empty reply)
    /// for a plugin built before the dedicated methods.
    pub async fn notify_with_reply<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        method: &str,
        request: &Req,
        event: api::Event,
        pod: Option<&api::PodSandbox>,
        container: Option<&api::Container>,
    ) -> Result<Resp, CallError> {
        if !self.state_change_only.load(Ordering::Relaxed) {
            match self.call::<Req, Resp>(method, request, None).await {
                Err(CallError::Unimplemented(_)) => self.state_change_only.store(true, Ordering::Relaxed),
                other => return other,
            }
        }
        let change = api::StateChangeEvent { event: event as i32, pod: pod.cloned(), container: container.cloned() };
        self.call::<_, api::Empty>("StateChange", &change, None).await.map(|_| Resp::default())
    }

    /// An event whose reply carries nothing.
    pub async fn notify<Req: prost::Message>(
        &self,
        method: &str,
        request: &Req,
        event: api::Event,
        pod: Option<&api::PodSandbox>,
        container: Option<&api::Container>,
    ) -> Result<(), CallError> {
        self.notify_with_reply::<Req, api::Empty>(method, request, event, pod, container).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_event_bits() {
        assert_eq!(PluginId::parse_file_name("10-swapper").unwrap().to_string(), "10-swapper");
        assert_eq!(PluginId::parse_file_name("05-a-b").unwrap().name, "a-b");
        for bad in ["swapper", "1-x", "100-x", "ab-x", "10-", "10-a/b"] {
            assert!(PluginId::parse_file_name(bad).is_err(), "{bad}");
        }
        let mut ids =
            [PluginId::new("10", "b").unwrap(), PluginId::new("02", "z").unwrap(), PluginId::new("10", "a").unwrap()];
        ids.sort();
        assert_eq!(ids.map(|i| i.to_string()), ["02-z", "10-a", "10-b"]);
        assert_eq!(event_bit(api::Event::RunPodSandbox), 1);
        assert_eq!(event_bit(api::Event::CreateContainer), 8);
        assert_eq!(VALID_EVENTS, 0x3fff);
    }
}
