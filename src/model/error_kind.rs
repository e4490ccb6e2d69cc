//! What kind of failure an error is. Each subsystem classifies its own errors (`Classify`),
//! so the service error keeps a subsystem's error as its source without naming its type,
//! and error.rs turns the kind into a gRPC code.

use std::sync::Arc;

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

/// An error that knows its kind.
pub trait Classify {
    fn kind(&self) -> ErrorKind;
}

/// A shared error (a pull many callers wait on) is of its own kind.
impl<T: Classify> Classify for Arc<T> {
    fn kind(&self) -> ErrorKind {
        T::kind(self)
    }
}
