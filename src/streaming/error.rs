//! What can end a streaming session or refuse a streaming request.

use crate::model::error_kind::{Classify, ErrorKind};

#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A system call on the session's behalf failed.
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{what}: {source}")]
    Sys { what: &'static str, source: nix::errno::Errno },
    /// The OCI runtime refused or failed the exec.
    #[error(transparent)]
    Runtime(#[from] crate::oci::OciError),
    /// The client did not follow the protocol (streams, sub-protocols, ports).
    #[error("{0}")]
    Protocol(String),
    /// The container's monitor (attach) or the pod's port (port-forward) cannot be reached.
    #[error("{0}")]
    Unreachable(String),
}

impl StreamError {
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StreamError {
        let what = what.into();
        move |source| StreamError::Io { what, source }
    }

    pub fn sys(what: &'static str) -> impl FnOnce(nix::errno::Errno) -> StreamError {
        move |source| StreamError::Sys { what, source }
    }
}

impl Classify for StreamError {
    fn kind(&self) -> ErrorKind {
        match self {
            StreamError::Protocol(_) => ErrorKind::InvalidArgument,
            StreamError::Unreachable(_) => ErrorKind::Unavailable,
            StreamError::Runtime(e) => e.kind(),
            StreamError::Io { .. } | StreamError::Sys { .. } => ErrorKind::Internal,
        }
    }
}
