//! Where manifests and blobs come from (a registry, or an OCI layout on disk), and the media
//! types a pull accepts as a manifest.

use std::io::Read;
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

/// A blob's bytes on their way to a reader (a layer's unpacker), a chunk at a time. An error
/// ends the stream: the reader fails with it. A send that fails means the reader stopped.
pub type BlobChunks = tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>;

/// How many chunks may wait for the reader: the download runs this far ahead of the unpack.
pub const CHUNKS_AHEAD: usize = 64;

/// A channel for a blob's chunks: the sending end for `stream_blob`, the reading end as a
/// blocking `Read` (for the unpacker, on a blocking thread).
pub fn blob_channel() -> (BlobChunks, ChunkReader) {
    let (tx, rx) = tokio::sync::mpsc::channel(CHUNKS_AHEAD);
    (tx, ChunkReader { rx, current: bytes::Bytes::new() })
}

/// The reading end of [`blob_channel`]: the chunks in order, an error as sent, the end once
/// the sender is gone.
pub struct ChunkReader {
    rx: tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>,
    current: bytes::Bytes,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// The chunks a file is read in when a blob comes from disk.
const FILE_CHUNK: usize = 256 * 1024;

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

    /// Sends the blob's bytes to `chunks` as they arrive; returns once the last was sent and
    /// the blob checked, or as soon as the reader stops. A blob that fails a check sends an
    /// error last, so the reader never ends well on it. By default the verified file
    /// `open_blob` gives, read from disk.
    async fn stream_blob(&self, blob: &BlobRef, scratch: &Path, chunks: BlobChunks) -> Result<(), ImageError> {
        let path = self.open_blob(blob, scratch).await?;
        crate::blocking::spawn(move || {
            let mut file = std::fs::File::open(&path).map_err(ImageError::io(&path))?;
            loop {
                let mut buffer = vec![0; FILE_CHUNK];
                let n = file.read(&mut buffer).map_err(ImageError::io(&path))?;
                buffer.truncate(n);
                if n == 0 || chunks.blocking_send(Ok(buffer.into())).is_err() {
                    return Ok(());
                }
            }
        })
        .await
        .map_err(|e| ImageError::Task(e.to_string()))?
    }
}
