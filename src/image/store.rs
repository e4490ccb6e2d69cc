//! The image store: an index of images and layers, a blob store for manifests and
//! configs, and one directory per unpacked layer. Shared safely between the daemon and
//! `swapcri image import` through a lock file; each side reloads the index when the
//! other changed it.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::fcntl::{Flock, FlockArg};

use crate::model::image::{Digest, ImageId, ImageRecord, LayerRecord};
use crate::store::{read_versioned, write_atomic, write_versioned, StoreError};

use super::error::ImageError;
use super::index::Index;
use super::reference::ImageLookup;

const INDEX_VERSION: u32 = 1;

/// Identity of the index file as last read, to notice writes by another process.
type Stamp = Option<(u64, i64, i64)>;

struct Cached {
    index: Index,
    stamp: Stamp,
}

pub struct ImageStore {
    root: PathBuf,
    cached: Mutex<Cached>,
}

/// Bytes and inodes the store occupies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsUsage {
    pub bytes: u64,
    pub inodes: u64,
}

impl ImageStore {
    /// Opens (creating) the store under `root`.
    pub fn open(root: &Path) -> Result<Self, ImageError> {
        for dir in ["blobs/sha256", "layers", "tmp"] {
            let path = root.join(dir);
            crate::store::private::create_dir_all(&path).map_err(ImageError::io(&path))?;
        }
        let store = ImageStore {
            root: root.to_path_buf(),
            cached: Mutex::new(Cached { index: Index::default(), stamp: None }),
        };
        match store.with_index(|_| Ok(((), false))) {
            Err(ImageError::Store(StoreError::Corrupt { path, source })) => store.quarantine_index(&path, &source)?,
            other => other?,
        }
        Ok(store)
    }

    /// Moves an unreadable index aside (kept for an operator) and rebuilds it from the
    /// stored manifests, configs and layers, so no image whose content is here is lost.
    fn quarantine_index(&self, path: &Path, error: &serde_json::Error) -> Result<(), ImageError> {
        let _lock = self.lock_file()?;
        // `swapcri image import` may have written a good index since it was read.
        if !matches!(read_versioned::<Index>(path, INDEX_VERSION), Err(StoreError::Corrupt { .. })) {
            return Ok(());
        }
        let aside = path.with_extension(format!("json.corrupt-{}", chrono::Utc::now().timestamp()));
        fs::rename(path, &aside).map_err(ImageError::io(path))?;
        let index = super::index_rebuild::rebuild(&self.root);
        tracing::error!(
            %error,
            aside = %aside.display(),
            images = index.images.len(),
            "unreadable image index moved aside; images rebuilt from the stored manifests come back untagged until pulled again"
        );
        write_versioned(path, INDEX_VERSION, &index)?;
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory that holds the unpacked layers: the store's filesystem.
    pub fn layers_dir(&self) -> PathBuf {
        self.root.join("layers")
    }

    pub fn layer_path(&self, diff_id: &Digest) -> PathBuf {
        self.layers_dir().join(diff_id.hex())
    }

    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    /// A fresh private directory for work in progress; removed when dropped.
    pub fn scratch_dir(&self) -> Result<tempfile::TempDir, ImageError> {
        let tmp = self.root.join("tmp");
        tempfile::Builder::new().prefix("work-").tempdir_in(&tmp).map_err(ImageError::io(tmp))
    }

    /// Runs `f` on the current index with both the in-process and the cross-process lock
    /// held; `f` returns whether it changed the index, which is then written.
    fn with_index<R>(&self, f: impl FnOnce(&mut Index) -> Result<(R, bool), ImageError>) -> Result<R, ImageError> {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = self.lock_file()?;
        let path = self.index_path();
        let stamp = stamp_of(&path);
        if stamp != cached.stamp || stamp.is_none() {
            cached.index = read_versioned(&path, INDEX_VERSION)?.unwrap_or_default();
            cached.stamp = stamp;
        }
        let mut working = cached.index.clone();
        let (result, changed) = f(&mut working)?;
        if changed {
            write_versioned(&path, INDEX_VERSION, &working)?;
            cached.index = working;
            cached.stamp = stamp_of(&path);
        }
        Ok(result)
    }

    fn index_path(&self) -> PathBuf {
        self.root.join("index.json")
    }

    fn lock_file(&self) -> Result<Flock<File>, ImageError> {
        let path = self.root.join("lock");
        let file =
            OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(ImageError::io(&path))?;
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| ImageError::Io { path, source: errno.into() })
    }

    /// Every image with its size, read under one lock: a removal running at the same time
    /// cannot leave a listed image without its layers.
    pub fn list_sized(&self) -> Result<Vec<(ImageRecord, u64)>, ImageError> {
        self.with_index(|index| {
            Ok((index.images.values().map(|r| (r.clone(), self.size_in(index, r))).collect(), false))
        })
    }

    /// The image `lookup` names, with its size, read under one lock.
    pub fn find_sized(&self, lookup: &ImageLookup) -> Result<Option<(ImageRecord, u64)>, ImageError> {
        self.with_index(|index| Ok((find_in(index, lookup).map(|r| (r.clone(), self.size_in(index, r))), false)))
    }

    pub fn find(&self, lookup: &ImageLookup) -> Result<Option<ImageRecord>, ImageError> {
        self.with_index(|index| Ok((find_in(index, lookup).cloned(), false)))
    }

    /// Bytes the image's layers and config occupy on disk.
    fn size_in(&self, index: &Index, record: &ImageRecord) -> u64 {
        let layers: u64 = record.layers.iter().filter_map(|l| index.layers.get(l)).map(|l| l.disk_bytes).sum();
        let config = fs::metadata(self.blob_path(&record.id.digest())).map(|m| m.len()).unwrap_or(0);
        layers + config
    }

    pub fn has_layer(&self, diff_id: &Digest) -> bool {
        self.layer_path(diff_id).is_dir()
    }

    pub fn read_blob(&self, digest: &Digest) -> Result<Vec<u8>, ImageError> {
        let path = self.blob_path(digest);
        fs::read(&path).map_err(ImageError::io(path))
    }

    /// Stores a small blob (manifest, config) after checking its digest.
    fn write_blob(&self, digest: &Digest, bytes: &[u8]) -> Result<(), ImageError> {
        let actual = Digest::of(bytes);
        if &actual != digest {
            return Err(ImageError::DigestMismatch {
                image: String::new(),
                what: "blob".into(),
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(write_atomic(&self.blob_path(digest), bytes)?)
    }

    /// Moves a fully unpacked layer into place. A layer another pull installed meanwhile wins.
    pub fn install_layer(&self, unpacked: &Path, diff_id: &Digest) -> Result<(), ImageError> {
        let target = self.layer_path(diff_id);
        match fs::rename(unpacked, &target) {
            Ok(()) => Ok(()),
            Err(_) if target.is_dir() => Ok(()),
            Err(e) => Err(ImageError::Io { path: target, source: e }),
        }
    }

    /// Removes those of `layers` (installed by a pull that failed) that no image lists.
    pub fn discard_unindexed_layers(&self, layers: &[Digest]) {
        crate::blocking::check("removing layers");
        let garbage = self.with_index(|index| {
            Ok((layers.iter().filter(|l| !index.layers.contains_key(*l)).cloned().collect::<Vec<_>>(), false))
        });
        for layer in garbage.unwrap_or_default() {
            tracing::info!(layer = %layer, "removing a layer of a failed pull");
            self.delete_tree(&self.layer_path(&layer));
        }
    }

    /// Records an image whose layers are installed, storing its manifest and config blobs.
    /// Its tags move to it from any other image; an image already present gains the new
    /// tags and digests. Blobs are written under the lock so no collection races them.
    pub fn commit(
        &self,
        record: ImageRecord,
        layers: Vec<LayerRecord>,
        blobs: &[(Digest, Vec<u8>)],
    ) -> Result<ImageId, ImageError> {
        self.with_index(|index| {
            let stored =
                blobs.iter().try_for_each(|(digest, bytes)| self.write_blob(digest, bytes)).and_then(|()| match record
                    .layers
                    .iter()
                    .find(|l| !self.has_layer(l))
                {
                    Some(missing) => Err(ImageError::LayerVanished(missing.clone())),
                    None => Ok(()),
                });
            if let Err(e) = stored {
                // A failed commit (a full disk, a layer gone) leaves no blob behind that no
                // image references.
                let referenced: BTreeSet<&Digest> = index.images.values().map(|i| &i.manifest).collect();
                for (digest, _) in blobs {
                    let config = index.images.contains_key(&ImageId::from_config_digest(digest));
                    if !config && !referenced.contains(digest) {
                        let _ = fs::remove_file(self.blob_path(digest));
                    }
                }
                return Err(e);
            }
            for layer in layers {
                index.layers.entry(layer.diff_id.clone()).or_insert(layer);
            }
            for other in index.images.values_mut().filter(|i| i.id != record.id) {
                other.repo_tags.retain(|t| !record.repo_tags.contains(t));
            }
            let id = record.id.clone();
            match index.images.get_mut(&id) {
                Some(existing) => {
                    existing.repo_tags.extend(record.repo_tags);
                    existing.repo_digests.extend(record.repo_digests);
                }
                None => {
                    index.images.insert(id.clone(), record);
                }
            }
            Ok((id, true))
        })
    }

    /// Removes an image with all its tags, then the layers and blobs nothing uses any more.
    /// `in_use` vetoes the removal. Returns the removed image, `None` if there was none.
    pub fn remove(
        &self,
        lookup: &ImageLookup,
        in_use: impl FnOnce(&ImageId) -> Result<(), ImageError>,
    ) -> Result<Option<ImageId>, ImageError> {
        let (removed, garbage) = self.with_index(|index| {
            let Some(id) = find_in(index, lookup).map(|r| r.id.clone()) else {
                return Ok(((None, Vec::new()), false));
            };
            in_use(&id)?;
            index.images.remove(&id);
            let garbage = drop_unreferenced_layers(index);
            Ok(((Some(id), garbage), true))
        })?;
        crate::crash::point("image-remove-after-index");
        self.delete_layers(&garbage);
        self.collect_blobs()?;
        Ok(removed)
    }

    /// Start-up cleanup: interrupted work, layer directories and blobs no image needs,
    /// and images whose layers went missing.
    pub fn collect_garbage(&self) -> Result<(), ImageError> {
        let tmp = self.root.join("tmp");
        for entry in fs::read_dir(&tmp).map_err(ImageError::io(&tmp))?.flatten() {
            tracing::info!(path = %entry.path().display(), "removing interrupted work");
            remove_any(&entry.path());
        }
        let garbage = self.with_index(|index| {
            let before = (index.images.len(), index.layers.len());
            index.layers.retain(|id, _| self.has_layer(id));
            index.images.retain(|id, image| {
                let complete = image.layers.iter().all(|l| index.layers.contains_key(l));
                if !complete {
                    tracing::warn!(image = %id, "dropping image whose layers are missing; pull it again");
                }
                complete
            });
            let garbage = drop_unreferenced_layers(index);
            let changed = before != (index.images.len(), index.layers.len());
            Ok((garbage, changed))
        })?;
        self.delete_layers(&garbage);
        let known = self.with_index(|index| {
            Ok((index.layers.keys().map(|d| d.hex().to_string()).collect::<BTreeSet<_>>(), false))
        })?;
        let layers = self.layers_dir();
        for entry in fs::read_dir(&layers).map_err(ImageError::io(&layers))?.flatten() {
            if !known.contains(entry.file_name().to_string_lossy().as_ref()) {
                tracing::info!(path = %entry.path().display(), "removing unreferenced layer");
                self.delete_tree(&entry.path());
            }
        }
        self.collect_blobs()
    }

    /// Bytes and inodes used: unpacked layers plus stored blobs.
    pub fn usage(&self) -> Result<FsUsage, ImageError> {
        let mut usage = self.with_index(|index| {
            let mut usage = FsUsage::default();
            for layer in index.layers.values() {
                usage.bytes += layer.disk_bytes;
                usage.inodes += layer.inodes;
            }
            Ok((usage, false))
        })?;
        let blobs = self.root.join("blobs/sha256");
        for entry in fs::read_dir(&blobs).map_err(ImageError::io(&blobs))?.flatten() {
            if let Ok(meta) = entry.metadata() {
                usage.bytes += meta.blocks() * 512;
                usage.inodes += 1;
            }
        }
        Ok(usage)
    }

    /// Deletes the blobs no image references, under the index lock: a commit writes its blobs
    /// under that lock too, so none is taken for garbage between its write and its record.
    fn collect_blobs(&self) -> Result<(), ImageError> {
        let blobs = self.root.join("blobs/sha256");
        self.with_index(|index| {
            let referenced: BTreeSet<String> = index
                .images
                .values()
                .flat_map(|i| [i.id.digest().hex().to_string(), i.manifest.hex().to_string()])
                .collect();
            for entry in fs::read_dir(&blobs).map_err(ImageError::io(&blobs))?.flatten() {
                if !referenced.contains(entry.file_name().to_string_lossy().as_ref()) {
                    let _ = fs::remove_file(entry.path());
                }
            }
            Ok(((), false))
        })
    }

    fn delete_layers(&self, diff_ids: &[Digest]) {
        for diff_id in diff_ids {
            tracing::info!(layer = %diff_id, "removing layer no image uses");
            self.delete_tree(&self.layer_path(diff_id));
        }
    }

    /// Renames first so a half-deleted layer never looks installed.
    fn delete_tree(&self, path: &Path) {
        let doomed = self.root.join("tmp").join(format!(
            "delete-{}-{}",
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            std::process::id()
        ));
        match fs::rename(path, &doomed) {
            Ok(()) => remove_any(&doomed),
            Err(_) => remove_any(path),
        }
    }
}

fn find_in<'a>(index: &'a Index, lookup: &ImageLookup) -> Option<&'a ImageRecord> {
    match lookup {
        ImageLookup::Id(id) => index.images.get(id),
        ImageLookup::Tag(tag) => index.images.values().find(|i| i.repo_tags.contains(tag)),
        ImageLookup::Digest(d) => index.images.values().find(|i| i.repo_digests.contains(d)),
    }
}

/// Drops layer records no image lists; returns their ids for deletion.
fn drop_unreferenced_layers(index: &mut Index) -> Vec<Digest> {
    let used: BTreeSet<&Digest> = index.images.values().flat_map(|i| i.layers.iter()).collect();
    let unused: Vec<Digest> = index.layers.keys().filter(|l| !used.contains(l)).cloned().collect();
    for layer in &unused {
        index.layers.remove(layer);
    }
    unused
}

fn stamp_of(path: &Path) -> Stamp {
    fs::metadata(path).ok().map(|m| (m.ino(), m.mtime(), m.mtime_nsec()))
}

fn remove_any(path: &Path) {
    let result = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(_) => Ok(()),
    };
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove");
    }
}

#[cfg(test)]
mod tests;
