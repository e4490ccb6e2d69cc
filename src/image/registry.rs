//! Registry access over the OCI distribution protocol: one client per registry host with
//! that host's settings, mirrors tried in order, and a watchdog on every transfer.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::RegistryOperation;
use oci_client::{Client, Reference};
use reqwest::header::ACCEPT;
use sha2::Digest as _;
use tokio::io::AsyncWriteExt;

use crate::config::{Config, RegistryConfig};
use crate::model::image::Digest;

use super::error::ImageError;
use super::limits::LimitHit;
use super::limits::PullLimits;
use super::rate::{RateFloor, TooSlow};
use super::reference::ImageName;
use super::source::{BlobChunks, BlobRef, ImageSource, MANIFEST_MEDIA_TYPES};

/// Registry settings and the clients built from them.
pub struct Registries {
    settings: BTreeMap<String, RegistryConfig>,
    loopback_plain_http: bool,
    progress_timeout: Duration,
    min_bytes_per_second: u64,
    rate_window: Duration,
    limits: PullLimits,
    clients: Mutex<HashMap<String, Arc<Client>>>,
    http: Mutex<HashMap<String, reqwest::Client>>,
}

impl Registries {
    pub fn new(config: &Config) -> Self {
        Registries {
            settings: config.registries.clone(),
            loopback_plain_http: config.image.loopback_plain_http,
            progress_timeout: Duration::from_secs(config.image.pull_progress_timeout_secs),
            min_bytes_per_second: config.image.pull_min_bytes_per_second,
            rate_window: Duration::from_secs(config.image.pull_min_rate_window_secs),
            limits: PullLimits::from(&config.image),
            clients: Mutex::new(HashMap::new()),
            http: Mutex::new(HashMap::new()),
        }
    }

    pub fn limits(&self) -> &PullLimits {
        &self.limits
    }

    /// A plain HTTP client with the host's TLS settings, for the requests oci-client would
    /// read whole (manifests): their bodies are read here against a cap.
    fn http_for(&self, host: &str, image: &str) -> Result<reqwest::Client, ImageError> {
        let mut clients = self.http.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(host) {
            return Ok(client.clone());
        }
        let settings = self.settings_for(host);
        let client = reqwest::Client::builder()
            .danger_accept_invalid_certs(settings.insecure_skip_verify)
            .read_timeout(self.progress_timeout * 2)
            .connect_timeout(Duration::from_secs(30))
            .user_agent(concat!("swapcri/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ImageError::Registry {
                registry: host.into(),
                image: image.into(),
                message: format!("cannot set up a client for it: {}", error_chain(&e)),
            })?;
        clients.insert(host.to_string(), client.clone());
        Ok(client)
    }

    fn settings_for(&self, host: &str) -> RegistryConfig {
        self.settings.get(host).cloned().unwrap_or_else(|| RegistryConfig {
            plain_http: self.loopback_plain_http && is_loopback(host),
            ..Default::default()
        })
    }

    /// The client for a registry host, made on first use. A client that cannot be made as
    /// configured is an error: oci-client's fallback, a default client, would ignore the
    /// host's plain-HTTP and TLS settings and every timeout.
    fn client_for(&self, host: &str, image: &str) -> Result<Arc<Client>, ImageError> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(host) {
            return Ok(client.clone());
        }
        let settings = self.settings_for(host);
        let config = ClientConfig {
            protocol: if settings.plain_http { ClientProtocol::Http } else { ClientProtocol::Https },
            accept_invalid_certificates: settings.insecure_skip_verify,
            platform_resolver: None,
            // A backstop only: the transfer watchdog below fires first and says why.
            read_timeout: Some(self.progress_timeout * 2),
            connect_timeout: Some(Duration::from_secs(30)),
            user_agent: concat!("swapcri/", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        };
        let client = Client::try_from(config).map_err(|e| ImageError::Registry {
            registry: host.into(),
            image: image.into(),
            message: format!(
                "cannot set up a client for it: {e} (a node without CA certificates needs the ca-certificates package)"
            ),
        })?;
        let client = Arc::new(client);
        clients.insert(host.to_string(), client.clone());
        Ok(client)
    }

    /// Connects to the first endpoint (mirrors, then the registry) that has the image's
    /// manifest; blobs then come from that same endpoint.
    pub async fn open(
        self: &Arc<Self>,
        name: &ImageName,
        auth: RegistryAuth,
    ) -> Result<(RegistrySource, Vec<u8>, Digest), ImageError> {
        let mirrors = self.settings.get(name.registry()).map(|s| s.mirrors.clone()).unwrap_or_default();
        let mut last_error = None;
        for mirror in mirrors.iter().map(Some).chain([None]) {
            let mut reference = name.to_reference();
            if let Some(m) = mirror {
                reference.set_mirror_registry(m.clone());
            }
            let source = RegistrySource {
                registries: self.clone(),
                name: name.clone(),
                reference,
                auth: if mirror.is_some() { RegistryAuth::Anonymous } else { auth.clone() },
            };
            match source.fetch_manifest(None, self.limits.manifest_bytes).await {
                Ok((bytes, digest)) => return Ok((source, bytes, digest)),
                Err(e) => {
                    if let Some(m) = mirror {
                        tracing::warn!(image = %name, mirror = %m, error = %e, "mirror failed, trying the next endpoint");
                    }
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.expect("the registry itself is always tried"))
    }
}

/// A registry endpoint serving one image.
pub struct RegistrySource {
    registries: Arc<Registries>,
    name: ImageName,
    reference: Reference,
    auth: RegistryAuth,
}

impl RegistrySource {
    fn host(&self) -> &str {
        self.reference.resolve_registry()
    }

    fn client(&self) -> Result<Arc<Client>, ImageError> {
        self.registries.client_for(self.host(), &self.name.to_string())
    }

    fn timeout(&self) -> Duration {
        self.registries.progress_timeout
    }

    fn stalled(&self, what: &str) -> ImageError {
        ImageError::Stalled { image: self.name.to_string(), what: what.to_string(), secs: self.timeout().as_secs() }
    }

    /// The rate floor of one transfer, from now.
    fn floor(&self) -> RateFloor {
        RateFloor::new(self.registries.min_bytes_per_second, self.registries.rate_window, Instant::now())
    }

    fn too_slow(&self, what: &str, slow: TooSlow) -> ImageError {
        ImageError::TooSlow { image: self.name.to_string(), what: what.to_string(), slow }
    }

    fn map_error(&self, e: OciDistributionError) -> ImageError {
        map_oci_error(e, self.host(), &self.name.to_string())
    }

    fn too_large(&self, what: &str, limit: u64) -> ImageError {
        ImageError::TooLarge {
            image: self.name.to_string(),
            what: what.to_string(),
            hit: LimitHit { setting: "image.max_manifest_bytes", limit },
        }
    }

    /// GETs a manifest, reading at most `max_manifest_bytes` of it. oci-client authenticates
    /// (and keeps the token for the blobs); the body is read here, since oci-client would
    /// read it whole.
    async fn fetch_manifest_bounded(&self, reference: &Reference, limit: u64) -> Result<Vec<u8>, ImageError> {
        let (image, host) = (self.name.to_string(), self.host().to_string());
        let registry_error =
            |message: String| ImageError::Registry { registry: host.clone(), image: image.clone(), message };
        let client = self.client()?;
        let http = self.registries.http_for(&host, &image)?;
        let fetch = async {
            let token =
                client.auth(reference, &self.auth, RegistryOperation::Pull).await.map_err(|e| self.map_error(e))?;
            let scheme = if self.registries.settings_for(&host).plain_http { "http" } else { "https" };
            let mut request = http.get(manifest_url(scheme, reference)).header(ACCEPT, MANIFEST_MEDIA_TYPES.join(", "));
            request = match (token, &self.auth) {
                (Some(token), _) => request.bearer_auth(token),
                (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
                (None, _) => request,
            };
            let response = request.send().await.map_err(|e| registry_error(error_chain(&e)))?;
            let status = response.status();
            if status == reqwest::StatusCode::NOT_FOUND {
                return Err(ImageError::NotFound(image.clone()));
            }
            if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
                return Err(ImageError::Unauthorized {
                    registry: host.clone(),
                    image: image.clone(),
                    message: status.to_string(),
                });
            }
            if !status.is_success() {
                return Err(registry_error(format!("manifest request answered {status}")));
            }
            if response.content_length().is_some_and(|n| n > limit) {
                return Err(self.too_large("the manifest", limit));
            }
            Ok(response)
        };
        let response =
            tokio::time::timeout(self.timeout(), fetch).await.map_err(|_| self.stalled("the manifest"))??;
        let mut body = response.bytes_stream();
        let mut bytes = Vec::new();
        let mut floor = self.floor();
        loop {
            match tokio::time::timeout(self.timeout(), body.next()).await {
                Err(_) => return Err(self.stalled("the manifest")),
                Ok(None) => return Ok(bytes),
                Ok(Some(chunk)) => {
                    let chunk = chunk.map_err(|e| registry_error(error_chain(&e)))?;
                    if bytes.len() as u64 + chunk.len() as u64 > limit {
                        return Err(self.too_large("the manifest", limit));
                    }
                    floor.record(chunk.len() as u64, Instant::now()).map_err(|e| self.too_slow("the manifest", e))?;
                    bytes.extend_from_slice(&chunk);
                }
            }
        }
    }
}

/// The distribution API's manifest URL; a mirror is told the image's own registry (`ns`).
fn manifest_url(scheme: &str, reference: &Reference) -> String {
    let tag_or_digest = reference.digest().or(reference.tag()).unwrap_or("latest");
    let ns = reference.namespace().map(|ns| format!("?ns={ns}")).unwrap_or_default();
    format!("{scheme}://{}/v2/{}/manifests/{tag_or_digest}{ns}", reference.resolve_registry(), reference.repository())
}

#[async_trait]
impl ImageSource for RegistrySource {
    fn describe(&self) -> String {
        format!("registry {}", self.host())
    }

    async fn fetch_manifest(&self, digest: Option<&Digest>, max_bytes: u64) -> Result<(Vec<u8>, Digest), ImageError> {
        let reference = match digest {
            Some(d) => {
                let mut r = self.name.with_digest(d);
                if let Some(ns) = self.reference.namespace() {
                    debug_assert_eq!(ns, self.name.registry());
                    r.set_mirror_registry(self.host().to_string());
                }
                r
            }
            None => self.reference.clone(),
        };
        let bytes = self.fetch_manifest_bounded(&reference, max_bytes).await?;
        let actual = Digest::of(&bytes);
        if let Some(expected) = digest.or(self.name.digest()) {
            if &actual != expected {
                return Err(ImageError::DigestMismatch {
                    image: self.name.to_string(),
                    what: "manifest".into(),
                    expected: expected.to_string(),
                    actual: actual.to_string(),
                });
            }
        }
        Ok((bytes, actual))
    }

    async fn open_blob(&self, blob: &BlobRef, scratch: &Path) -> Result<PathBuf, ImageError> {
        let path = scratch.join(blob.digest.hex());
        let stored = |source| ImageError::Download {
            image: self.name.to_string(),
            what: format!("blob {}", blob.digest),
            path: path.clone(),
            source,
        };
        let file = tokio::fs::File::create(&path).await.map_err(stored)?;
        let mut sink = BlobSink::File(tokio::io::BufWriter::new(file));
        self.fetch_blob(blob, &mut sink).await.map_err(|e| e.stored(stored))?;
        Ok(path)
    }

    async fn stream_blob(&self, blob: &BlobRef, _scratch: &Path, chunks: BlobChunks) -> Result<(), ImageError> {
        self.fetch_blob(blob, &mut BlobSink::Chunks(chunks))
            .await
            .map_err(|e| e.stored(|e| ImageError::Task(e.to_string())))
    }
}

/// Where a fetched blob goes: a file in the pull's scratch directory, or a reader's chunks.
enum BlobSink {
    File(tokio::io::BufWriter<tokio::fs::File>),
    Chunks(BlobChunks),
}

/// Why a blob's fetch ended early.
enum FetchEnd {
    /// The registry, the pace, the size or the digest: the pull's error.
    Failed(ImageError),
    /// The file could not be written.
    Stored(std::io::Error),
}

impl FetchEnd {
    fn stored(self, as_error: impl FnOnce(std::io::Error) -> ImageError) -> ImageError {
        match self {
            FetchEnd::Failed(e) => e,
            FetchEnd::Stored(e) => as_error(e),
        }
    }
}

impl BlobSink {
    /// Hands a chunk on; false when the reader stopped.
    async fn put(&mut self, chunk: bytes::Bytes) -> Result<bool, FetchEnd> {
        match self {
            BlobSink::File(file) => file.write_all(&chunk).await.map(|()| true).map_err(FetchEnd::Stored),
            BlobSink::Chunks(chunks) => Ok(chunks.send(Ok(chunk)).await.is_ok()),
        }
    }

    /// The end of a blob: a file is flushed; a reader gets the error of a blob that failed.
    async fn finish(&mut self, failed: Option<&ImageError>) -> Result<(), FetchEnd> {
        match (self, failed) {
            (BlobSink::File(file), None) => file.flush().await.map_err(FetchEnd::Stored),
            (BlobSink::File(_), Some(_)) => Ok(()),
            (BlobSink::Chunks(chunks), Some(e)) => {
                let _ = chunks.send(Err(std::io::Error::other(e.to_string()))).await;
                Ok(())
            }
            (BlobSink::Chunks(_), None) => Ok(()),
        }
    }
}

impl RegistrySource {
    /// Fetches a blob into `sink` as it arrives: the pace and the declared size are checked
    /// on the way, the digest at the end (a reader is told of a failure before its end).
    async fn fetch_blob(&self, blob: &BlobRef, sink: &mut BlobSink) -> Result<(), FetchEnd> {
        let result = self.receive(blob, sink).await;
        let failed = match &result {
            Err(FetchEnd::Failed(e)) => Some(e),
            _ => None,
        };
        sink.finish(failed).await?;
        result
    }

    async fn receive(&self, blob: &BlobRef, sink: &mut BlobSink) -> Result<(), FetchEnd> {
        let descriptor = OciDescriptor {
            media_type: blob.media_type.clone(),
            digest: blob.digest.to_string(),
            size: blob.size as i64,
            urls: None,
            annotations: None,
            artifact_type: None,
        };
        let what = format!("blob {}", blob.digest);
        let client = self.client().map_err(FetchEnd::Failed)?;
        let stream = tokio::time::timeout(self.timeout(), client.pull_blob_stream(&self.reference, &descriptor))
            .await
            .map_err(|_| FetchEnd::Failed(self.stalled(&what)))?
            .map_err(|e| FetchEnd::Failed(self.map_error(e)))?;
        let mut stream = stream.stream;
        let mut hasher = sha2::Sha256::new();
        let mut received = 0u64;
        let mut floor = self.floor();
        loop {
            let chunk = match tokio::time::timeout(self.timeout(), stream.next()).await {
                Err(_) => return Err(FetchEnd::Failed(self.stalled(&what))),
                Ok(None) => break,
                Ok(Some(chunk)) => {
                    chunk.map_err(|e| FetchEnd::Failed(self.map_error(OciDistributionError::IoError(e))))?
                }
            };
            received += chunk.len() as u64;
            floor.record(chunk.len() as u64, Instant::now()).map_err(|e| FetchEnd::Failed(self.too_slow(&what, e)))?;
            if received > blob.size {
                // Cut at the descriptor's size: a registry cannot make a blob longer than
                // the manifest (under its caps) said.
                return Err(FetchEnd::Failed(ImageError::TooLarge {
                    image: self.name.to_string(),
                    what,
                    hit: LimitHit { setting: "its declared size", limit: blob.size },
                }));
            }
            hasher.update(&chunk);
            if !sink.put(chunk).await? {
                // The reader stopped (it failed): its error is the pull's.
                return Ok(());
            }
        }
        let actual = Digest::from_sha256(hasher);
        if actual != blob.digest {
            return Err(FetchEnd::Failed(ImageError::DigestMismatch {
                image: self.name.to_string(),
                what,
                expected: blob.digest.to_string(),
                actual: actual.to_string(),
            }));
        }
        Ok(())
    }
}

/// Registry answers mapped to what they mean for the caller.
fn map_oci_error(e: OciDistributionError, registry: &str, image: &str) -> ImageError {
    let registry_error =
        |message: String| ImageError::Registry { registry: registry.into(), image: image.into(), message };
    let unauthorized =
        |message: String| ImageError::Unauthorized { registry: registry.into(), image: image.into(), message };
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => ImageError::NotFound(image.into()),
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            let message = envelope.errors.iter().map(|e| e.message.clone()).collect::<Vec<_>>().join("; ");
            if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                ImageError::NotFound(image.into())
            } else if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                unauthorized(message)
            } else {
                registry_error(message)
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => ImageError::NotFound(image.into()),
        OciDistributionError::ServerError { code: 401 | 403, message, .. } => unauthorized(message),
        OciDistributionError::UnauthorizedError { url } => unauthorized(format!("unauthorized at {url}")),
        OciDistributionError::AuthenticationFailure(message) => unauthorized(message),
        OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
            ImageError::DigestMismatch { image: image.into(), what: "content".into(), expected, actual }
        }
        OciDistributionError::IoError(io) => match io.get_ref().and_then(|inner| inner.downcast_ref::<DigestError>()) {
            Some(DigestError::VerificationError { expected, actual }) => ImageError::DigestMismatch {
                image: image.into(),
                what: "content".into(),
                expected: expected.clone(),
                actual: actual.clone(),
            },
            _ => registry_error(io.to_string()),
        },
        other => registry_error(error_chain(&other)),
    }
}

/// The error and its sources, so "connection refused" is not hidden behind "request failed".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback(host: &str) -> bool {
    let bare = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
    };
    bare == "localhost" || bare.parse::<IpAddr>().map(|ip| ip.is_loopback()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for (host, expected) in [
            ("localhost", true),
            ("localhost:5000", true),
            ("127.0.0.1:5000", true),
            ("127.3.2.1", true),
            ("[::1]:5000", true),
            ("registry.local:5000", false),
            ("10.0.0.1:5000", false),
            ("docker.io", false),
        ] {
            assert_eq!(is_loopback(host), expected, "{host}");
        }
    }

    #[test]
    fn settings_fall_back_to_loopback_rule() {
        let mut config = Config::default();
        config.registries.insert(
            "127.0.0.1:6000".into(),
            RegistryConfig { plain_http: false, insecure_skip_verify: true, mirrors: vec![] },
        );
        let registries = Registries::new(&config);
        assert!(registries.settings_for("127.0.0.1:5000").plain_http);
        assert!(!registries.settings_for("127.0.0.1:6000").plain_http, "an explicit entry wins");
        assert!(!registries.settings_for("quay.io").plain_http);
        config.image.loopback_plain_http = false;
        assert!(!Registries::new(&config).settings_for("127.0.0.1:5000").plain_http);
    }

    #[test]
    fn registry_errors_map_to_image_errors() {
        let cases: [(OciDistributionError, fn(&ImageError) -> bool); 5] = [
            (OciDistributionError::ImageManifestNotFoundError("x".into()), |e| matches!(e, ImageError::NotFound(_))),
            (OciDistributionError::ServerError { code: 404, url: "u".into(), message: "m".into() }, |e| {
                matches!(e, ImageError::NotFound(_))
            }),
            (OciDistributionError::ServerError { code: 401, url: "u".into(), message: "m".into() }, |e| {
                matches!(e, ImageError::Unauthorized { .. })
            }),
            (OciDistributionError::ServerError { code: 500, url: "u".into(), message: "m".into() }, |e| {
                matches!(e, ImageError::Registry { .. })
            }),
            (
                OciDistributionError::IoError(std::io::Error::other(DigestError::VerificationError {
                    expected: "a".into(),
                    actual: "b".into(),
                })),
                |e| matches!(e, ImageError::DigestMismatch { .. }),
            ),
        ];
        for (error, expected) in cases {
            let mapped = map_oci_error(error, "r", "i");
            assert!(expected(&mapped), "{mapped:?}");
        }
    }
}
