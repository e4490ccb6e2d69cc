//! Pure policy: CRI configuration plus node facts in, OCI spec and decisions out. No I/O.

pub mod caps;
pub mod memory;
pub mod mounts;
pub mod seccomp;
pub mod spec;
pub mod user;

use serde::Serialize;

use crate::cgroup::CgroupMode;
use crate::error::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Unsupported(String),
}

impl PolicyError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            PolicyError::Invalid(_) => ErrorKind::InvalidArgument,
            PolicyError::Unsupported(_) => ErrorKind::FailedPrecondition,
        }
    }
}

/// Facts about the node, probed once at start-up and passed to the policy.
#[derive(Debug, Clone, Serialize)]
pub struct NodeFacts {
    pub cgroup_mode: CgroupMode,
    pub memory: memory::MemoryFacts,
    /// Whether tmpfs mounts get `noswap`.
    pub noswap: crate::node::noswap::NoswapSupport,
    /// What start-up applied to the system daemons' cgroup.
    pub system_protection: Option<crate::node::system::ProtectionReport>,
    /// Capabilities the daemon holds (its bounding set): the most any container gets.
    pub held_capabilities: Vec<String>,
    /// Lowest oom_score_adj the daemon may give (its own when it lacks CAP_SYS_RESOURCE).
    pub min_oom_score_adj: i32,
    pub apparmor_enabled: bool,
}
