//! Image and layer records as the image store keeps them.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// An image's identity: the digest of its config blob (`sha256:<hex>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ImageId(String);

/// A content digest, `sha256:<64 lowercase hex>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Digest(String);

impl Digest {
    /// Accepts only sha256 digests in canonical form.
    pub fn parse(s: &str) -> Option<Self> {
        let hex = s.strip_prefix("sha256:")?;
        let valid = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| Digest(s.to_string()))
    }

    pub fn of(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Digest(format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes))))
    }

    pub fn from_sha256(hasher: sha2::Sha256) -> Self {
        use sha2::Digest as _;
        Digest(format!("sha256:{}", hex::encode(hasher.finalize())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The hex part, used as a file name.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ImageId {
    pub fn from_config_digest(digest: &Digest) -> Self {
        ImageId(digest.as_str().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn digest(&self) -> Digest {
        Digest(self.0.clone())
    }
}

impl fmt::Display for ImageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One image in the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageRecord {
    pub id: ImageId,
    /// `registry/repository:tag`, fully qualified.
    pub repo_tags: BTreeSet<String>,
    /// `registry/repository@sha256:…` (the digest of the manifest or index pulled).
    pub repo_digests: BTreeSet<String>,
    /// Digest of the platform manifest (stored in the blob store).
    pub manifest: Digest,
    /// Uncompressed layer digests, bottom first.
    pub layers: Vec<Digest>,
    /// The `User` field of the image config, as written there.
    pub user: String,
    /// Unix seconds when the image entered the store.
    pub created_at: i64,
}

impl ImageRecord {
    /// The name a container's record keeps for this image: the one the request used, unless
    /// that was the image's id (kubelet creates containers by id), then its first tag.
    /// Statuses prefer the name the pod's author wrote, when kubelet passed it.
    pub fn status_name(&self, requested: &str) -> String {
        let id = self.id.as_str();
        let by_id = requested == id || id.strip_prefix("sha256:") == Some(requested);
        match self.repo_tags.iter().next() {
            Some(tag) if by_id => tag.clone(),
            _ => requested.to_string(),
        }
    }
}

/// One unpacked layer, shared by every image that lists its diff id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerRecord {
    pub diff_id: Digest,
    /// Bytes the unpacked layer occupies on disk.
    pub disk_bytes: u64,
    pub inodes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_parsing() {
        let hex = "a".repeat(64);
        assert!(Digest::parse(&format!("sha256:{hex}")).is_some());
        for bad in [
            "sha256:",
            "sha512:abc",
            &format!("sha256:{}", "A".repeat(64)),
            &format!("sha256:{}", "a".repeat(63)),
            &hex,
        ] {
            assert!(Digest::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(Digest::of(b"").as_str(), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn a_container_by_id_keeps_a_name_of_its_image() {
        let digest = Digest::of(b"config");
        let id = digest.as_str().to_string();
        let hex = id.trim_start_matches("sha256:").to_string();
        let image = |tags: &[&str]| ImageRecord {
            id: ImageId::from_config_digest(&digest),
            repo_tags: tags.iter().map(|t| t.to_string()).collect(),
            repo_digests: BTreeSet::new(),
            manifest: digest.clone(),
            layers: vec![],
            user: String::new(),
            created_at: 0,
        };
        let tagged = image(&["registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:latest"]);
        for (image, requested, want) in [
            // kubelet and crictl by id: a name the image has.
            (&tagged, id.as_str(), "registry.k8s.io/pause:3.10.2"),
            (&tagged, hex.as_str(), "registry.k8s.io/pause:3.10.2"),
            (&tagged, "pause", "pause"),
            (&image(&[]), id.as_str(), id.as_str()),
        ] {
            assert_eq!(image.status_name(requested), want, "{requested}");
        }
    }
}
