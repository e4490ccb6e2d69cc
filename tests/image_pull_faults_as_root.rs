//! A registry that fails mid-blob: one that stops sending (the pull is cancelled after the
//! configured progress timeout) and one that drops the connection (the pull fails at once).
//! Either way nothing is left behind, and a pull from a registry that behaves succeeds.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::images::{small_image, TestImage};
use common::{require_root, Daemon};
use swapcri::cri;
use tokio::io::AsyncWriteExt;

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Send half the layer blob, then nothing.
    Stall,
    /// Send half the layer blob, then close the connection.
    Drop,
}

/// Serves the image's manifest and config; the first `faulty` requests for the layer blob
/// get `fault` halfway through, later ones the whole blob.
async fn faulty_registry(image: TestImage, fault: Fault, faulty: usize) -> u16 {
    let image = Arc::new(image);
    let layer_gets = Arc::new(AtomicUsize::new(0));
    common::http::serve(Arc::new(move |path: String, mut conn: tokio::net::TcpStream| {
        let (image, layer_gets) = (image.clone(), layer_gets.clone());
        Box::pin(async move {
            let (content_type, body, cut) = if path.ends_with("/manifests/v1") {
                (image.manifest.media_type.clone(), image.manifest.bytes.clone(), false)
            } else if path.ends_with(&image.config.digest) {
                ("application/octet-stream".into(), image.config.bytes.clone(), false)
            } else if path.ends_with(&image.layers[0].digest) {
                let cut = layer_gets.fetch_add(1, Ordering::SeqCst) < faulty;
                ("application/octet-stream".into(), image.layers[0].bytes.clone(), cut)
            } else {
                ("application/json".into(), b"{}".to_vec(), false)
            };
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n", body.len());
            conn.write_all(head.as_bytes()).await.ok()?;
            if cut {
                let _ = conn.write_all(&body[..body.len() / 2]).await;
                if fault == Fault::Stall {
                    tokio::time::sleep(Duration::from_secs(600)).await;
                }
                return None;
            }
            conn.write_all(&body).await.ok()?;
            Some(conn)
        })
    }))
    .await
}

async fn pull(daemon: &Daemon, image: String) -> Result<String, tonic::Status> {
    let request =
        cri::PullImageRequest { image: Some(cri::ImageSpec { image, ..Default::default() }), ..Default::default() };
    daemon.images().await.pull_image(request).await.map(|r| r.into_inner().image_ref)
}

fn assert_nothing_stored(daemon: &Daemon) {
    for dir in ["images/layers", "images/tmp", "images/blobs/sha256"] {
        assert_eq!(std::fs::read_dir(daemon.state_root().join(dir)).unwrap().count(), 0, "{dir} is empty");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stalled_pull_is_cancelled() {
    require_root();
    let port = faulty_registry(small_image("stall", "", false), Fault::Stall, usize::MAX).await;
    let daemon = Daemon::start("[image]\npull_progress_timeout_secs = 2");
    let started = Instant::now();
    let err = pull(&daemon, format!("127.0.0.1:{port}/test/stall:v1")).await.unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{}", err.message());
    assert!(err.message().contains("no progress for 2s"), "{}", err.message());
    assert!(elapsed < Duration::from_secs(30), "cancelled after {elapsed:?}");
    assert_nothing_stored(&daemon);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_dropped_mid_blob_fails_cleanly_and_the_retry_succeeds() {
    require_root();
    let image = small_image("dropped", "", false);
    let id = image.id();
    let port = faulty_registry(image, Fault::Drop, 1).await;
    let daemon = Daemon::start("");
    let reference = format!("127.0.0.1:{port}/test/dropped:v1");
    let err = pull(&daemon, reference.clone()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{}", err.message());
    assert!(err.message().contains(&format!("127.0.0.1:{port}")), "the registry is named: {}", err.message());
    assert_nothing_stored(&daemon);
    let listed = daemon.images().await.list_images(cri::ListImagesRequest::default()).await.unwrap().into_inner();
    assert!(listed.images.is_empty());

    assert_eq!(pull(&daemon, reference).await.expect("the retry succeeds"), id);
}
