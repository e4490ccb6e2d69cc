//! Image names as CRI clients write them, normalized the way registries and kubelet expect:
//! `busybox` is `docker.io/library/busybox:latest`.

use oci_client::Reference;

use crate::model::image::{Digest, ImageId};

use super::error::ImageError;

/// A parsed, fully qualified image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageName {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

/// How a CRI request names an image in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageLookup {
    Id(ImageId),
    Tag(String),
    Digest(String),
}

impl ImageName {
    pub fn parse(input: &str) -> Result<Self, ImageError> {
        let invalid = |reason: String| ImageError::InvalidReference { reference: input.to_string(), reason };
        if input.is_empty() {
            return Err(invalid("empty image reference".into()));
        }
        if input.trim() != input {
            return Err(invalid("surrounding whitespace".into()));
        }
        let parts = super::reference_syntax::split(input).map_err(invalid)?;
        let digest = match parts.digest {
            Some(d) => Some(Digest::parse(&d).ok_or_else(|| invalid(format!("unsupported digest {d:?}")))?),
            None => None,
        };
        let tag = match (parts.tag, &digest) {
            (Some(t), _) => Some(t),
            (None, None) => Some("latest".to_string()),
            (None, Some(_)) => None,
        };
        Ok(ImageName { registry: parts.registry, repository: parts.repository, tag, digest })
    }

    /// The registry host[:port] as written (`docker.io` for Docker Hub).
    pub fn registry(&self) -> &str {
        &self.registry
    }

    pub fn repository(&self) -> &str {
        &self.repository
    }

    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// `registry/repository`
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `registry/repository:tag`, when the reference has a tag and no digest.
    pub fn repo_tag(&self) -> Option<String> {
        match (&self.tag, &self.digest) {
            (Some(tag), None) => Some(format!("{}:{tag}", self.name())),
            _ => None,
        }
    }

    /// `registry/repository@digest` for a given manifest digest.
    pub fn repo_digest(&self, digest: &Digest) -> String {
        format!("{}@{digest}", self.name())
    }

    /// The reference to ask the registry for: by digest when there is one.
    pub fn to_reference(&self) -> Reference {
        match &self.digest {
            Some(d) => Reference::with_digest(self.registry.clone(), self.repository.clone(), d.to_string()),
            None => Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                self.tag.clone().unwrap_or_else(|| "latest".into()),
            ),
        }
    }

    /// The same repository at another digest (an index entry).
    pub fn with_digest(&self, digest: &Digest) -> Reference {
        Reference::with_digest(self.registry.clone(), self.repository.clone(), digest.to_string())
    }
}

impl std::fmt::Display for ImageName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.tag, &self.digest) {
            (_, Some(d)) => write!(f, "{}@{d}", self.name()),
            (Some(t), None) => write!(f, "{}:{t}", self.name()),
            (None, None) => write!(f, "{}", self.name()),
        }
    }
}

impl ImageLookup {
    /// An image id (`sha256:<hex>` or the bare 64-digit hex), else a tag or digest reference.
    pub fn parse(input: &str) -> Result<Self, ImageError> {
        if let Some(d) = Digest::parse(input) {
            return Ok(ImageLookup::Id(ImageId::from_config_digest(&d)));
        }
        if let Some(d) = Digest::parse(&format!("sha256:{input}")) {
            return Ok(ImageLookup::Id(ImageId::from_config_digest(&d)));
        }
        let name = ImageName::parse(input)?;
        Ok(match name.digest() {
            Some(d) => ImageLookup::Digest(name.repo_digest(d)),
            None => ImageLookup::Tag(name.repo_tag().expect("a reference without digest has a tag")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn normalization() {
        let cases: [(&str, &str, &str, Option<&str>); 9] = [
            ("busybox", "docker.io", "library/busybox", Some("docker.io/library/busybox:latest")),
            ("busybox:1.36", "docker.io", "library/busybox", Some("docker.io/library/busybox:1.36")),
            ("user/app:v1", "docker.io", "user/app", Some("docker.io/user/app:v1")),
            ("docker.io/busybox", "docker.io", "library/busybox", Some("docker.io/library/busybox:latest")),
            ("quay.io/org/app", "quay.io", "org/app", Some("quay.io/org/app:latest")),
            ("localhost/app:dev", "localhost", "app", Some("localhost/app:dev")),
            ("127.0.0.1:5000/test/multi:v2", "127.0.0.1:5000", "test/multi", Some("127.0.0.1:5000/test/multi:v2")),
            ("registry.local:5000/a/b/c:t", "registry.local:5000", "a/b/c", Some("registry.local:5000/a/b/c:t")),
            (
                "app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "docker.io",
                "library/app",
                None,
            ),
        ];
        for (input, registry, repository, repo_tag) in cases {
            let name = ImageName::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(name.registry(), registry, "{input}");
            assert_eq!(name.repository(), repository, "{input}");
            assert_eq!(name.repo_tag().as_deref(), repo_tag, "{input}");
        }
    }

    #[test]
    fn digest_references() {
        let name = ImageName::parse(&format!("127.0.0.1:5000/x@sha256:{HEX}")).unwrap();
        assert_eq!(name.digest().unwrap().hex(), HEX);
        assert_eq!(name.to_string(), format!("127.0.0.1:5000/x@sha256:{HEX}"));
        assert_eq!(name.to_reference().digest(), Some(format!("sha256:{HEX}").as_str()));
        // A tag beside the digest: the digest decides what is pulled.
        let both = ImageName::parse(&format!("busybox:1.36@sha256:{HEX}")).unwrap();
        assert!(both.repo_tag().is_none());
        assert_eq!(both.to_reference().digest(), Some(format!("sha256:{HEX}").as_str()));
    }

    #[test]
    fn invalid_references() {
        for input in
            ["", " busybox", "Busybox", "busybox:", "a//b", "busybox@sha256:abc", "busybox@md5:0123", "UPPER/case:tag"]
        {
            let err = ImageName::parse(input).unwrap_err();
            assert!(matches!(err, ImageError::InvalidReference { .. }), "{input:?} gave {err}");
        }
    }

    #[test]
    fn lookups() {
        let id = ImageId::from_config_digest(&Digest::parse(&format!("sha256:{HEX}")).unwrap());
        assert_eq!(ImageLookup::parse(&format!("sha256:{HEX}")).unwrap(), ImageLookup::Id(id.clone()));
        assert_eq!(ImageLookup::parse(HEX).unwrap(), ImageLookup::Id(id));
        assert_eq!(ImageLookup::parse("busybox").unwrap(), ImageLookup::Tag("docker.io/library/busybox:latest".into()));
        assert_eq!(
            ImageLookup::parse(&format!("busybox@sha256:{HEX}")).unwrap(),
            ImageLookup::Digest(format!("docker.io/library/busybox@sha256:{HEX}"))
        );
    }
}
