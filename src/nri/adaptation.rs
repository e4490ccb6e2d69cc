//! The adaptation: the connected plugins in index order, the gate that keeps events and
//! synchronisation apart, and the runtime behind `Domain`.

use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::Duration;

use async_trait::async_trait;

use super::api;
use super::plugin::{Plugin, PluginId};
use super::stats::{self, PluginStats};
use crate::config::NriConfig;

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
    pub(super) config: NriConfig,
    pub(super) plugins: RwLock<Vec<Arc<Plugin>>>,
    /// Events hold it shared from their dispatch until the runtime has recorded their
    /// outcome; a plugin's synchronisation holds it alone, so every pod and container is
    /// either in its snapshot or reaches it as an event.
    pub(super) gate: tokio::sync::RwLock<()>,
    pub(super) domain: OnceLock<Weak<dyn Domain>>,
    pub(super) stats: stats::Stats,
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

    /// Tells every plugin the runtime is going down.
    pub async fn shutdown(&self) {
        for plugin in self.connected() {
            let _ = plugin.call::<_, api::Empty>("Shutdown", &api::Empty {}, None).await;
            plugin.close();
        }
    }

    pub(super) fn domain(&self) -> Option<Arc<dyn Domain>> {
        self.domain.get().and_then(Weak::upgrade)
    }

    pub(super) fn connected(&self) -> Vec<Arc<Plugin>> {
        self.plugins.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn registration_timeout(&self) -> Duration {
        Duration::from_millis(self.config.registration_timeout_ms)
    }

    pub(super) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.config.request_timeout_ms)
    }

    /// Drops a plugin from the list and closes it.
    pub(super) fn remove(&self, plugin: &Arc<Plugin>, why: &str) {
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
