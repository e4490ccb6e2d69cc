//! The service-level error and the one place where error kinds become gRPC status codes.

use crate::image::unpack::UnpackError;
use crate::image::ImageError;
use crate::monitor::MonitorError;
use crate::network::invoke::PluginError;
use crate::network::NetworkError;
use crate::oci::OciError;
use crate::policy::PolicyError;
use crate::store::StoreError;
use crate::streaming::StreamError;

/// What kind of failure an error is; decides the gRPC status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    PermissionDenied,
    Unauthenticated,
    DeadlineExceeded,
    Unavailable,
    DataLoss,
    ResourceExhausted,
    Unimplemented,
    Internal,
}

impl ErrorKind {
    pub fn code(self) -> tonic::Code {
        match self {
            ErrorKind::InvalidArgument => tonic::Code::InvalidArgument,
            ErrorKind::NotFound => tonic::Code::NotFound,
            ErrorKind::AlreadyExists => tonic::Code::AlreadyExists,
            ErrorKind::FailedPrecondition => tonic::Code::FailedPrecondition,
            ErrorKind::PermissionDenied => tonic::Code::PermissionDenied,
            ErrorKind::Unauthenticated => tonic::Code::Unauthenticated,
            ErrorKind::DeadlineExceeded => tonic::Code::DeadlineExceeded,
            ErrorKind::Unavailable => tonic::Code::Unavailable,
            ErrorKind::DataLoss => tonic::Code::DataLoss,
            ErrorKind::ResourceExhausted => tonic::Code::ResourceExhausted,
            ErrorKind::Unimplemented => tonic::Code::Unimplemented,
            ErrorKind::Internal => tonic::Code::Internal,
        }
    }
}

/// Errors returned by the service layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0} is not implemented by swapcri yet")]
    Unimplemented(&'static str),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    Pull(std::sync::Arc<ImageError>),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Monitor(#[from] MonitorError),
    #[error(transparent)]
    Network(#[from] NetworkError),
    #[error(transparent)]
    Stream(#[from] StreamError),
    #[error(transparent)]
    Nri(#[from] crate::nri::NriError),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    DeadlineExceeded(String),
    #[error("internal error: {0}")]
    Internal(String),
    /// A filesystem or system call failed; the source is kept, so that a full disk is
    /// ResourceExhausted wherever it is hit.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Wraps an io error with what was being done: `.map_err(Error::io("writing pod files"))`.
    pub fn io(context: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Io { context: context.to_string(), source }
    }

    pub fn kind(&self) -> ErrorKind {
        if out_of_space(self) {
            return ErrorKind::ResourceExhausted;
        }
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::FailedPrecondition(_) => ErrorKind::FailedPrecondition,
            Error::Unimplemented(_) => ErrorKind::Unimplemented,
            Error::Image(e) => image_kind(e),
            Error::Pull(e) => image_kind(e),
            Error::Oci(e) => oci_kind(e),
            Error::Policy(e) => policy_kind(e),
            Error::AlreadyExists(_) => ErrorKind::AlreadyExists,
            Error::DeadlineExceeded(_) => ErrorKind::DeadlineExceeded,
            Error::Network(e) => network_kind(e),
            Error::Stream(e) => stream_kind(e),
            Error::Nri(e) => nri_kind(e),
            Error::Store(_) | Error::Monitor(_) | Error::Internal(_) | Error::Io { .. } => ErrorKind::Internal,
        }
    }
}

/// A full disk (ENOSPC) or an exhausted quota anywhere among the error's causes: whatever
/// step hit it, the caller can only retry once space is freed.
fn out_of_space(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(io.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded) {
                return true;
            }
        }
        next = e.source();
    }
    false
}

fn image_kind(e: &ImageError) -> ErrorKind {
    match e {
        ImageError::InvalidReference { .. } => ErrorKind::InvalidArgument,
        ImageError::NotFound(_) => ErrorKind::NotFound,
        ImageError::Unauthorized { .. } => ErrorKind::Unauthenticated,
        ImageError::Registry { .. } | ImageError::LayerVanished(_) => ErrorKind::Unavailable,
        ImageError::DigestMismatch { .. } => ErrorKind::DataLoss,
        ImageError::Stalled { .. } => ErrorKind::DeadlineExceeded,
        ImageError::TooLarge { .. } => ErrorKind::ResourceExhausted,
        ImageError::Unsupported { .. } | ImageError::InUse { .. } => ErrorKind::FailedPrecondition,
        ImageError::Unpack { source, .. } => match source {
            s if s.is_corruption() => ErrorKind::DataLoss,
            UnpackError::Escape { .. } => ErrorKind::FailedPrecondition,
            UnpackError::TooLarge(_) => ErrorKind::ResourceExhausted,
            _ => ErrorKind::Internal,
        },
        ImageError::Io { .. } | ImageError::Download { .. } | ImageError::Store(_) | ImageError::Task(_) => {
            ErrorKind::Internal
        }
    }
}

fn oci_kind(e: &OciError) -> ErrorKind {
    match e {
        OciError::Timeout(_) => ErrorKind::DeadlineExceeded,
        _ => ErrorKind::Internal,
    }
}

fn policy_kind(e: &PolicyError) -> ErrorKind {
    match e {
        PolicyError::Invalid(_) => ErrorKind::InvalidArgument,
        PolicyError::Unsupported(_) => ErrorKind::FailedPrecondition,
    }
}

fn stream_kind(e: &StreamError) -> ErrorKind {
    match e {
        StreamError::Protocol(_) => ErrorKind::InvalidArgument,
        StreamError::Unreachable(_) => ErrorKind::Unavailable,
        StreamError::Runtime(e) => oci_kind(e),
        StreamError::Io { .. } | StreamError::Sys { .. } => ErrorKind::Internal,
    }
}

fn nri_kind(e: &crate::nri::NriError) -> ErrorKind {
    use crate::nri::NriError;
    match e {
        NriError::Timeout { .. } => ErrorKind::DeadlineExceeded,
        NriError::Lost { .. } => ErrorKind::Unavailable,
        NriError::Plugin { .. }
        | NriError::Conflict { .. }
        | NriError::Refused { .. }
        | NriError::Unsupported { .. } => ErrorKind::FailedPrecondition,
    }
}

fn network_kind(e: &NetworkError) -> ErrorKind {
    match e {
        NetworkError::NotReady(_) => ErrorKind::FailedPrecondition,
        NetworkError::InvalidCidr(_) => ErrorKind::InvalidArgument,
        NetworkError::Plugin(PluginError::Timeout { .. }) => ErrorKind::DeadlineExceeded,
        NetworkError::Plugin(_) | NetworkError::State { .. } => ErrorKind::Internal,
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        tonic::Status::new(e.kind().code(), e.to_string())
    }
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Self {
        Error::Internal(format!("background task failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("while unpacking: {0}")]
    struct Nested(#[source] std::io::Error);

    #[test]
    fn kinds_map_to_codes() {
        let cases = [
            (Error::InvalidArgument("x".into()), tonic::Code::InvalidArgument),
            (Error::NotFound("x".into()), tonic::Code::NotFound),
            (Error::FailedPrecondition("x".into()), tonic::Code::FailedPrecondition),
            (Error::Unimplemented("Exec"), tonic::Code::Unimplemented),
            (Error::Internal("x".into()), tonic::Code::Internal),
            (Error::Image(ImageError::NotFound("busybox".into())), tonic::Code::NotFound),
            (Error::Network(NetworkError::NotReady("no config".into())), tonic::Code::FailedPrecondition),
            (
                Error::Network(NetworkError::Plugin(PluginError::Timeout {
                    plugin: "p".into(),
                    command: "ADD",
                    seconds: 1,
                })),
                tonic::Code::DeadlineExceeded,
            ),
            (Error::Oci(OciError::Timeout(std::time::Duration::from_secs(1))), tonic::Code::DeadlineExceeded),
            (Error::Policy(PolicyError::Invalid("x".into())), tonic::Code::InvalidArgument),
            (Error::Policy(PolicyError::Unsupported("x".into())), tonic::Code::FailedPrecondition),
            (
                Error::Image(ImageError::Unauthorized { registry: "r".into(), image: "i".into(), message: "m".into() }),
                tonic::Code::Unauthenticated,
            ),
            (
                Error::Image(ImageError::Registry { registry: "r".into(), image: "i".into(), message: "m".into() }),
                tonic::Code::Unavailable,
            ),
            (
                Error::Image(ImageError::DigestMismatch {
                    image: "i".into(),
                    what: "w".into(),
                    expected: "a".into(),
                    actual: "b".into(),
                }),
                tonic::Code::DataLoss,
            ),
            (
                Error::Image(ImageError::Io {
                    path: "/state/images/tmp/x".into(),
                    source: std::io::Error::from_raw_os_error(nix::libc::ENOSPC),
                }),
                tonic::Code::ResourceExhausted,
            ),
            (
                Error::io("writing pod files")(std::io::Error::from_raw_os_error(nix::libc::ENOSPC)),
                tonic::Code::ResourceExhausted,
            ),
            (
                Error::io("mounting /run/x/shm")(std::io::Error::from_raw_os_error(nix::libc::EDQUOT)),
                tonic::Code::ResourceExhausted,
            ),
            (
                Error::io("writing pod files")(std::io::Error::from_raw_os_error(nix::libc::EACCES)),
                tonic::Code::Internal,
            ),
            (
                Error::Store(crate::store::StoreError::Write {
                    path: "/state/x".into(),
                    source: std::io::Error::from_raw_os_error(nix::libc::EDQUOT),
                }),
                tonic::Code::ResourceExhausted,
            ),
            (
                // As the tar crate reports it: the OS error nested in an error of its own.
                Error::Image(ImageError::Unpack {
                    image: "i".into(),
                    layer: crate::model::image::Digest::of(b"l"),
                    source: UnpackError::Archive(std::io::Error::other(Nested(std::io::Error::from_raw_os_error(
                        nix::libc::ENOSPC,
                    )))),
                }),
                tonic::Code::ResourceExhausted,
            ),
        ];
        for (error, code) in cases {
            assert_eq!(tonic::Status::from(error).code(), code);
        }
    }
}
