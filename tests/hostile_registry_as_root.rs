//! A hostile registry: each repository serves one bad thing (an endless or oversized
//! manifest, too many layers, an oversized config, a blob longer than its descriptor, a
//! decompression bomb, layers past the image cap, a layer that trickles). Every pull is
//! refused with the limit named, leaves nothing on disk, keeps the daemon's memory bounded,
//! and the daemon keeps answering. Peak RSS and time to refuse are printed for
//! docs/security.md. A pull whose callers all went away is not continued.

mod common;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::images::{busybox, small_image, Blob, Compress, LayerTar, TestImage, OCI_MANIFEST};
use common::{require_root, Daemon};
use serde_json::json;
use swapcri::cri;
use tokio::io::AsyncWriteExt;

/// One answer of the hostile registry.
#[derive(Clone)]
enum Answer {
    /// A body sent whole, announced with `declared` (its own length when None).
    Body { content_type: String, body: Arc<Vec<u8>>, declared: Option<u64> },
    /// `prefix`, then the same chunk again and again, for as long as the client reads.
    Endless { prefix: Arc<Vec<u8>>, chunk: Arc<Vec<u8>> },
    /// `head` once, then `member` `times` times: a gzip stream of many members.
    Repeated { head: Arc<Vec<u8>>, member: Arc<Vec<u8>>, times: usize },
    /// A body announced whole, sent `chunk` bytes every `every`.
    Trickle { body: Arc<Vec<u8>>, chunk: usize, every: Duration },
}

fn body(content_type: &str, bytes: Vec<u8>) -> Answer {
    Answer::Body { content_type: content_type.into(), body: Arc::new(bytes), declared: None }
}

/// Serves `routes` (path suffix → answer); anything else is an empty JSON object.
async fn hostile_registry(routes: Vec<(String, Answer)>) -> u16 {
    let routes = Arc::new(routes);
    common::http::serve(Arc::new(move |path: String, mut conn: tokio::net::TcpStream| {
        let routes = routes.clone();
        Box::pin(async move {
            let path = path.split('?').next().unwrap_or_default().to_string();
            let answer = routes
                .iter()
                .find(|(suffix, _)| path.ends_with(suffix.as_str()))
                .map(|(_, a)| a.clone())
                .unwrap_or_else(|| body("application/json", b"{}".to_vec()));
            serve(&mut conn, answer).await.ok()?;
            Some(conn)
        })
    }))
    .await
}

async fn serve(conn: &mut tokio::net::TcpStream, answer: Answer) -> std::io::Result<()> {
    match answer {
        Answer::Body { content_type, body, declared } => {
            let len = declared.unwrap_or(body.len() as u64);
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\n\r\n");
            conn.write_all(head.as_bytes()).await?;
            conn.write_all(&body).await
        }
        Answer::Endless { prefix, chunk } => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {OCI_MANIFEST}\r\nTransfer-Encoding: chunked\r\n\r\n");
            conn.write_all(head.as_bytes()).await?;
            conn.write_all(format!("{:x}\r\n", prefix.len()).as_bytes()).await?;
            conn.write_all(&prefix).await?;
            conn.write_all(b"\r\n").await?;
            loop {
                conn.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await?;
                conn.write_all(&chunk).await?;
                conn.write_all(b"\r\n").await?;
            }
        }
        Answer::Trickle { body, chunk, every } => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            conn.write_all(head.as_bytes()).await?;
            for part in body.chunks(chunk) {
                conn.write_all(part).await?;
                tokio::time::sleep(every).await;
            }
            Ok(())
        }
        Answer::Repeated { head: first, member, times } => {
            let len = first.len() + member.len() * times;
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {len}\r\n\r\n");
            conn.write_all(head.as_bytes()).await?;
            conn.write_all(&first).await?;
            for _ in 0..times {
                conn.write_all(&member).await?;
            }
            Ok(())
        }
    }
}

/// The image's manifest, config and layers as routes under `repo`.
fn image_routes(repo: &str, image: &TestImage) -> Vec<(String, Answer)> {
    let mut routes =
        vec![(format!("{repo}/manifests/v1"), body(&image.manifest.media_type, image.manifest.bytes.clone()))];
    routes.push((image.config.digest.clone(), body("application/octet-stream", image.config.bytes.clone())));
    for layer in &image.layers {
        routes.push((layer.digest.clone(), body("application/octet-stream", layer.bytes.clone())));
    }
    routes
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// A manifest and config for layer blobs given as (media type, digest, size, diff id).
fn manifest_for(layers: &[(String, u64, String)]) -> (Blob, Blob) {
    let diff_ids: Vec<&String> = layers.iter().map(|(_, _, d)| d).collect();
    let config = json!({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}});
    let config = Blob::new("application/vnd.oci.image.config.v1+json", serde_json::to_vec(&config).unwrap());
    let layers: Vec<_> = layers
        .iter()
        .map(|(digest, size, _)| json!({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": size}))
        .collect();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": config.media_type, "digest": config.digest, "size": config.bytes.len()},
        "layers": layers,
    });
    (Blob::new(OCI_MANIFEST, serde_json::to_vec(&manifest).unwrap()), config)
}

/// A layer of one file of `size` zero bytes, gzip-compressed as many members of 1 MiB each:
/// (first member with the tar header, the repeated member, how many times, total length).
fn zero_bomb(size_mib: usize) -> (Vec<u8>, Vec<u8>, usize, u64) {
    let mut header = tar::Header::new_ustar();
    header.set_path("zeros").unwrap();
    header.set_size((size_mib as u64) << 20);
    header.set_mode(0o644);
    header.set_cksum();
    let head = gzip(header.as_bytes());
    let member = gzip(&vec![0u8; 1 << 20]);
    let total = head.len() as u64 + member.len() as u64 * size_mib as u64;
    (head, member, size_mib, total)
}

/// What the daemon may grow by during a refused pull: buffers for a few concurrent
/// downloads, below the size of every attack that offers bulk (64 MiB and more), so
/// buffering one whole fails.
const MEMORY_BOUND_MIB: u64 = 48;

fn assert_nothing_stored(daemon: &Daemon) {
    for dir in ["images/layers", "images/tmp", "images/blobs/sha256"] {
        let left: Vec<_> =
            std::fs::read_dir(daemon.state_root().join(dir)).unwrap().flatten().map(|e| e.path()).collect();
        assert!(left.is_empty(), "{dir} holds {left:?}");
    }
}

/// Pulls `repo:v1` from the hostile registry on a fresh daemon configured with `config`;
/// checks the refusal, that nothing is stored and that the daemon still answers, and prints
/// the figures.
async fn refused(name: &str, config: &str, routes: Vec<(String, Answer)>, repo: &str, code: tonic::Code, names: &str) {
    let port = hostile_registry(routes).await;
    let daemon = Daemon::start(config);
    let before = daemon.reset_peak_memory();
    let started = Instant::now();
    let request = cri::PullImageRequest {
        image: Some(cri::ImageSpec { image: format!("127.0.0.1:{port}/{repo}:v1"), ..Default::default() }),
        ..Default::default()
    };
    let pulled = tokio::time::timeout(Duration::from_secs(300), daemon.images().await.pull_image(request)).await;
    let err = pulled.expect("refused in time").expect_err("a hostile pull is refused");
    let elapsed = started.elapsed();
    assert_eq!(err.code(), code, "{name}: {}", err.message());
    assert!(err.message().contains(names), "{name}: the message names {names:?}: {}", err.message());
    assert_nothing_stored(&daemon);
    let peak = daemon.assert_memory_within(before, MEMORY_BOUND_MIB, name);
    daemon.runtime().await.version(cri::VersionRequest::default()).await.expect("the daemon still answers");
    println!(
        "FIGURE hostile-registry {name}: refused in {} ms, peak RSS {} MiB (before the pull {} MiB): {}",
        elapsed.as_millis(),
        peak / 1024,
        before / 1024,
        err.message()
    );
}

const EXHAUSTED: tonic::Code = tonic::Code::ResourceExhausted;

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_manifest_is_cut_at_the_manifest_cap() {
    require_root();
    let chunk = Arc::new(vec![b' '; 64 * 1024]);
    let answer = Answer::Endless { prefix: Arc::new(b"{\"schemaVersion\": 2, \"x\": \"".to_vec()), chunk };
    let routes = vec![("endless/manifests/v1".to_string(), answer)];
    refused("endless manifest (defaults)", "", routes, "test/endless", EXHAUSTED, "image.max_manifest_bytes").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_announced_huge_is_refused_before_it_is_read() {
    require_root();
    let answer =
        Answer::Body { content_type: OCI_MANIFEST.into(), body: Arc::new(b"{}".to_vec()), declared: Some(10 << 30) };
    let routes = vec![("huge/manifests/v1".to_string(), answer)];
    refused("10 GiB Content-Length manifest", "", routes, "test/huge", EXHAUSTED, "image.max_manifest_bytes").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn too_many_layers_are_refused() {
    require_root();
    let layers: Vec<_> = (0..9)
        .map(|n| {
            let tar = common::images::LayerTar::new().file(&format!("f{n}"), 0o644, b"x").finish();
            (tar, common::images::Compress::Gzip)
        })
        .collect();
    let image = TestImage::build(layers, "", false);
    let routes = image_routes("test/layers", &image);
    refused(
        "9 layers over max_layers = 8",
        "[image]\nmax_layers = 8",
        routes,
        "test/layers",
        EXHAUSTED,
        "image.max_layers",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_config_is_refused_before_it_is_fetched() {
    require_root();
    let image = small_image("config", "", false);
    let mut manifest: serde_json::Value = serde_json::from_slice(&image.manifest.bytes).unwrap();
    manifest["config"]["size"] = json!(1u64 << 30);
    let manifest = serde_json::to_vec(&manifest).unwrap();
    let mut routes = image_routes("test/config", &image);
    routes[0] = ("test/config/manifests/v1".into(), body(OCI_MANIFEST, manifest));
    refused("a config declared 1 GiB", "", routes, "test/config", EXHAUSTED, "image.max_config_bytes").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blob_longer_than_its_descriptor_is_cut() {
    require_root();
    let image = small_image("long", "", false);
    let layer = &image.layers[0];
    let mut longer = layer.bytes.clone();
    longer.extend(std::iter::repeat_n(0u8, 64 << 20));
    let mut routes = image_routes("test/long", &image);
    routes.retain(|(path, _)| path != &layer.digest);
    routes.push((layer.digest.clone(), body("application/octet-stream", longer)));
    refused("a layer blob 64 MiB longer than declared", "", routes, "test/long", EXHAUSTED, "its declared size").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decompression_bomb_stops_at_the_layer_cap() {
    require_root();
    // About 2 MiB on the wire, a 2 GiB file once decompressed.
    let (head, member, times, total) = zero_bomb(2048);
    let digest = {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        h.update(&head);
        for _ in 0..times {
            h.update(&member);
        }
        format!("sha256:{}", hex::encode(h.finalize()))
    };
    assert!(total < 4 << 20, "the bomb is small on the wire: {total} bytes");
    let diff_id = format!("sha256:{}", "0".repeat(64));
    let (manifest, config) = manifest_for(&[(digest.clone(), total, diff_id)]);
    let routes = vec![
        ("test/bomb/manifests/v1".to_string(), body(OCI_MANIFEST, manifest.bytes.clone())),
        (config.digest.clone(), body("application/octet-stream", config.bytes.clone())),
        (digest, Answer::Repeated { head: Arc::new(head), member: Arc::new(member), times }),
    ];
    let config = "[image]\nmax_layer_unpacked_bytes = 67108864";
    refused(
        "2 MiB gzip layer of a 2 GiB file, cap 64 MiB",
        config,
        routes,
        "test/bomb",
        EXHAUSTED,
        "image.max_layer_unpacked_bytes",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn layers_past_the_image_cap_are_refused() {
    require_root();
    let mut layers = Vec::new();
    let mut routes = Vec::new();
    for n in 0..3 {
        let tar = common::images::LayerTar::new().file(&format!("f{n}"), 0o644, &vec![n as u8; 24 << 20]).finish();
        let blob = Blob::new("application/vnd.oci.image.layer.v1.tar+gzip", gzip(&tar));
        layers.push((blob.digest.clone(), blob.bytes.len() as u64, common::images::sha256(&tar)));
        routes.push((blob.digest.clone(), body("application/octet-stream", blob.bytes)));
    }
    let (manifest, config) = manifest_for(&layers);
    routes.push(("test/wide/manifests/v1".to_string(), body(OCI_MANIFEST, manifest.bytes.clone())));
    routes.push((config.digest.clone(), body("application/octet-stream", config.bytes.clone())));
    let config = "[image]\nmax_layer_unpacked_bytes = 33554432\nmax_image_unpacked_bytes = 50331648";
    refused(
        "3 layers of 24 MiB, image cap 48 MiB",
        config,
        routes,
        "test/wide",
        EXHAUSTED,
        "image.max_image_unpacked_bytes",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_manifest_meets_the_progress_deadline() {
    require_root();
    // The manifest's headers and one byte of its body, then nothing.
    let port = common::http::serve(Arc::new(|path: String, mut conn: tokio::net::TcpStream| {
        Box::pin(async move {
            if path.contains("/manifests/") {
                let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {OCI_MANIFEST}\r\nContent-Length: 1000\r\n\r\n{{");
                let _ = conn.write_all(head.as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(600)).await;
                return None;
            }
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").await.ok()?;
            Some(conn)
        })
    }))
    .await;
    let daemon = Daemon::start("[image]\npull_progress_timeout_secs = 2");
    let before = daemon.reset_peak_memory();
    let started = Instant::now();
    let request = cri::PullImageRequest {
        image: Some(cri::ImageSpec { image: format!("127.0.0.1:{port}/test/stalled:v1"), ..Default::default() }),
        ..Default::default()
    };
    let err = daemon.images().await.pull_image(request).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{}", err.message());
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_nothing_stored(&daemon);
    daemon.assert_memory_within(before, MEMORY_BOUND_MIB, "stalled manifest");
    daemon.runtime().await.version(cri::VersionRequest::default()).await.expect("the daemon still answers");
    println!("FIGURE hostile-registry stalled manifest: refused in {} ms", started.elapsed().as_millis());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trickling_layer_is_refused_under_the_rate_floor() {
    require_root();
    // About 30 bytes a second: bytes keep coming, so the progress deadline never fires.
    let image = small_image("trickle", "", false);
    let mut routes = image_routes("test/trickle", &image);
    let layer = Arc::new(image.layers[0].bytes.clone());
    routes.insert(
        0,
        (image.layers[0].digest.clone(), Answer::Trickle { body: layer, chunk: 30, every: Duration::from_secs(1) }),
    );
    refused(
        "trickling layer",
        "[image]\npull_min_bytes_per_second = 1024\npull_min_rate_window_secs = 5",
        routes,
        "test/trickle",
        tonic::Code::DeadlineExceeded,
        "image.pull_min_bytes_per_second",
    )
    .await;
}

/// A registry serving an image of two layers: busybox, sent whole, then a last one held after
/// its first bytes until `release`; `gone` is when the daemon closed the held layer's
/// connection.
struct HeldLayer {
    port: u16,
    release: Arc<tokio::sync::Notify>,
    gone: Arc<std::sync::Mutex<Option<Instant>>>,
}

async fn held_layer(repo: &str) -> HeldLayer {
    let marker: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    let last = LayerTar::new().file("marker", 0o644, &marker).finish();
    let base = LayerTar::new().dir("bin").file("bin/busybox", 0o755, &busybox()).finish();
    let image = TestImage::build(vec![(base, Compress::Gzip), (last, Compress::Gzip)], "", false);
    let routes = Arc::new(image_routes(repo, &image));
    let layer = (image.layers[1].digest.clone(), Arc::new(image.layers[1].bytes.clone()));
    let release = Arc::new(tokio::sync::Notify::new());
    let gone = Arc::new(std::sync::Mutex::new(None));
    let (r, g) = (release.clone(), gone.clone());
    let port = common::http::serve(Arc::new(move |path: String, mut conn: tokio::net::TcpStream| {
        let (routes, layer, release, gone) = (routes.clone(), layer.clone(), r.clone(), g.clone());
        Box::pin(async move {
            if !path.ends_with(layer.0.as_str()) {
                let answer = routes.iter().find(|(suffix, _)| path.ends_with(suffix.as_str())).map(|(_, a)| a.clone());
                serve(&mut conn, answer.unwrap_or_else(|| body("application/json", b"{}".to_vec()))).await.ok()?;
                return Some(conn);
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", layer.1.len());
            conn.write_all(head.as_bytes()).await.ok()?;
            conn.write_all(&layer.1[..100]).await.ok()?;
            let mut byte = [0u8; 1];
            tokio::select! {
                () = release.notified() => conn.write_all(&layer.1[100..]).await.ok()?,
                // The client has nothing more to send: a read that ends is the connection closed.
                _ = tokio::io::AsyncReadExt::read(&mut conn, &mut byte) => {
                    *gone.lock().unwrap() = Some(Instant::now());
                    return None;
                }
            }
            Some(conn)
        })
    }))
    .await;
    HeldLayer { port, release, gone }
}

/// A caller's own deadline: the server's answer (DeadlineExceeded) or the client's
/// (Cancelled), whichever ends the wait first.
fn gave_up(status: &tonic::Status) -> bool {
    matches!(status.code(), tonic::Code::DeadlineExceeded | tonic::Code::Cancelled)
}

/// PullImage of `repo:v1`, given up by the client after `patience` when set.
async fn pull_held(
    daemon: &Daemon,
    port: u16,
    repo: &str,
    patience: Option<Duration>,
) -> Result<String, tonic::Status> {
    let mut request = tonic::Request::new(cri::PullImageRequest {
        image: Some(cri::ImageSpec { image: format!("127.0.0.1:{port}/{repo}:v1"), ..Default::default() }),
        ..Default::default()
    });
    if let Some(patience) = patience {
        request.set_timeout(patience);
    }
    daemon.images().await.pull_image(request).await.map(|r| r.into_inner().image_ref)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pull_whose_caller_went_away_stops_unless_another_waits() {
    require_root();
    let daemon = Daemon::start("");
    // Alone: the caller gives up, and so does the daemon, taking out the layer it had
    // installed meanwhile.
    let held = held_layer("test/left").await;
    let layers = daemon.state_root().join("images/layers");
    let installed = async {
        let started = Instant::now();
        while std::fs::read_dir(&layers).map(|d| d.count()).unwrap_or(0) == 0 {
            if started.elapsed() > Duration::from_secs(5) {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    };
    let pull = pull_held(&daemon, held.port, "test/left", Some(Duration::from_secs(5)));
    let (err, installed) = tokio::join!(pull, installed);
    let left = Instant::now();
    assert!(gave_up(&err.unwrap_err()));
    assert!(installed, "the first layer was installed before the caller left");
    while held.gone.lock().unwrap().is_none() {
        assert!(left.elapsed() < Duration::from_secs(10), "the layer is still being read after its caller left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "FIGURE hostile-registry abandoned pull: the layer's connection closed {} ms after its caller left",
        left.elapsed().as_millis()
    );
    // The installed layer goes in the background once the pull is dropped, and the work
    // directory once the held layer's unpacker has read the end of its stream.
    let stored = |dir: &str| std::fs::read_dir(daemon.state_root().join(dir)).map(|d| d.count()).unwrap_or(0);
    while stored("images/layers") + stored("images/tmp") > 0 {
        assert!(
            left.elapsed() < Duration::from_secs(10),
            "the abandoned pull's layer or work directory is still there"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "FIGURE hostile-registry abandoned pull: nothing stored {} ms after its caller left",
        left.elapsed().as_millis()
    );
    assert_nothing_stored(&daemon);

    // Two callers: the first gives up, the pull goes on for the second.
    let held = held_layer("test/shared").await;
    let first_gives_up = async {
        let err = pull_held(&daemon, held.port, "test/shared", Some(Duration::from_secs(3))).await.unwrap_err();
        assert!(gave_up(&err), "{err:?}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(held.gone.lock().unwrap().is_none(), "the pull went on for the caller still waiting");
        held.release.notify_one();
    };
    let second = pull_held(&daemon, held.port, "test/shared", None);
    let ((), second) = tokio::join!(first_gives_up, second);
    assert!(!second.expect("the second caller gets the image").is_empty());
    daemon.runtime().await.version(cri::VersionRequest::default()).await.expect("the daemon still answers");
}
