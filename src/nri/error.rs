//! What an NRI call or a plugin's adjustment can fail with.

use std::time::Duration;

use crate::model::error_kind::{Classify, ErrorKind};

#[derive(Debug, thiserror::Error)]
pub enum NriError {
    #[error("NRI plugin {plugin} failed {event}: {message}")]
    Plugin { plugin: String, event: &'static str, message: String },
    #[error("NRI plugin {plugin} did not answer {event} within {timeout:?} and was disconnected")]
    Timeout { plugin: String, event: &'static str, timeout: Duration },
    #[error("NRI plugin {plugin} was lost during {event}: {message}")]
    Lost { plugin: String, event: &'static str, message: String },
    #[error("NRI plugins {first} and {second} both adjust {field}")]
    Conflict { field: String, first: String, second: String },
    #[error("NRI adjustment of {field} by {plugin} refused: {reason}")]
    Refused { plugin: String, field: String, reason: String },
    #[error("NRI plugin {plugin} adjusts {field}, which swapcri does not apply")]
    Unsupported { plugin: String, field: String },
}

impl Classify for NriError {
    fn kind(&self) -> ErrorKind {
        match self {
            NriError::Timeout { .. } => ErrorKind::DeadlineExceeded,
            NriError::Lost { .. } => ErrorKind::Unavailable,
            NriError::Plugin { .. }
            | NriError::Conflict { .. }
            | NriError::Refused { .. }
            | NriError::Unsupported { .. } => ErrorKind::FailedPrecondition,
        }
    }
}
