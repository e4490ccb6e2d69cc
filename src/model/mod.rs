//! Identifiers, records and state machines shared across layers.

pub mod bytes;
pub mod cgroup_files;
pub mod cgroup_layout;
pub mod cgroup_stats;
pub mod container;
pub mod error_kind;
pub mod handler;
pub mod ids;
pub mod image;
pub mod memory;
pub mod node;
pub mod sandbox;
pub mod user;
pub mod userns;
