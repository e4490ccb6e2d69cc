//! What the calls work with, each behind an interface of its own: the records (`registry`,
//! `objects`, `events`, `quarantine`), the OCI runtime handlers, the memory plans, cgroup reads,
//! the node's namespaces and mounts (`host`), writable-layer usage.

pub(in crate::service) mod cgroups;
pub(in crate::service) mod events;
pub(in crate::service) mod host;
pub(in crate::service) mod memory;
pub(in crate::service) mod objects;
pub mod quarantine;
pub(in crate::service) mod registry;
pub(in crate::service) mod runtimes;
pub(in crate::service) mod samples;
pub(in crate::service) mod wake;
pub(in crate::service) mod writable_usage;
