//! swapcri: a CRI runtime for Kubernetes nodes that run with swap.

pub mod cgroup;
pub mod client;
pub mod config;
pub mod daemon;
pub mod error;
pub mod grpc;
pub mod image;
pub mod model;
pub mod monitor;
pub mod node;
pub mod oci;
pub mod policy;
pub mod sandbox;
pub mod service;
pub mod store;
