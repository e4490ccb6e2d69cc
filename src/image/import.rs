//! `swapcri image import`: loads an OCI image layout archive (tar, optionally gzip) into
//! the store, for air-gapped nodes. Images are named by the layout's annotations.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use oci_spec::image::ImageIndex;
use sha2::Digest as _;

use crate::model::image::{Digest, ImageId};

use super::error::ImageError;
use super::pull::store_image;
use super::reference::ImageName;
use super::source::{BlobRef, ImageSource};
use super::store::ImageStore;
use super::unpack::{detect_compression, Compression};

const CONTAINERD_NAME: &str = "io.containerd.image.name";
const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Imports every image the archive's index lists. `name` names an entry that carries only
/// a tag (`REPO` + that tag) or none at all. Returns the stored names and ids.
pub async fn import_archive(
    store: &Arc<ImageStore>,
    archive: &Path,
    name: Option<&str>,
    limits: &super::limits::PullLimits,
) -> Result<Vec<(String, ImageId)>, ImageError> {
    let scratch = store.scratch_dir()?;
    let layout = scratch.path().join("layout");
    let (from, to) = (archive.to_path_buf(), layout.clone());
    crate::blocking::spawn(move || extract(&from, &to)).await.map_err(|e| ImageError::Task(e.to_string()))??;
    let invalid = |reason: String| ImageError::Unsupported { image: archive.display().to_string(), reason };
    if !layout.join("oci-layout").is_file() {
        return Err(invalid("not an OCI image layout (no oci-layout file)".into()));
    }
    let index_path = layout.join("index.json");
    let index_bytes = std::fs::read(&index_path).map_err(ImageError::io(&index_path))?;
    let index: ImageIndex =
        serde_json::from_slice(&index_bytes).map_err(|e| invalid(format!("bad index.json: {e}")))?;
    if index.manifests().is_empty() {
        return Err(invalid("index.json lists no image".into()));
    }
    let mut imported = Vec::new();
    for entry in index.manifests() {
        let annotations = entry.annotations().clone().unwrap_or_default();
        let image_name = entry_name(annotations.get(CONTAINERD_NAME), annotations.get(REF_NAME), name)?;
        let digest = Digest::parse(entry.digest().as_ref())
            .ok_or_else(|| invalid(format!("unsupported digest {}", entry.digest())))?;
        let source = LayoutSource { dir: layout.clone(), top: digest.clone() };
        let (top, top_digest) = source.fetch_manifest(Some(&digest), limits.manifest_bytes).await?;
        let id = store_image(store, &source, &image_name, top, top_digest, 1, limits).await?;
        tracing::info!(image = %image_name, %id, "image imported");
        imported.push((image_name.to_string(), id));
    }
    Ok(imported)
}

/// The name for an index entry: containerd's full-name annotation, else the OCI ref name
/// (a full reference, or a tag joined to `name`), else `name` alone.
fn entry_name(
    containerd: Option<&String>,
    ref_name: Option<&String>,
    name: Option<&str>,
) -> Result<ImageName, ImageError> {
    if let Some(full) = containerd {
        return ImageName::parse(full);
    }
    match (ref_name, name) {
        (Some(r), _) if r.contains('/') || r.contains(':') || r.contains('@') => ImageName::parse(r),
        (Some(tag), Some(repo)) => ImageName::parse(&format!("{repo}:{tag}")),
        (None, Some(repo)) => ImageName::parse(repo),
        (Some(tag), None) => Err(ImageError::InvalidReference {
            reference: tag.clone(),
            reason: "the layout names only a tag; give the repository with --name".into(),
        }),
        (None, None) => Err(ImageError::InvalidReference {
            reference: String::new(),
            reason: "the layout does not name the image; give --name".into(),
        }),
    }
}

/// Unpacks the archive (plain or gzip tar) into `dest`; the tar crate keeps paths inside.
fn extract(archive: &Path, dest: &Path) -> Result<(), ImageError> {
    let file = std::fs::File::open(archive).map_err(ImageError::io(archive))?;
    let mut buffered = BufReader::new(file);
    let reader: Box<dyn Read> = match detect_compression(buffered.fill_buf().map_err(ImageError::io(archive))?) {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(buffered)),
        Compression::Zstd => {
            Box::new(zstd::stream::read::Decoder::with_buffer(buffered).map_err(ImageError::io(archive))?)
        }
        Compression::None => Box::new(buffered),
    };
    crate::store::private::create_dir_all(dest).map_err(ImageError::io(dest))?;
    tar::Archive::new(reader).unpack(dest).map_err(ImageError::io(archive))
}

/// Blobs of an unpacked OCI layout.
struct LayoutSource {
    dir: PathBuf,
    top: Digest,
}

impl LayoutSource {
    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.dir.join("blobs/sha256").join(digest.hex())
    }

    fn verify(&self, path: &Path, expected: &Digest) -> Result<(), ImageError> {
        let mut file =
            std::fs::File::open(path).map_err(|_| ImageError::NotFound(format!("blob {expected} in the layout")))?;
        let mut hasher = sha2::Sha256::new();
        std::io::copy(&mut file, &mut hasher).map_err(ImageError::io(path))?;
        let actual = Digest::from_sha256(hasher);
        if &actual != expected {
            return Err(ImageError::DigestMismatch {
                image: self.dir.display().to_string(),
                what: format!("blob {expected}"),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl ImageSource for LayoutSource {
    fn describe(&self) -> String {
        "the image layout".into()
    }

    async fn fetch_manifest(&self, digest: Option<&Digest>, max_bytes: u64) -> Result<(Vec<u8>, Digest), ImageError> {
        let digest = digest.unwrap_or(&self.top).clone();
        let path = self.blob_path(&digest);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if size > max_bytes {
            return Err(ImageError::TooLarge {
                image: self.dir.display().to_string(),
                what: format!("manifest {digest}"),
                hit: super::limits::LimitHit { setting: "image.max_manifest_bytes", limit: max_bytes },
            });
        }
        self.verify(&path, &digest)?;
        let bytes = std::fs::read(&path).map_err(ImageError::io(&path))?;
        Ok((bytes, digest))
    }

    async fn open_blob(&self, blob: &BlobRef, _scratch: &Path) -> Result<PathBuf, ImageError> {
        let path = self.blob_path(&blob.digest);
        let (check, digest) = (path.clone(), blob.digest.clone());
        let this = LayoutSource { dir: self.dir.clone(), top: self.top.clone() };
        crate::blocking::spawn(move || this.verify(&check, &digest))
            .await
            .map_err(|e| ImageError::Task(e.to_string()))??;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        let s = |v: &str| v.to_string();
        let cases: [(Option<String>, Option<String>, Option<&str>, Option<&str>); 6] = [
            (Some(s("docker.io/library/busybox:1.36")), Some(s("1.36")), None, Some("docker.io/library/busybox:1.36")),
            (None, Some(s("localhost/test/app:v1")), None, Some("localhost/test/app:v1")),
            (None, Some(s("v2")), Some("localhost/app"), Some("localhost/app:v2")),
            (None, None, Some("localhost/app"), Some("localhost/app:latest")),
            (None, Some(s("v2")), None, None),
            (None, None, None, None),
        ];
        for (containerd, ref_name, name, expected) in cases {
            let got = entry_name(containerd.as_ref(), ref_name.as_ref(), name).ok().map(|n| n.to_string());
            assert_eq!(got.as_deref(), expected, "{containerd:?} {ref_name:?} {name:?}");
        }
    }
}
