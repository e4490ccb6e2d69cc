//! The runtime side of NRI, the Node Resource Interface (containerd/nri v0.12.1): plugins
//! connect over a unix socket (or are started from `plugin_path`), register, are configured
//! and synchronised with the pods and containers there are, then see every pod and container
//! event in index order. At CreateContainer they may adjust the container; their changes to
//! memory and swap pass through the swap policy (`policy::nri_memory`).

mod adaptation;
pub mod adjust;
pub mod api;
mod apply;
mod connect;
mod error;
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

pub use adaptation::{Domain, Nri};
pub use adjust::Adjustment;
pub use apply::{apply_to_resources, apply_to_spec};
pub use error::NriError;
pub use events::Created;
pub use plugin::PluginId;
pub use rpc::NRI_VERSION;
pub use stats::{EventStats, PluginStats};
