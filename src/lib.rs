//! swapcri: a CRI runtime for Kubernetes nodes that run with swap.

pub mod blocking;
pub mod cgroup;
pub mod checkpoint;
pub mod client;
pub mod config;
pub mod crash;
pub mod cri;
pub mod daemon;
pub mod doctor;
pub mod error;
pub mod grpc;
pub mod image;
pub mod metrics;
pub mod model;
pub mod monitor;
pub mod network;
pub mod node;
pub mod nri;
pub mod oci;
pub mod policy;
pub mod process_tree;
pub mod sandbox;
pub mod service;
pub mod service_manager;
pub mod store;
pub mod streaming;
pub mod swap;

/// The running binary, for the helper processes the daemon starts (monitors, namespace
/// holders). `/proc/self/exe` stays valid when the file is replaced by an upgrade, so helpers
/// always match the daemon that speaks to them.
pub const SELF_EXE: &str = "/proc/self/exe";
