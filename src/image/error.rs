use std::path::PathBuf;

use crate::model::error_kind::{Classify, ErrorKind};
use crate::model::image::Digest;
use crate::store::StoreError;

pub use super::unpack::UnpackError;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("invalid image reference {reference:?}: {reason}")]
    InvalidReference { reference: String, reason: String },
    #[error("image {0} not found")]
    NotFound(String),
    #[error("registry {registry} refused access to {image}: {message}")]
    Unauthorized { registry: String, image: String, message: String },
    #[error("registry {registry} failed for {image}: {message}")]
    Registry { registry: String, image: String, message: String },
    #[error("{what} of {image} is corrupt: expected digest {expected}, got {actual}")]
    DigestMismatch { image: String, what: String, expected: String, actual: String },
    #[error("{what} of {image} is {hit}")]
    TooLarge { image: String, what: String, hit: super::limits::LimitHit },
    #[error("pull of {image} made no progress for {secs}s while fetching {what}")]
    Stalled { image: String, what: String, secs: u64 },
    #[error(
        "pull of {image} received {} bytes in {}s while fetching {what}, below image.pull_min_bytes_per_second = {}",
        slow.received, slow.window_secs, slow.bytes_per_second
    )]
    TooSlow { image: String, what: String, slow: super::rate::TooSlow },
    #[error("pull of {image} was abandoned: every caller waiting for it went away")]
    Abandoned { image: String },
    #[error("image {image} cannot be used: {reason}")]
    Unsupported { image: String, reason: String },
    #[error("layer {layer} of {image}: {source}")]
    Unpack { image: String, layer: Digest, source: UnpackError },
    #[error("image {image} is used by container(s) {containers}")]
    InUse { image: String, containers: String },
    #[error("layer {0} was removed while the image was being stored")]
    LayerVanished(Digest),
    #[error("image task failed: {0}")]
    Task(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("cannot store {what} of {image} at {path}: {source}")]
    Download { image: String, what: String, path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ImageError {
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ImageError {
        let path = path.into();
        move |source| ImageError::Io { path, source }
    }
}

impl Classify for ImageError {
    fn kind(&self) -> ErrorKind {
        match self {
            ImageError::InvalidReference { .. } => ErrorKind::InvalidArgument,
            ImageError::NotFound(_) => ErrorKind::NotFound,
            ImageError::Unauthorized { .. } => ErrorKind::Unauthenticated,
            ImageError::Registry { .. } | ImageError::LayerVanished(_) | ImageError::Abandoned { .. } => {
                ErrorKind::Unavailable
            }
            ImageError::DigestMismatch { .. } => ErrorKind::DataLoss,
            ImageError::Stalled { .. } | ImageError::TooSlow { .. } => ErrorKind::DeadlineExceeded,
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
}
