//! Turning a manifest into a stored image: platform selection, config, layers downloaded
//! and unpacked once, then one commit. Shared by registry pulls and layout imports.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use futures::future::{BoxFuture, FutureExt, Shared};
use futures::{StreamExt, TryStreamExt};
use oci_client::secrets::RegistryAuth;
use oci_spec::image::{Arch, Descriptor, ImageConfiguration, ImageIndex, ImageManifest, Os};

use crate::model::image::{Digest, ImageId, ImageRecord, LayerRecord};

use super::unpack::{layer_stats, unpack_layer};
use super::{ImageError, ImageName, ImageStore, Registries};

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const MANIFEST_MEDIA_TYPES: &[&str] = &[OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

const LAYER_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar.zstd",
];

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
    async fn fetch_manifest(&self, digest: Option<&Digest>) -> Result<(Vec<u8>, Digest), ImageError>;
    /// A local file holding the verified blob (written into `scratch` if it must be fetched).
    async fn open_blob(&self, blob: &BlobRef, scratch: &Path) -> Result<PathBuf, ImageError>;
}

type SharedPull = Shared<BoxFuture<'static, Result<ImageId, Arc<ImageError>>>>;

/// Pulls from registries; concurrent pulls of one reference share one download.
pub struct Puller {
    store: Arc<ImageStore>,
    registries: Arc<Registries>,
    max_downloads: usize,
    inflight: Mutex<HashMap<String, SharedPull>>,
}

impl Puller {
    pub fn new(store: Arc<ImageStore>, registries: Arc<Registries>, max_downloads: usize) -> Self {
        Puller { store, registries, max_downloads, inflight: Mutex::new(HashMap::new()) }
    }

    /// Pulls `name`. The work runs as its own task: a caller that goes away (kubelet
    /// timing out) does not abort it, and a retry joins it.
    pub async fn pull(self: &Arc<Self>, name: ImageName, auth: RegistryAuth) -> Result<ImageId, Arc<ImageError>> {
        let key = name.to_string();
        let shared = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
            match inflight.get(&key) {
                Some(existing) => {
                    tracing::info!(image = %key, "joining a pull already in progress");
                    existing.clone()
                }
                None => {
                    let this = self.clone();
                    let task_key = key.clone();
                    let task = tokio::spawn(async move {
                        let result = this.pull_with_retry(&name, auth).await.map_err(Arc::new);
                        this.inflight.lock().unwrap_or_else(|p| p.into_inner()).remove(&task_key);
                        result
                    });
                    let shared = task
                        .map(|joined| joined.unwrap_or_else(|e| Err(Arc::new(ImageError::Task(e.to_string())))))
                        .boxed()
                        .shared();
                    inflight.insert(key, shared.clone());
                    shared
                }
            }
        };
        shared.await
    }

    async fn pull_with_retry(&self, name: &ImageName, auth: RegistryAuth) -> Result<ImageId, ImageError> {
        let started = Instant::now();
        tracing::info!(image = %name, "pulling image");
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (source, top, top_digest) = self.registries.open(name, auth.clone()).await?;
            match store_image(&self.store, &source, name, top, top_digest, self.max_downloads).await {
                // A concurrent removal took a shared layer between unpack and commit.
                Err(ImageError::LayerVanished(layer)) if attempt < 3 => {
                    tracing::warn!(image = %name, %layer, "layer removed concurrently, pulling again");
                }
                Err(e) => {
                    tracing::warn!(image = %name, error = %e, "pull failed");
                    return Err(e);
                }
                Ok(id) => {
                    tracing::info!(image = %name, %id, elapsed_ms = started.elapsed().as_millis() as u64, "image pulled");
                    return Ok(id);
                }
            }
        }
    }
}

/// Stores the image whose top-level manifest (or index) is `top`, naming it `name`.
pub async fn store_image(
    store: &Arc<ImageStore>,
    source: &dyn ImageSource,
    name: &ImageName,
    top: Vec<u8>,
    top_digest: Digest,
    max_downloads: usize,
) -> Result<ImageId, ImageError> {
    let image = name.to_string();
    let unsupported = |reason: String| ImageError::Unsupported { image: image.clone(), reason };
    let (manifest_bytes, manifest_digest) = match manifest_kind(&top).map_err(&unsupported)? {
        ManifestKind::Manifest => (top, top_digest.clone()),
        ManifestKind::Index => {
            let index: ImageIndex = serde_json::from_slice(&top).map_err(|e| unsupported(format!("bad index: {e}")))?;
            let entry = select_platform(index.manifests())
                .ok_or_else(|| unsupported("the index has no linux/amd64 manifest".into()))?;
            let digest = to_digest(entry).map_err(&unsupported)?;
            source.fetch_manifest(Some(&digest)).await?
        }
    };
    if manifest_kind(&manifest_bytes).map_err(&unsupported)? != ManifestKind::Manifest {
        return Err(unsupported("an index entry is itself an index".into()));
    }
    let manifest: ImageManifest =
        serde_json::from_slice(&manifest_bytes).map_err(|e| unsupported(format!("bad manifest: {e}")))?;

    let scratch = store.scratch_dir()?;
    let config_ref = blob_ref(manifest.config()).map_err(&unsupported)?;
    let config_path = source.open_blob(&config_ref, scratch.path()).await?;
    let config_bytes = tokio::fs::read(&config_path).await.map_err(ImageError::io(&config_path))?;
    let config: ImageConfiguration =
        serde_json::from_slice(&config_bytes).map_err(|e| unsupported(format!("bad image config: {e}")))?;
    if *config.os() != Os::Linux {
        return Err(unsupported(format!("image is for {}, not linux", config.os())));
    }
    let diff_ids: Vec<Digest> = config
        .rootfs()
        .diff_ids()
        .iter()
        .map(|d| Digest::parse(d).ok_or_else(|| unsupported(format!("unsupported diff id {d:?}"))))
        .collect::<Result<_, _>>()?;
    if diff_ids.len() != manifest.layers().len() {
        return Err(unsupported(format!(
            "manifest lists {} layers, config lists {} diff ids",
            manifest.layers().len(),
            diff_ids.len()
        )));
    }
    let mut layers = Vec::new();
    for (descriptor, diff_id) in manifest.layers().iter().zip(&diff_ids) {
        let blob = blob_ref(descriptor).map_err(&unsupported)?;
        if !LAYER_MEDIA_TYPES.contains(&blob.media_type.as_str()) {
            return Err(unsupported(format!("layer media type {} is not supported", blob.media_type)));
        }
        layers.push((blob, diff_id.clone()));
    }

    let total = layers.len();
    let records: Vec<LayerRecord> = futures::stream::iter(layers.into_iter().enumerate())
        .map(|(n, (blob, diff_id))| {
            let scratch = scratch.path().to_path_buf();
            let image = image.clone();
            async move { fetch_layer(store, source, &image, &blob, &diff_id, &scratch, (n + 1, total)).await }
        })
        .buffer_unordered(max_downloads)
        .try_collect()
        .await?;

    let user = config.config().as_ref().and_then(|c| c.user().clone()).unwrap_or_default();
    let record = ImageRecord {
        id: ImageId::from_config_digest(&config_ref.digest),
        repo_tags: name.repo_tag().into_iter().collect(),
        repo_digests: BTreeSet::from([name.repo_digest(&top_digest)]),
        manifest: manifest_digest,
        layers: diff_ids,
        user,
        created_at: now_secs(),
    };
    let store = store.clone();
    let blobs = [(record.manifest.clone(), manifest_bytes), (config_ref.digest.clone(), config_bytes)];
    tokio::task::spawn_blocking(move || store.commit(record, records, &blobs))
        .await
        .map_err(|e| ImageError::Task(e.to_string()))?
}

/// Downloads and unpacks one layer unless it is already installed.
async fn fetch_layer(
    store: &Arc<ImageStore>,
    source: &dyn ImageSource,
    image: &str,
    blob: &BlobRef,
    diff_id: &Digest,
    scratch: &Path,
    (n, total): (usize, usize),
) -> Result<LayerRecord, ImageError> {
    let path = store.layer_path(diff_id);
    if store.has_layer(diff_id) {
        tracing::info!(image, layer = %diff_id, "layer {n}/{total} already present");
        let stats = tokio::task::spawn_blocking(move || layer_stats(&path))
            .await
            .map_err(|e| ImageError::Task(e.to_string()))?;
        let stats =
            stats.map_err(|source| ImageError::Unpack { image: image.into(), layer: diff_id.clone(), source })?;
        return Ok(LayerRecord { diff_id: diff_id.clone(), disk_bytes: stats.disk_bytes, inodes: stats.inodes });
    }
    let started = Instant::now();
    tracing::info!(image, layer = %diff_id, blob = %blob.digest, bytes = blob.size, "layer {n}/{total}: fetching from {}", source.describe());
    let blob_path = source.open_blob(blob, scratch).await?;
    let fetched = started.elapsed();
    let unpack_dir = scratch.join(format!("layer-{}", diff_id.hex()));
    let (dir, id) = (unpack_dir.clone(), diff_id.clone());
    let stats = tokio::task::spawn_blocking(move || unpack_layer(&blob_path, &dir, &id))
        .await
        .map_err(|e| ImageError::Task(e.to_string()))?
        .map_err(|source| ImageError::Unpack { image: image.into(), layer: diff_id.clone(), source })?;
    store.install_layer(&unpack_dir, diff_id)?;
    tracing::info!(
        image,
        layer = %diff_id,
        fetch_ms = fetched.as_millis() as u64,
        unpack_ms = (started.elapsed() - fetched).as_millis() as u64,
        disk_bytes = stats.disk_bytes,
        "layer {n}/{total} ready"
    );
    Ok(LayerRecord { diff_id: diff_id.clone(), disk_bytes: stats.disk_bytes, inodes: stats.inodes })
}

#[derive(Debug, PartialEq, Eq)]
enum ManifestKind {
    Manifest,
    Index,
}

/// Tells a manifest from an index by `mediaType`, or by shape when it is absent.
fn manifest_kind(bytes: &[u8]) -> Result<ManifestKind, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("manifest is not JSON: {e}"))?;
    if value.get("schemaVersion").and_then(|v| v.as_u64()) != Some(2) {
        return Err("only schema version 2 manifests are supported".into());
    }
    match value.get("mediaType").and_then(|m| m.as_str()) {
        Some(OCI_MANIFEST | DOCKER_MANIFEST) => Ok(ManifestKind::Manifest),
        Some(OCI_INDEX | DOCKER_LIST) => Ok(ManifestKind::Index),
        Some(other) => Err(format!("unsupported manifest media type {other}")),
        None if value.get("manifests").is_some() => Ok(ManifestKind::Index),
        None if value.get("layers").is_some() => Ok(ManifestKind::Manifest),
        None => Err("neither a manifest nor an index".into()),
    }
}

/// The linux/amd64 entry of an index.
fn select_platform(entries: &[Descriptor]) -> Option<&Descriptor> {
    entries
        .iter()
        .find(|d| d.platform().as_ref().is_some_and(|p| *p.os() == Os::Linux && *p.architecture() == Arch::Amd64))
}

fn to_digest(descriptor: &Descriptor) -> Result<Digest, String> {
    let text = descriptor.digest().to_string();
    Digest::parse(&text).ok_or_else(|| format!("unsupported digest {text:?}"))
}

fn blob_ref(descriptor: &Descriptor) -> Result<BlobRef, String> {
    Ok(BlobRef {
        digest: to_digest(descriptor)?,
        size: descriptor.size(),
        media_type: descriptor.media_type().to_string(),
    })
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_kinds() {
        let cases: [(&str, Result<ManifestKind, ()>); 7] = [
            (
                r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}"#,
                Ok(ManifestKind::Manifest),
            ),
            (
                r#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json"}"#,
                Ok(ManifestKind::Index),
            ),
            (r#"{"schemaVersion":2,"manifests":[]}"#, Ok(ManifestKind::Index)),
            (r#"{"schemaVersion":2,"layers":[]}"#, Ok(ManifestKind::Manifest)),
            (r#"{"schemaVersion":1,"fsLayers":[]}"#, Err(())),
            (r#"{"schemaVersion":2,"mediaType":"text/plain"}"#, Err(())),
            ("not json", Err(())),
        ];
        for (text, expected) in cases {
            assert_eq!(manifest_kind(text.as_bytes()).map_err(|_| ()), expected, "{text}");
        }
    }

    #[test]
    fn platform_selection_picks_linux_amd64() {
        let index: ImageIndex = serde_json::from_str(&format!(
            r#"{{"schemaVersion":2,"manifests":[
              {{"mediaType":"{OCI_MANIFEST}","digest":"sha256:{a}","size":1,"platform":{{"os":"linux","architecture":"arm64"}}}},
              {{"mediaType":"{OCI_MANIFEST}","digest":"sha256:{b}","size":1,"platform":{{"os":"windows","architecture":"amd64"}}}},
              {{"mediaType":"{OCI_MANIFEST}","digest":"sha256:{c}","size":1,"platform":{{"os":"linux","architecture":"amd64"}}}}
            ]}}"#,
            a = "a".repeat(64),
            b = "b".repeat(64),
            c = "c".repeat(64)
        ))
        .unwrap();
        let chosen = select_platform(index.manifests()).unwrap();
        assert_eq!(to_digest(chosen).unwrap().hex(), "c".repeat(64));
        assert!(select_platform(&index.manifests()[..2]).is_none());
    }
}
