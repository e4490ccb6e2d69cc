//! A registry that stops sending mid-blob: the pull is cancelled after the configured
//! progress timeout and leaves nothing behind.

mod common;

use std::time::{Duration, Instant};

use common::images::small_image;
use common::{require_root, Daemon};
use swapcri::cri;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves the image's manifest and config, then stalls halfway through the layer blob.
async fn stalling_registry(image: common::images::TestImage) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let image = std::sync::Arc::new(image);
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let image = image.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                loop {
                    let n = match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let request = String::from_utf8_lossy(&buf[..n]).to_string();
                    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let (content_type, body, stall) = if path.ends_with("/manifests/v1") {
                        (image.manifest.media_type.clone(), image.manifest.bytes.clone(), false)
                    } else if path.ends_with(&image.config.digest) {
                        ("application/octet-stream".into(), image.config.bytes.clone(), false)
                    } else if path.ends_with(&image.layers[0].digest) {
                        ("application/octet-stream".into(), image.layers[0].bytes.clone(), true)
                    } else {
                        ("application/json".into(), b"{}".to_vec(), false)
                    };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    conn.write_all(head.as_bytes()).await.unwrap();
                    if stall {
                        conn.write_all(&body[..body.len() / 2]).await.unwrap();
                        tokio::time::sleep(Duration::from_secs(600)).await;
                        return;
                    }
                    conn.write_all(&body).await.unwrap();
                }
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread")]
async fn stalled_pull_is_cancelled() {
    require_root();
    let port = stalling_registry(small_image("stall", "", false)).await;
    let daemon = Daemon::start("[image]\npull_progress_timeout_secs = 2");
    let started = Instant::now();
    let err = daemon
        .images()
        .await
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec { image: format!("127.0.0.1:{port}/test/stall:v1"), ..Default::default() }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{}", err.message());
    assert!(err.message().contains("no progress for 2s"), "{}", err.message());
    assert!(elapsed < Duration::from_secs(30), "cancelled after {elapsed:?}");
    for dir in ["images/layers", "images/tmp", "images/blobs/sha256"] {
        assert_eq!(std::fs::read_dir(daemon.state_root().join(dir)).unwrap().count(), 0, "{dir} is empty");
    }
}
