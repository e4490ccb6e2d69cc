//! Turning a manifest into a stored image: platform selection, config, layers downloaded
//! and unpacked once, then one commit. Shared by registry pulls and layout imports.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use oci_spec::image::{Arch, Descriptor, ImageConfiguration, ImageIndex, ImageManifest, Os};

use crate::model::image::{Digest, ImageId, ImageRecord, LayerRecord};

use super::error::ImageError;
use super::limits::LimitHit;
use super::limits::PullLimits;
use super::limits::UnpackBudget;
use super::reference::ImageName;
use super::source::{BlobRef, ImageSource, DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST};
use super::store::ImageStore;
use super::unpack::{layer_stats, unpack_layer_from};

const LAYER_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar.zstd",
];

/// Stores the image whose top-level manifest (or index) is `top`, naming it `name`. A pull
/// that fails leaves no layer of its own behind.
pub async fn store_image(
    store: &Arc<ImageStore>,
    source: &dyn ImageSource,
    name: &ImageName,
    top: Vec<u8>,
    top_digest: Digest,
    max_downloads: usize,
    limits: &PullLimits,
) -> Result<ImageId, ImageError> {
    let pull = Pull {
        store,
        source,
        image: name.to_string(),
        limits,
        max_downloads,
        installed: Mutex::default(),
        unpackers: tokio_util::task::TaskTracker::new(),
    };
    let result = pull.run(name, top, top_digest).await;
    let installed = pull.take_installed();
    if result.is_err() && !installed.is_empty() {
        let store = store.clone();
        crate::blocking::spawn(move || store.discard_unindexed_layers(&installed))
            .await
            .map_err(|e| ImageError::Task(e.to_string()))?;
    }
    result
}

/// One pull at work: where from, into which store, under which limits, and the layers it
/// installed so far (taken out again if it fails).
struct Pull<'a> {
    store: &'a Arc<ImageStore>,
    source: &'a dyn ImageSource,
    image: String,
    limits: &'a PullLimits,
    max_downloads: usize,
    installed: Mutex<Vec<Digest>>,
    /// The layers' unpackers (blocking threads), waited for before the pull ends.
    unpackers: tokio_util::task::TaskTracker,
}

/// How long a pull's end waits for its unpackers to stop once their streams ended.
const UNPACKERS_STOP: std::time::Duration = std::time::Duration::from_secs(10);

/// A pull dropped half-way (every caller went away) takes out the layers it installed, in
/// the background; one that ended has handed them over already.
impl Drop for Pull<'_> {
    fn drop(&mut self) {
        let installed = self.take_installed();
        if !installed.is_empty() {
            let store = self.store.clone();
            drop(crate::blocking::spawn(move || store.discard_unindexed_layers(&installed)));
        }
    }
}

impl Pull<'_> {
    /// The layers this pull installed, handed over: the pull no longer answers for them.
    fn take_installed(&self) -> Vec<Digest> {
        std::mem::take(&mut *self.installed.lock().unwrap_or_else(|p| p.into_inner()))
    }

    async fn run(&self, name: &ImageName, top: Vec<u8>, top_digest: Digest) -> Result<ImageId, ImageError> {
        let (manifest_bytes, manifest_digest) =
            resolve_manifest(self.source, &self.image, top, top_digest.clone(), self.limits).await?;
        let manifest: ImageManifest =
            serde_json::from_slice(&manifest_bytes).map_err(|e| self.unsupported(format!("bad manifest: {e}")))?;
        self.check_declared_sizes(&manifest)?;
        // Shared with the layers' unpackers: a pull dropped half-way removes it only once the
        // last unpacker (which then reads the end of its stream) has stopped writing there.
        let scratch = Arc::new(self.store.scratch_dir()?);
        let config_ref = blob_ref(manifest.config(), &self.image)?;
        let (config_bytes, config) = self.fetch_config(&config_ref, scratch.path()).await?;
        let layers = self.layer_blobs(&manifest, &config)?;
        let diff_ids = layers.iter().map(|(_, diff_id)| diff_id.clone()).collect();
        let records = self.fetch_layers(layers, &scratch).await;
        // A failed layer ends the others' downloads (their futures are dropped): their
        // unpackers read the end of their streams and stop; nothing writes into the scratch
        // directory once this returns.
        self.unpackers.close();
        if tokio::time::timeout(UNPACKERS_STOP, self.unpackers.wait()).await.is_err() {
            tracing::warn!(image = %self.image, "a layer's unpacker is still running; its work directory goes when it stops");
        }
        let records = records?;

        crate::crash::point("pull-after-layers");
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
        let store = self.store.clone();
        let blobs = [(record.manifest.clone(), manifest_bytes), (config_ref.digest.clone(), config_bytes)];
        crate::blocking::spawn(move || store.commit(record, records, &blobs))
            .await
            .map_err(|e| ImageError::Task(e.to_string()))?
    }

    fn unsupported(&self, reason: String) -> ImageError {
        ImageError::Unsupported { image: self.image.clone(), reason }
    }

    fn too_large(&self, what: String, setting: &'static str, limit: u64) -> ImageError {
        ImageError::TooLarge { image: self.image.clone(), what, hit: LimitHit { setting, limit } }
    }

    /// What the manifest declares, against the limits, before anything is fetched.
    fn check_declared_sizes(&self, manifest: &ImageManifest) -> Result<(), ImageError> {
        let limits = self.limits;
        if manifest.config().size() > limits.config_bytes {
            return Err(self.too_large("the config".into(), "image.max_config_bytes", limits.config_bytes));
        }
        if manifest.layers().len() > limits.layers {
            let what = format!("the manifest's {} layers", manifest.layers().len());
            return Err(self.too_large(what, "image.max_layers", limits.layers as u64));
        }
        let declared: u64 = manifest.layers().iter().map(|l| l.size()).fold(0, u64::saturating_add);
        if declared > limits.image_unpacked_bytes {
            let what = format!("the layers' declared size ({declared} bytes)");
            return Err(self.too_large(what, "image.max_image_unpacked_bytes", limits.image_unpacked_bytes));
        }
        Ok(())
    }

    /// The image config: its bytes as stored and parsed; images for other systems refused.
    async fn fetch_config(
        &self,
        config_ref: &BlobRef,
        scratch: &Path,
    ) -> Result<(Vec<u8>, ImageConfiguration), ImageError> {
        let path = self.source.open_blob(config_ref, scratch).await?;
        let bytes = tokio::fs::read(&path).await.map_err(ImageError::io(&path))?;
        let config: ImageConfiguration =
            serde_json::from_slice(&bytes).map_err(|e| self.unsupported(format!("bad image config: {e}")))?;
        if *config.os() != Os::Linux {
            return Err(self.unsupported(format!("image is for {}, not linux", config.os())));
        }
        Ok((bytes, config))
    }

    /// Each layer's blob with its content digest (the config's diff id), in order; unknown
    /// media types and a count that does not match are refused.
    fn layer_blobs(
        &self,
        manifest: &ImageManifest,
        config: &ImageConfiguration,
    ) -> Result<Vec<(BlobRef, Digest)>, ImageError> {
        let diff_ids: Vec<Digest> = config
            .rootfs()
            .diff_ids()
            .iter()
            .map(|d| Digest::parse(d).ok_or_else(|| self.unsupported(format!("unsupported diff id {d:?}"))))
            .collect::<Result<_, _>>()?;
        if diff_ids.len() != manifest.layers().len() {
            let (m, c) = (manifest.layers().len(), diff_ids.len());
            return Err(self.unsupported(format!("manifest lists {m} layers, config lists {c} diff ids")));
        }
        let mut layers = Vec::new();
        for (descriptor, diff_id) in manifest.layers().iter().zip(&diff_ids) {
            let blob = blob_ref(descriptor, &self.image)?;
            if !LAYER_MEDIA_TYPES.contains(&blob.media_type.as_str()) {
                return Err(self.unsupported(format!("layer media type {} is not supported", blob.media_type)));
            }
            layers.push((blob, diff_id.clone()));
        }
        Ok(layers)
    }

    /// Every layer fetched and unpacked, `max_downloads` at a time, under one image budget.
    async fn fetch_layers(
        &self,
        layers: Vec<(BlobRef, Digest)>,
        scratch: &Arc<tempfile::TempDir>,
    ) -> Result<Vec<LayerRecord>, ImageError> {
        let total = layers.len();
        let budget = UnpackBudget::new(self.limits);
        futures::stream::iter(layers.into_iter().enumerate())
            .map(|(n, (blob, diff_id))| {
                let budget = budget.clone();
                async move {
                    let layer = Layer { blob: &blob, diff_id: &diff_id, position: (n + 1, total), budget };
                    self.fetch_layer(layer, scratch).await
                }
            })
            .buffer_unordered(self.max_downloads)
            .try_collect()
            .await
    }
}

/// The image manifest `top` stands for: itself, or this node's entry of an index.
async fn resolve_manifest(
    source: &dyn ImageSource,
    image: &str,
    top: Vec<u8>,
    top_digest: Digest,
    limits: &PullLimits,
) -> Result<(Vec<u8>, Digest), ImageError> {
    let unsupported = |reason: String| ImageError::Unsupported { image: image.to_string(), reason };
    let (bytes, digest) = match manifest_kind(&top, image)? {
        ManifestKind::Manifest => (top, top_digest),
        ManifestKind::Index => {
            let index: ImageIndex = serde_json::from_slice(&top).map_err(|e| unsupported(format!("bad index: {e}")))?;
            let node = NodePlatform::current();
            let entry = select_platform(index.manifests(), &node).ok_or_else(|| {
                let variant = node.variant.as_deref().map(|v| format!("/{v}")).unwrap_or_default();
                unsupported(format!("the index has no linux/{}{variant} manifest", node.arch))
            })?;
            source.fetch_manifest(Some(&to_digest(entry, image)?), limits.manifest_bytes).await?
        }
    };
    if manifest_kind(&bytes, image)? != ManifestKind::Manifest {
        return Err(unsupported("an index entry is itself an index".into()));
    }
    Ok((bytes, digest))
}

/// One layer of a pull: its blob, its content digest, its place, and the image's budget.
struct Layer<'a> {
    blob: &'a BlobRef,
    diff_id: &'a Digest,
    position: (usize, usize),
    budget: UnpackBudget,
}

impl Pull<'_> {
    /// Downloads and unpacks one layer unless it is already installed; one it installs is
    /// added to `installed`.
    async fn fetch_layer(&self, layer: Layer<'_>, scratch: &Arc<tempfile::TempDir>) -> Result<LayerRecord, ImageError> {
        let Layer { blob, diff_id, position: (n, total), budget } = layer;
        let (store, source, image) = (self.store, self.source, self.image.as_str());
        let path = store.layer_path(diff_id);
        if store.has_layer(diff_id) {
            tracing::info!(image, layer = %diff_id, "layer {n}/{total} already present");
            let stats = crate::blocking::spawn(move || layer_stats(&path))
                .await
                .map_err(|e| ImageError::Task(e.to_string()))?;
            let stats =
                stats.map_err(|source| ImageError::Unpack { image: image.into(), layer: diff_id.clone(), source })?;
            return Ok(LayerRecord { diff_id: diff_id.clone(), disk_bytes: stats.disk_bytes, inodes: stats.inodes });
        }
        let started = Instant::now();
        tracing::info!(image, layer = %diff_id, blob = %blob.digest, bytes = blob.size, "layer {n}/{total}: fetching from {}", source.describe());
        // Unpacked as it downloads: the unpacker reads the chunks on a blocking thread while
        // the fetch checks the pace, the size and, at the end, the digest. Nothing is
        // installed unless both ended well; the scratch directory goes with a failure.
        let unpack_dir = scratch.path().join(format!("layer-{}", diff_id.hex()));
        let (chunks, reader) = super::source::blob_channel();
        let (dir, id, keep, running) = (unpack_dir.clone(), diff_id.clone(), scratch.clone(), self.unpackers.token());
        let unpacking = crate::blocking::spawn(move || {
            let unpacked = unpack_layer_from(reader, &dir, &id, &budget);
            drop((keep, running));
            unpacked
        });
        let fetched = source.stream_blob(blob, scratch.path(), chunks).await;
        let unpacked = unpacking.await.map_err(|e| ImageError::Task(e.to_string()))?;
        // The fetch's failure first: the unpacker only saw its consequence.
        fetched?;
        let stats =
            unpacked.map_err(|source| ImageError::Unpack { image: image.into(), layer: diff_id.clone(), source })?;
        store.install_layer(&unpack_dir, diff_id)?;
        self.installed.lock().unwrap_or_else(|p| p.into_inner()).push(diff_id.clone());
        tracing::info!(
            image,
            layer = %diff_id,
            fetch_and_unpack_ms = started.elapsed().as_millis() as u64,
            disk_bytes = stats.disk_bytes,
            "layer {n}/{total} ready"
        );
        Ok(LayerRecord { diff_id: diff_id.clone(), disk_bytes: stats.disk_bytes, inodes: stats.inodes })
    }
}

#[derive(Debug, PartialEq, Eq)]
enum ManifestKind {
    Manifest,
    Index,
}

/// Tells a manifest from an index by `mediaType`, or by shape when it is absent.
fn manifest_kind(bytes: &[u8], image: &str) -> Result<ManifestKind, ImageError> {
    let unsupported = |reason: String| ImageError::Unsupported { image: image.to_string(), reason };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| unsupported(format!("manifest is not JSON: {e}")))?;
    if value.get("schemaVersion").and_then(|v| v.as_u64()) != Some(2) {
        return Err(unsupported("only schema version 2 manifests are supported".into()));
    }
    match value.get("mediaType").and_then(|m| m.as_str()) {
        Some(OCI_MANIFEST | DOCKER_MANIFEST) => Ok(ManifestKind::Manifest),
        Some(OCI_INDEX | DOCKER_LIST) => Ok(ManifestKind::Index),
        Some(other) => Err(unsupported(format!("unsupported manifest media type {other}"))),
        None if value.get("manifests").is_some() => Ok(ManifestKind::Index),
        None if value.get("layers").is_some() => Ok(ManifestKind::Manifest),
        None => Err(unsupported("neither a manifest nor an index".into())),
    }
}

/// The platform images are chosen for: this node's architecture, and for ARM its variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlatform {
    pub arch: Arch,
    /// "v8" for arm64, "v7" for 32-bit ARM; none elsewhere.
    pub variant: Option<String>,
}

impl NodePlatform {
    pub fn current() -> Self {
        let arch = Arch::default();
        let variant = match arch {
            Arch::ARM64 => Some("v8".to_string()),
            Arch::ARM => Some("v7".to_string()),
            _ => None,
        };
        NodePlatform { arch, variant }
    }

    /// How well an entry's variant fits (higher is better; None: it does not run here). An
    /// exact variant wins over an entry that names none; a 32-bit ARM node also runs older
    /// ARM variants (v7 runs v6 and v5), the newest preferred.
    fn fit(&self, variant: Option<&str>) -> Option<u32> {
        let number = |v: &str| v.strip_prefix('v').and_then(|n| n.parse::<u32>().ok());
        match (self.variant.as_deref(), variant) {
            (mine, theirs) if mine == theirs => Some(100),
            (_, None) => Some(99),
            // arm64's only variant: "v8" and none are the same thing.
            (None, Some("v8")) if self.arch == Arch::ARM64 => Some(100),
            (Some(mine), Some(theirs)) if self.arch == Arch::ARM => {
                number(theirs).filter(|t| number(mine).is_some_and(|m| *t < m))
            }
            _ => None,
        }
    }
}

/// The index entry for this node: Linux, the node's architecture, the best variant. An index
/// whose only entry names no platform (what `ctr images import --digests` records for an
/// archive, as in kind's node images) stands for that entry, as containerd reads it.
fn select_platform<'a>(entries: &'a [Descriptor], node: &NodePlatform) -> Option<&'a Descriptor> {
    if let [only] = entries {
        if only.platform().is_none() {
            return Some(only);
        }
    }
    entries
        .iter()
        .filter_map(|d| {
            let p = d.platform().as_ref()?;
            if *p.os() != Os::Linux || *p.architecture() != node.arch {
                return None;
            }
            node.fit(p.variant().as_deref()).map(|score| (score, d))
        })
        .max_by_key(|(score, _)| *score)
        .map(|(_, d)| d)
}

fn to_digest(descriptor: &Descriptor, image: &str) -> Result<Digest, ImageError> {
    let text = descriptor.digest().to_string();
    Digest::parse(&text).ok_or_else(|| ImageError::Unsupported {
        image: image.to_string(),
        reason: format!("unsupported digest {text:?}"),
    })
}

fn blob_ref(descriptor: &Descriptor, image: &str) -> Result<BlobRef, ImageError> {
    Ok(BlobRef {
        digest: to_digest(descriptor, image)?,
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
            assert_eq!(manifest_kind(text.as_bytes(), "i").map_err(|_| ()), expected, "{text}");
        }
    }

    fn entry(digest: char, os: &str, arch: &str, variant: Option<&str>) -> serde_json::Value {
        let mut platform = serde_json::json!({"os": os, "architecture": arch});
        if let Some(v) = variant {
            platform["variant"] = v.into();
        }
        serde_json::json!({"mediaType": OCI_MANIFEST, "digest": format!("sha256:{}", digest.to_string().repeat(64)),
            "size": 1, "platform": platform})
    }

    #[test]
    fn platform_selection_follows_the_nodes_architecture_and_variant() {
        let index: ImageIndex = serde_json::from_value(serde_json::json!({"schemaVersion": 2, "manifests": [
            entry('a', "linux", "arm64", Some("v8")),
            entry('b', "windows", "amd64", None),
            entry('c', "linux", "amd64", None),
            entry('d', "linux", "arm", Some("v6")),
            entry('e', "linux", "arm", Some("v7")),
            entry('f', "linux", "s390x", None),
            entry('9', "linux", "arm", Some("v5")),
        ]}))
        .unwrap();
        let node = |arch: Arch, variant: Option<&str>| NodePlatform { arch, variant: variant.map(str::to_string) };
        let chosen = |n: &NodePlatform, entries: &[Descriptor]| {
            select_platform(entries, n).map(|d| to_digest(d, "i").unwrap().hex().chars().next().unwrap())
        };
        let all = index.manifests();
        let cases = [
            (node(Arch::Amd64, None), Some('c')),
            (node(Arch::ARM64, Some("v8")), Some('a')),
            (node(Arch::ARM64, None), Some('a')),
            (node(Arch::ARM, Some("v7")), Some('e')),
            (node(Arch::ARM, Some("v6")), Some('d')),
            (node(Arch::s390x, None), Some('f')),
            (node(Arch::PowerPC64le, None), None),
        ];
        for (n, want) in cases {
            assert_eq!(chosen(&n, all), want, "{n:?}");
        }
        // Without its v7 entry, a v7 node runs the newest older variant.
        let older: Vec<Descriptor> =
            all.iter().filter(|d| !d.digest().to_string().contains(&"e".repeat(8))).cloned().collect();
        assert_eq!(chosen(&node(Arch::ARM, Some("v7")), &older), Some('d'));
        // Windows entries never match, whatever the architecture.
        assert_eq!(chosen(&node(Arch::Amd64, None), &all[1..2]), None);
        // A lone entry that names no platform is the image; among others it is never chosen.
        let mut bare = entry('7', "linux", "amd64", None);
        bare.as_object_mut().unwrap().remove("platform");
        let lone: ImageIndex =
            serde_json::from_value(serde_json::json!({"schemaVersion": 2, "manifests": [bare.clone()]})).unwrap();
        assert_eq!(chosen(&node(Arch::ARM64, None), lone.manifests()), Some('7'));
        let mixed: ImageIndex = serde_json::from_value(
            serde_json::json!({"schemaVersion": 2, "manifests": [bare, entry('a', "linux", "arm64", None)]}),
        )
        .unwrap();
        assert_eq!(chosen(&node(Arch::Amd64, None), mixed.manifests()), None);
        assert_eq!(chosen(&node(Arch::ARM64, None), mixed.manifests()), Some('a'));
        // This node's own platform finds its entry.
        let current = NodePlatform::current();
        assert!(select_platform(all, &current).is_some() || !matches!(current.arch, Arch::Amd64 | Arch::ARM64));
    }
}
