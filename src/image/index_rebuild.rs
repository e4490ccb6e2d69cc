//! Rebuilding the image index from what the store holds when the index file cannot be read.
//! Every stored manifest whose config blob and unpacked layers are all present comes back as
//! an image. Tags and repository digests live only in the index, so rebuilt images are
//! untagged until the next pull by name gives them back (without downloading the layers).

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use oci_spec::image::{ImageConfiguration, ImageManifest};

use crate::model::image::{Digest, ImageId, ImageRecord, LayerRecord};

use super::index::Index;
use super::unpack::layer_stats;

/// The index the blobs and layer directories under `root` describe.
pub(super) fn rebuild(root: &Path) -> Index {
    let mut index = Index::default();
    let blobs = root.join("blobs/sha256");
    let Ok(entries) = fs::read_dir(&blobs) else { return index };
    for entry in entries.flatten() {
        let Some(manifest_digest) = Digest::parse(&format!("sha256:{}", entry.file_name().to_string_lossy())) else {
            continue;
        };
        let Ok(bytes) = fs::read(entry.path()) else { continue };
        let Ok(manifest) = serde_json::from_slice::<ImageManifest>(&bytes) else { continue };
        let created_at = entry.metadata().map(|m| m.mtime()).unwrap_or(0);
        match image_of(root, &manifest, manifest_digest, created_at) {
            Some((record, layers)) => {
                for layer in layers {
                    index.layers.entry(layer.diff_id.clone()).or_insert(layer);
                }
                index.images.insert(record.id.clone(), record);
            }
            None => {
                tracing::warn!(manifest = %entry.path().display(), "an image whose config or layers are missing is not restored")
            }
        }
    }
    index
}

/// The image a stored manifest stands for, when its config and every layer are present.
fn image_of(
    root: &Path,
    manifest: &ImageManifest,
    manifest_digest: Digest,
    created_at: i64,
) -> Option<(ImageRecord, Vec<LayerRecord>)> {
    let config_digest = Digest::parse(manifest.config().digest().as_ref())?;
    let config_bytes = fs::read(root.join("blobs/sha256").join(config_digest.hex())).ok()?;
    let config: ImageConfiguration = serde_json::from_slice(&config_bytes).ok()?;
    let diff_ids: Vec<Digest> = config.rootfs().diff_ids().iter().map(|d| Digest::parse(d)).collect::<Option<_>>()?;
    if diff_ids.len() != manifest.layers().len() {
        return None;
    }
    let mut layers = Vec::new();
    let mut seen = BTreeSet::new();
    for diff_id in &diff_ids {
        if seen.insert(diff_id.clone()) {
            let stats = layer_stats(&root.join("layers").join(diff_id.hex())).ok()?;
            layers.push(LayerRecord { diff_id: diff_id.clone(), disk_bytes: stats.disk_bytes, inodes: stats.inodes });
        }
    }
    let record = ImageRecord {
        id: ImageId::from_config_digest(&config_digest),
        repo_tags: BTreeSet::new(),
        repo_digests: BTreeSet::new(),
        manifest: manifest_digest,
        layers: diff_ids,
        user: config.config().as_ref().and_then(|c| c.user().clone()).unwrap_or_default(),
        created_at,
    };
    Some((record, layers))
}
