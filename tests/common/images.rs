//! Test images built from Debian's busybox-static: layers as tar archives, config, manifest
//! and optional index, pushed to a registry or written as an OCI layout archive.

use std::io::Write;
use std::path::Path;
use std::str::FromStr;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use serde_json::json;
use sha2::Digest as _;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

#[derive(Clone)]
pub struct Blob {
    pub media_type: String,
    pub bytes: Vec<u8>,
    pub digest: String,
}

impl Blob {
    pub fn new(media_type: &str, bytes: Vec<u8>) -> Blob {
        Blob { media_type: media_type.into(), digest: sha256(&bytes), bytes }
    }

    fn descriptor(&self) -> serde_json::Value {
        json!({"mediaType": self.media_type, "digest": self.digest, "size": self.bytes.len()})
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Compress {
    None,
    Gzip,
    Zstd,
}

/// A layer's entries, written with the tar crate.
pub struct LayerTar {
    builder: tar::Builder<Vec<u8>>,
}

impl LayerTar {
    pub fn new() -> Self {
        LayerTar { builder: tar::Builder::new(Vec::new()) }
    }

    fn header(kind: tar::EntryType, mode: u32, size: usize) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size as u64);
        h.set_mtime(1_700_000_000);
        h.set_uid(0);
        h.set_gid(0);
        h
    }

    pub fn dir(mut self, path: &str) -> Self {
        let mut h = Self::header(tar::EntryType::Directory, 0o755, 0);
        self.builder.append_data(&mut h, path, &[][..]).unwrap();
        self
    }

    pub fn file(mut self, path: &str, mode: u32, data: &[u8]) -> Self {
        let mut h = Self::header(tar::EntryType::Regular, mode, data.len());
        self.builder.append_data(&mut h, path, data).unwrap();
        self
    }

    pub fn symlink(mut self, path: &str, target: &str) -> Self {
        let mut h = Self::header(tar::EntryType::Symlink, 0o777, 0);
        self.builder.append_link(&mut h, path, target).unwrap();
        self
    }

    pub fn finish(self) -> Vec<u8> {
        self.builder.into_inner().unwrap()
    }
}

pub struct TestImage {
    pub layers: Vec<Blob>,
    pub diff_ids: Vec<String>,
    pub config: Blob,
    pub manifest: Blob,
    /// Other platforms' manifests listed by the index.
    pub others: Vec<Blob>,
    pub index: Option<Blob>,
}

impl TestImage {
    /// Builds an image from uncompressed layer tars. `docker` selects Docker schema2 media types.
    pub fn build(layers: Vec<(Vec<u8>, Compress)>, user: &str, docker: bool) -> TestImage {
        let diff_ids: Vec<String> = layers.iter().map(|(tar, _)| sha256(tar)).collect();
        let layers: Vec<Blob> = layers
            .into_iter()
            .map(|(tar, compress)| {
                let (suffix, bytes) = match compress {
                    Compress::None => ("", tar),
                    Compress::Gzip => {
                        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                        enc.write_all(&tar).unwrap();
                        (if docker { ".gzip" } else { "+gzip" }, enc.finish().unwrap())
                    }
                    Compress::Zstd => (if docker { ".zstd" } else { "+zstd" }, zstd::encode_all(&tar[..], 3).unwrap()),
                };
                let base = if docker {
                    "application/vnd.docker.image.rootfs.diff.tar"
                } else {
                    "application/vnd.oci.image.layer.v1.tar"
                };
                Blob::new(&format!("{base}{suffix}"), bytes)
            })
            .collect();
        let config = json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {"User": user, "Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        });
        let config_type = if docker {
            "application/vnd.docker.container.image.v1+json"
        } else {
            "application/vnd.oci.image.config.v1+json"
        };
        let config = Blob::new(config_type, serde_json::to_vec(&config).unwrap());
        let manifest_type = if docker { DOCKER_MANIFEST } else { OCI_MANIFEST };
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": manifest_type,
            "config": config.descriptor(),
            "layers": layers.iter().map(Blob::descriptor).collect::<Vec<_>>(),
        });
        let manifest = Blob::new(manifest_type, serde_json::to_vec(&manifest).unwrap());
        TestImage { layers, diff_ids, config, manifest, others: Vec::new(), index: None }
    }

    /// Wraps the image in an index whose first entry is another platform (arm64, listing
    /// no layers), so only a correct platform choice gets the right image.
    pub fn with_index(mut self) -> TestImage {
        let other_config = Blob::new(
            "application/vnd.oci.image.config.v1+json",
            serde_json::to_vec(
                &json!({"architecture": "arm64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}),
            )
            .unwrap(),
        );
        let other =
            json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": other_config.descriptor(), "layers": []});
        let other = Blob::new(OCI_MANIFEST, serde_json::to_vec(&other).unwrap());
        let mut arm = other.descriptor();
        arm["platform"] = json!({"os": "linux", "architecture": "arm64"});
        let mut amd = self.manifest.descriptor();
        amd["platform"] = json!({"os": "linux", "architecture": "amd64"});
        let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [arm, amd]});
        self.index = Some(Blob::new(OCI_INDEX, serde_json::to_vec(&index).unwrap()));
        self.others = vec![other, other_config];
        self
    }

    /// The same image with these annotations on its manifest (as `buildah config
    /// --annotation` puts them).
    pub fn with_manifest_annotations(mut self, annotations: serde_json::Value) -> TestImage {
        let mut manifest: serde_json::Value = serde_json::from_slice(&self.manifest.bytes).unwrap();
        manifest["annotations"] = annotations;
        self.manifest = Blob::new(&self.manifest.media_type, serde_json::to_vec(&manifest).unwrap());
        self
    }

    /// The digest a `name@digest` reference uses: the index when there is one.
    pub fn top(&self) -> &Blob {
        self.index.as_ref().unwrap_or(&self.manifest)
    }

    pub fn id(&self) -> String {
        self.config.digest.clone()
    }

    /// Pushes blobs and manifests to `host/repo:tag` over plain HTTP.
    pub async fn push(&self, host: &str, repo: &str, tag: &str) {
        let client = Client::new(ClientConfig { protocol: ClientProtocol::Http, ..Default::default() });
        let reference = Reference::from_str(&format!("{host}/{repo}:{tag}")).unwrap();
        client.auth(&reference, &RegistryAuth::Anonymous, RegistryOperation::Push).await.unwrap();
        let blobs = self
            .layers
            .iter()
            .chain([&self.config])
            .chain(self.others.iter().filter(|b| !b.media_type.contains("manifest")));
        for blob in blobs {
            client.push_blob(&reference, blob.bytes.clone(), &blob.digest).await.unwrap();
        }
        let push_manifest = |blob: &Blob, reference: Reference| {
            let client = &client;
            let blob = blob.clone();
            async move {
                client
                    .push_manifest_raw(
                        &reference,
                        blob.bytes.clone(),
                        http::HeaderValue::from_str(&blob.media_type).unwrap(),
                    )
                    .await
                    .unwrap();
            }
        };
        let by_digest = |d: &str| Reference::from_str(&format!("{host}/{repo}@{d}")).unwrap();
        for other in self.others.iter().filter(|b| b.media_type.contains("manifest")) {
            push_manifest(other, by_digest(&other.digest)).await;
        }
        match &self.index {
            Some(index) => {
                push_manifest(&self.manifest, by_digest(&self.manifest.digest)).await;
                push_manifest(index, reference).await;
            }
            None => push_manifest(&self.manifest, reference).await,
        }
    }

    /// Writes an OCI image layout archive naming the image `ref_name`.
    pub fn write_layout_archive(&self, path: &Path, ref_name: &str) {
        let mut builder = tar::Builder::new(std::fs::File::create(path).unwrap());
        let mut add = |name: &str, bytes: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            h.set_size(bytes.len() as u64);
            builder.append_data(&mut h, name, bytes).unwrap();
        };
        add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#);
        let all =
            self.layers.iter().chain([&self.config, &self.manifest]).chain(self.others.iter()).chain(self.index.iter());
        for blob in all {
            add(&format!("blobs/sha256/{}", &blob.digest["sha256:".len()..]), &blob.bytes);
        }
        let mut top = self.top().descriptor();
        top["annotations"] = json!({"org.opencontainers.image.ref.name": ref_name});
        add("index.json", &serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": [top]})).unwrap());
        builder.finish().unwrap();
    }
}

pub fn busybox() -> Vec<u8> {
    std::fs::read("/bin/busybox").expect("/bin/busybox (Debian package busybox-static) must be installed")
}

/// Three layers (gzip, zstd, plain): busybox and files, then a whiteout of one file and an
/// opaque directory, then one more file.
pub fn multi_layer_image() -> TestImage {
    let base = LayerTar::new()
        .dir("bin")
        .file("bin/busybox", 0o755, &busybox())
        .symlink("bin/sh", "busybox")
        .dir("etc")
        .file("etc/removed", 0o644, b"gone in layer 2\n")
        .file("etc/kept", 0o644, b"kept\n")
        .dir("data")
        .dir("data/old")
        .file("data/old/a", 0o644, b"hidden by the opaque dir\n")
        .finish();
    let change = LayerTar::new()
        .file("etc/.wh.removed", 0o644, b"")
        .dir("data/old")
        .file("data/old/.wh..wh..opq", 0o644, b"")
        .file("data/old/b", 0o644, b"new\n")
        .finish();
    let top = LayerTar::new().file("etc/motd", 0o644, b"layer 3\n").finish();
    TestImage::build(vec![(base, Compress::Gzip), (change, Compress::Zstd), (top, Compress::None)], "", false)
}

/// A one-layer image with a distinct file so its layer differs from other images'.
pub fn small_image(marker: &str, user: &str, docker: bool) -> TestImage {
    let layer = LayerTar::new()
        .dir("bin")
        .file("bin/busybox", 0o755, &busybox())
        .file("marker", 0o644, marker.as_bytes())
        .finish();
    TestImage::build(vec![(layer, Compress::Gzip)], user, docker)
}
