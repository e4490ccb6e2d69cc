//! Pure policy: CRI configuration plus node facts in, OCI spec and decisions out. No I/O.

pub mod annotations;
pub mod caps;
pub mod dns;
pub mod guard;
pub mod limits;
pub mod memory;
pub mod mounts;
pub mod nri_memory;
pub mod offload;
pub mod paths;
pub mod seccomp;
pub mod spec;
pub mod sysctls;
pub mod thrash;
pub mod user;
pub mod userns;

pub use crate::model::node::NodeFacts;

use crate::model::error_kind::{Classify, ErrorKind};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Unsupported(String),
}

impl Classify for PolicyError {
    fn kind(&self) -> ErrorKind {
        match self {
            PolicyError::Invalid(_) => ErrorKind::InvalidArgument,
            PolicyError::Unsupported(_) => ErrorKind::FailedPrecondition,
        }
    }
}
