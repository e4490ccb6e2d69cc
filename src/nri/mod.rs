//! The runtime side of NRI, the Node Resource Interface (containerd/nri v0.12.1): plugins
//! connect over a unix socket (or are started from `plugin_path`), register, are configured
//! and synchronised with the pods and containers there are, then see every pod and container
//! event in index order. At CreateContainer they may adjust the container; their changes to
//! memory and swap pass through the swap policy (`policy::nri_memory`).

pub mod adjust;
pub mod api;
mod apply;
mod connect;
mod events;
mod launch;
mod mux;
mod plugin;
mod rpc;
mod stats;
pub mod stub;
mod validate;
mod view;

#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::Duration;

use async_trait::async_trait;

use crate::config::NriConfig;

pub use adjust::Adjustment;
pub use apply::{apply_to_resources, apply_to_spec};
pub use events::Created;
pub use plugin::PluginId;
pub use stats::{EventStats, PluginStats};

use plugin::Plugin;

/// The NRI revision swapcri speaks.
pub const NRI_VERSION: &str = "v0.12.1";

#[derive(Debug, thiserror::Error)]
pub enum NriError {
    #[error("NRI plugin {plugin} failed {event}: {message}")]
    Plugin { plugin: String, event: &'static str, message: String },
    #[error("NRI plugin {plugin} did not answer {event} within {timeout:?} and was disconnected")]
    Timeout { plugin: String, event: &'static str, timeout: Duration },
    #[error("NRI plugin {plugin} was lost during {event}: {message}")]
    Lost { plugin: String, event: &'static str, message: String },
    #[error("NRI plugins {first} and {second} both adjust {field}")]
    Conflict { field: String, first: String, second: String },
    #[error("NRI adjustment of {field} by {plugin} refused: {reason}")]
    Refused { plugin: String, field: String, reason: String },
    #[error("NRI plugin {plugin} adjusts {field}, which swapcri does not apply")]
    Unsupported { plugin: String, field: String },
}

/// What NRI needs of the runtime: its pods and containers, and the updates and evictions
/// plugins ask for.
#[async_trait]
pub trait Domain: Send + Sync {
    /// Every pod and container there is now.
    fn snapshot(&self) -> (Vec<api::PodSandbox>, Vec<api::Container>);
    /// Applies a plugin's update to a container's resources.
    async fn update_container(&self, plugin: &PluginId, update: &api::ContainerUpdate) -> Result<(), String>;
    /// Stops a container a plugin evicts.
    async fn evict_container(&self, plugin: &PluginId, eviction: &api::ContainerEviction) -> Result<(), String>;
}

/// The adaptation: connected plugins, in index order, and the gate that keeps events and
/// synchronisation apart.
pub struct Nri {
    config: NriConfig,
    plugins: RwLock<Vec<Arc<Plugin>>>,
    /// Events hold it shared from their dispatch until the runtime has recorded their
    /// outcome; a plugin's synchronisation holds it alone, so every pod and container is
    /// either in its snapshot or reaches it as an event.
    gate: tokio::sync::RwLock<()>,
    domain: OnceLock<Weak<dyn Domain>>,
    stats: stats::Stats,
}

impl Nri {
    pub fn new(config: NriConfig) -> Arc<Nri> {
        Arc::new(Nri {
            config,
            plugins: RwLock::new(Vec::new()),
            gate: tokio::sync::RwLock::new(()),
            domain: OnceLock::new(),
            stats: stats::Stats::default(),
        })
    }

    pub fn enabled(&self) -> bool {
        self.config.enable
    }

    /// Held across an event and the recording of its outcome (see `gate`).
    pub async fn gate(&self) -> Option<tokio::sync::RwLockReadGuard<'_, ()>> {
        if self.enabled() {
            Some(self.gate.read().await)
        } else {
            None
        }
    }

    /// Opens the socket and starts the pre-installed plugins.
    pub async fn start(self: &Arc<Self>, domain: Weak<dyn Domain>) -> std::io::Result<()> {
        if !self.enabled() {
            return Ok(());
        }
        let _ = self.domain.set(domain);
        if !self.config.disable_connections {
            let listener = connect::bind(&self.config.socket_path)?;
            tokio::spawn(self.clone().accept_loop(listener));
            tracing::info!(socket = %self.config.socket_path.display(), "NRI socket open");
        }
        launch::start_all(self).await;
        Ok(())
    }

    /// Tells every plugin the runtime is going down.
    pub async fn shutdown(&self) {
        for plugin in self.connected() {
            let _ = plugin.call::<_, api::Empty>("Shutdown", &api::Empty {}, None).await;
            plugin.close();
        }
    }

    fn domain(&self) -> Option<Arc<dyn Domain>> {
        self.domain.get().and_then(Weak::upgrade)
    }

    fn connected(&self) -> Vec<Arc<Plugin>> {
        self.plugins.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn registration_timeout(&self) -> Duration {
        Duration::from_millis(self.config.registration_timeout_ms)
    }

    fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    /// Drops a plugin from the list and closes it.
    fn remove(&self, plugin: &Arc<Plugin>, why: &str) {
        self.plugins.write().unwrap_or_else(|p| p.into_inner()).retain(|p| !Arc::ptr_eq(p, plugin));
        if plugin.is_closed() {
        } else if why == "connection closed" {
            tracing::info!(plugin = %plugin.id, "NRI plugin disconnected");
        } else {
            tracing::warn!(plugin = %plugin.id, "NRI plugin disconnected: {why}");
        }
        plugin.close();
        self.stats.disconnected(&plugin.id);
    }

    /// Per-plugin figures for the metrics endpoint.
    pub fn plugin_stats(&self) -> Vec<PluginStats> {
        self.stats.snapshot()
    }

    /// The plugins connected now, in call order.
    pub fn plugin_names(&self) -> Vec<String> {
        self.connected().iter().map(|p| p.id.to_string()).collect()
    }

    /// Where CDI specs are read.
    pub fn cdi_spec_dirs(&self) -> &[String] {
        &self.config.cdi_spec_dirs
    }

    /// Whether a swap or memory adjustment beyond the policy may stand.
    pub fn swap_allowances(&self) -> crate::policy::nri_memory::Allowances {
        crate::policy::nri_memory::Allowances {
            raise: self.config.allow_swap_raise,
            protected: self.config.allow_swap_for_protected,
        }
    }
}
