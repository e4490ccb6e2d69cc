//! Where manifests and blobs come from (a registry, or an OCI layout on disk), and the media
//! types a pull accepts as a manifest.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::error::ImageError;
use crate::model::image::Digest;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

pub const MANIFEST_MEDIA_TYPES: &[&str] = &[OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

/// A blob to fetch: its digest, size and media type from a descriptor.
#[derive(Debug, Clone)]
pub struct BlobRef {
    pub digest: Digest,
    pub size: u64,
    pub media_type: String,
}

/// Where manifests and blobs come from: a registry or an OCI layout on disk.
#[async_trait]
pub trait ImageSource: Send + Sync {
    fn describe(&self) -> String;
    /// The manifest or index named by the source's reference (`None`) or by digest;
    /// a digest is verified.
    /// Manifests longer than `max_bytes` are refused (TooLarge).
    async fn fetch_manifest(&self, digest: Option<&Digest>, max_bytes: u64) -> Result<(Vec<u8>, Digest), ImageError>;
    /// A local file holding the verified blob (written into `scratch` if it must be fetched).
    async fn open_blob(&self, blob: &BlobRef, scratch: &Path) -> Result<PathBuf, ImageError>;
}
