//! A plugin's arrival: the socket, registration, configuration and synchronisation.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use async_trait::async_trait;
use tokio::net::UnixListener;
use tokio::sync::oneshot;

use super::adaptation::{Domain, Nri};
use super::launch::Launched;
use super::mux::{Mux, Split};
use super::plugin::{self, Plugin, PluginId};
use super::{api, rpc};

/// Pods and containers per Synchronize message: well under ttrpc's 4 MiB for any pod.
const SYNC_BATCH: usize = 64;

/// The socket, 0600 in a 0700 directory it makes; a stale socket from an earlier run goes,
/// but one that answers is another runtime's (containerd and CRI-O serve NRI at the same
/// default path): `AddrInUse`, and it stays.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            crate::store::private::create_dir_all(dir)?;
        }
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("{} is served by another process", path.display()),
        ));
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

impl Nri {
    /// Opens the socket and starts the pre-installed plugins.
    pub async fn start(self: &Arc<Self>, domain: Weak<dyn Domain>) -> std::io::Result<()> {
        if !self.enabled() {
            return Ok(());
        }
        let _ = self.domain.set(domain);
        if !self.config.disable_connections {
            match bind(&self.config.socket_path) {
                Ok(listener) => {
                    tokio::spawn(self.clone().accept_loop(listener));
                    tracing::info!(socket = %self.config.socket_path.display(), "NRI socket open");
                }
                // Another runtime on the node serves NRI there: its plugins stay its own.
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => tracing::warn!(
                    error = %e,
                    "NRI: external plugins cannot connect to swapcri; set [nri] socket_path to a path of its own"
                ),
                Err(e) => return Err(e),
            }
        }
        super::launch::start_all(self).await;
        Ok(())
    }

    pub(super) async fn accept_loop(self: Arc<Self>, listener: UnixListener) {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let nri = self.clone();
                    tokio::spawn(async move { nri.handshake(stream, None).await });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "NRI socket accept");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Registration, Configure and Synchronize, within the registration timeout; then the
    /// plugin sees events until its connection ends.
    pub(super) async fn handshake(self: Arc<Self>, stream: tokio::net::UnixStream, launched: Option<Launched>) {
        let Split { mux, plugin: plugin_conn, runtime: runtime_conn, closed } = Mux::split(stream);
        let (registered_tx, registered) = oneshot::channel();
        let handler = Arc::new(Connection {
            nri: Arc::downgrade(&self),
            id: OnceLock::new(),
            registered: Mutex::new(Some(registered_tx)),
        });
        let pending = match plugin::open(mux, plugin_conn, runtime_conn, handler.clone()).await {
            Ok(p) => p,
            Err(e) => return tracing::warn!("NRI connection: {e}"),
        };
        let expected = launched.as_ref().map(|l| l.id.clone());
        let id = match tokio::time::timeout(self.registration_timeout(), registered).await {
            Ok(Ok(request)) => match self.registered_id(&request, expected.as_ref()) {
                Ok(id) => id,
                Err(e) => return tracing::warn!("NRI plugin refused: {e}"),
            },
            _ => return tracing::warn!(plugin = ?expected, "NRI plugin did not register in time"),
        };
        let _ = handler.id.set(id.clone());
        let (child, config) = match launched {
            Some(l) => (Some(l.child), l.config),
            None => (None, crate::blocking::run(|| super::launch::config_for(&self.config.plugin_config_path, &id))),
        };
        let plugin = Arc::new(Plugin::new(id.clone(), pending, self.request_timeout(), child));
        if let Err(e) = plugin.configure(config, self.registration_timeout()).await {
            tracing::warn!(plugin = %id, error = %e, "NRI plugin configuration failed");
            return plugin.close();
        }
        if let Err(e) = self.synchronize(&plugin).await {
            tracing::warn!(plugin = %id, error = %e, "NRI plugin synchronisation failed");
            return plugin.close();
        }
        self.stats.connected(&id);
        tracing::info!(plugin = %id, events = format!("{:#x}", plugin.events()), "NRI plugin connected");
        // Until the plugin goes, or the runtime drops it (the connection then goes with it).
        let why = tokio::select! {
            why = closed => why.unwrap_or_else(|_| "connection closed".into()),
            () = plugin.gone() => "closed by the runtime".into(),
        };
        self.remove(&plugin, &why);
    }

    /// The plugin's name and index, checked. A connected plugin of the same name and index is
    /// replaced: a plugin that restarts may register before its old connection is seen to
    /// close (containerd keeps both; two instances would then adjust every container twice).
    fn registered_id(
        &self,
        request: &api::RegisterPluginRequest,
        expected: Option<&PluginId>,
    ) -> Result<PluginId, String> {
        let id = match expected {
            // A launched plugin's name and index are those of its file.
            Some(id) => id.clone(),
            None => PluginId::new(&request.plugin_idx, &request.plugin_name)?,
        };
        for earlier in self.connected().iter().filter(|p| p.id == id) {
            self.remove(earlier, "replaced by a new connection with the same name and index");
        }
        Ok(id)
    }

    /// Sends the pods and containers there are, in batches, with the event gate held so
    /// none is created or removed unseen; the plugin joins the event list before the gate
    /// opens. Updates it asks for are applied afterwards.
    async fn synchronize(&self, plugin: &Arc<Plugin>) -> Result<(), String> {
        let guard = self.gate.write().await;
        let (pods, containers) = self.domain().map(|d| d.snapshot()).unwrap_or_default();
        let batches = pods.len().max(containers.len()).div_ceil(SYNC_BATCH).max(1);
        let mut updates = Vec::new();
        for n in 0..batches {
            let request = api::SynchronizeRequest {
                pods: batch(&pods, n),
                containers: batch(&containers, n),
                more: n + 1 < batches,
            };
            let reply: api::SynchronizeResponse = plugin
                .call("Synchronize", &request, Some(self.registration_timeout()))
                .await
                .map_err(|e| e.to_string())?;
            updates.extend(reply.update);
        }
        {
            let mut list = self.plugins.write().unwrap_or_else(|p| p.into_inner());
            list.push(plugin.clone());
            list.sort_by(|a, b| a.id.cmp(&b.id));
        }
        drop(guard);
        self.apply_updates(&plugin.id, updates, Vec::new()).await;
        Ok(())
    }

    /// Plugin-asked updates and evictions; each failure is logged and returned.
    pub(super) async fn apply_updates(
        &self,
        plugin: &PluginId,
        updates: Vec<api::ContainerUpdate>,
        evictions: Vec<api::ContainerEviction>,
    ) -> Vec<api::ContainerUpdate> {
        let Some(domain) = self.domain() else { return updates };
        let mut failed = Vec::new();
        for update in updates {
            if let Err(e) = domain.update_container(plugin, &update).await {
                tracing::warn!(plugin = %plugin, container = %update.container_id, error = %e, "NRI update failed");
                if !update.ignore_failure {
                    failed.push(update);
                }
            }
        }
        for eviction in evictions {
            if let Err(e) = domain.evict_container(plugin, &eviction).await {
                tracing::warn!(plugin = %plugin, container = %eviction.container_id, error = %e, "NRI eviction failed");
            }
        }
        failed
    }
}

fn batch<T: Clone>(all: &[T], n: usize) -> Vec<T> {
    all.iter().skip(n * SYNC_BATCH).take(SYNC_BATCH).cloned().collect()
}

/// The runtime's service for one connection.
struct Connection {
    nri: Weak<Nri>,
    id: OnceLock<PluginId>,
    registered: Mutex<Option<oneshot::Sender<api::RegisterPluginRequest>>>,
}

#[async_trait]
impl rpc::RuntimeHandler for Connection {
    async fn register(&self, request: api::RegisterPluginRequest) -> Result<(), String> {
        let sender = self.registered.lock().unwrap_or_else(|p| p.into_inner()).take();
        let sender = sender.ok_or("already registered")?;
        sender.send(request).map_err(|_| "registration is over".to_string())
    }

    async fn update_containers(
        &self,
        request: api::UpdateContainersRequest,
    ) -> Result<api::UpdateContainersResponse, String> {
        let (Some(nri), Some(id)) = (self.nri.upgrade(), self.id.get()) else {
            return Err("the plugin is not registered".into());
        };
        let failed = nri.apply_updates(id, request.update, Vec::new()).await;
        // An eviction stops a container, which is an event for every plugin, this one
        // included: its calls go out one at a time, so a plugin asking from inside an event
        // handler would wait on itself. The answer does not wait for the evictions.
        if !request.evict.is_empty() {
            let id = id.clone();
            tokio::spawn(async move { nri.apply_updates(&id, Vec::new(), request.evict).await });
        }
        Ok(api::UpdateContainersResponse { failed })
    }
}
