//! The service-level error and the one place where error kinds, and the gRPC layer's own
//! answers (`CallEnd`), become gRPC status codes.
//! A subsystem's error comes in through `Classify`: it keeps its own type as the source and
//! says its kind itself, so nothing here names a subsystem.

use crate::model::error_kind::Classify;
pub use crate::model::error_kind::ErrorKind;

fn code(kind: ErrorKind) -> tonic::Code {
    match kind {
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
    /// A subsystem's error (image, OCI runtime, store, policy, monitor, network, streaming,
    /// NRI), of the kind it says it is.
    #[error("{source}")]
    Subsystem {
        kind: ErrorKind,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl<E: Classify + std::error::Error + Send + Sync + 'static> From<E> for Error {
    fn from(e: E) -> Self {
        Error::Subsystem { kind: e.kind(), source: Box::new(e) }
    }
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
            Error::AlreadyExists(_) => ErrorKind::AlreadyExists,
            Error::DeadlineExceeded(_) => ErrorKind::DeadlineExceeded,
            Error::Subsystem { kind, .. } => *kind,
            Error::Internal(_) | Error::Io { .. } => ErrorKind::Internal,
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

/// The most of an error's text a status carries. The message travels in an HTTP/2 header, and
/// a client drops the whole call (a PROTOCOL_ERROR, not our status) when its headers pass its
/// limit (16 KiB in hyper's); a runtime's or CRIU's output quoted in an error can exceed it.
const STATUS_MESSAGE_MAX: usize = 4096;

/// `message` cut to [`STATUS_MESSAGE_MAX`] bytes at a character boundary, saying how much went.
fn bounded(message: String) -> String {
    if message.len() <= STATUS_MESSAGE_MAX {
        return message;
    }
    let mut end = STATUS_MESSAGE_MAX - 64;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes more)", &message[..end], message.len() - end)
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        tonic::Status::new(code(e.kind()), bounded(e.to_string()))
    }
}

/// How a call ended that no service returned an error for: the gRPC layer's own answers.
#[derive(Debug)]
pub enum CallEnd {
    /// The client's deadline passed; the call goes on to its end.
    DeadlinePassed,
    /// The client went away while it waited (what it stopped waiting for).
    ClientLeft(&'static str),
    /// The call's task failed (panicked or was aborted).
    TaskFailed(String),
    /// An events subscriber fell this many events behind and was dropped.
    EventsLagged(u64),
}

impl From<CallEnd> for tonic::Status {
    fn from(end: CallEnd) -> Self {
        match end {
            CallEnd::DeadlinePassed => tonic::Status::deadline_exceeded("the client's deadline passed"),
            CallEnd::ClientLeft(what) => tonic::Status::cancelled(format!("the client stopped waiting for {what}")),
            CallEnd::TaskFailed(e) => tonic::Status::internal(bounded(format!("the call failed: {e}"))),
            CallEnd::EventsLagged(missed) => {
                tonic::Status::resource_exhausted(format!("fell {missed} events behind; subscribe again"))
            }
        }
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
    use crate::image::unpack::UnpackError;
    use crate::image::ImageError;
    use crate::network::invoke::PluginError;
    use crate::network::NetworkError;
    use crate::oci::OciError;
    use crate::policy::PolicyError;

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
            (Error::from(ImageError::NotFound("busybox".into())), tonic::Code::NotFound),
            (Error::from(NetworkError::NotReady("no config".into())), tonic::Code::FailedPrecondition),
            (
                Error::from(NetworkError::Plugin(PluginError::Timeout {
                    plugin: "p".into(),
                    command: "ADD",
                    seconds: 1,
                })),
                tonic::Code::DeadlineExceeded,
            ),
            (Error::from(OciError::Timeout(std::time::Duration::from_secs(1))), tonic::Code::DeadlineExceeded),
            (Error::from(PolicyError::Invalid("x".into())), tonic::Code::InvalidArgument),
            (Error::from(PolicyError::Unsupported("x".into())), tonic::Code::FailedPrecondition),
            (
                Error::from(ImageError::Unauthorized { registry: "r".into(), image: "i".into(), message: "m".into() }),
                tonic::Code::Unauthenticated,
            ),
            (
                Error::from(ImageError::Registry { registry: "r".into(), image: "i".into(), message: "m".into() }),
                tonic::Code::Unavailable,
            ),
            (
                Error::from(ImageError::DigestMismatch {
                    image: "i".into(),
                    what: "w".into(),
                    expected: "a".into(),
                    actual: "b".into(),
                }),
                tonic::Code::DataLoss,
            ),
            (
                Error::from(ImageError::Io {
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
                Error::from(crate::store::StoreError::Write {
                    path: "/state/x".into(),
                    source: std::io::Error::from_raw_os_error(nix::libc::EDQUOT),
                }),
                tonic::Code::ResourceExhausted,
            ),
            (
                // As the tar crate reports it: the OS error nested in an error of its own.
                Error::from(ImageError::Unpack {
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

    #[test]
    fn status_messages_are_bounded() {
        let cases = [
            ("short".to_string(), "short".to_string()),
            ("x".repeat(STATUS_MESSAGE_MAX), "x".repeat(STATUS_MESSAGE_MAX)),
            ("x".repeat(10_000), format!("{}… ({} bytes more)", "x".repeat(4032), 10_000 - 4032)),
            // Four-byte characters: the cut falls back to a boundary.
            ("😀".repeat(2000), format!("{}… ({} bytes more)", "😀".repeat(1008), 8000 - 4032)),
            ("é".repeat(3000), format!("{}… ({} bytes more)", "é".repeat(2016), 6000 - 4032)),
        ];
        for (message, want) in cases {
            let status = tonic::Status::from(Error::AlreadyExists(message));
            assert_eq!(status.message(), want);
            assert!(status.message().len() <= STATUS_MESSAGE_MAX);
        }
    }
}
