//! Pulls that must fail, and fail cleanly: missing images, bad references, corrupted blobs,
//! unreachable registries. Nothing half-stored remains.

mod common;

use common::images::small_image;
use common::registry::Registry;
use common::{require_root, Daemon};
use swapcri::cri;

async fn pull(daemon: &Daemon, image: &str) -> Result<String, tonic::Status> {
    daemon
        .images()
        .await
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec { image: image.into(), ..Default::default() }),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().image_ref)
}

fn assert_store_empty(daemon: &Daemon) {
    for dir in ["images/layers", "images/tmp", "images/blobs/sha256"] {
        let path = daemon.state_root().join(dir);
        let entries: Vec<_> = std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(entries.is_empty(), "{} holds {entries:?}", path.display());
    }
}

#[tokio::test]
async fn failed_pulls_have_the_right_codes_and_leave_nothing() {
    require_root();
    let registry = Registry::start();
    let image = small_image("corrupt-me", "", false);
    image.push(&registry.host(), "test/corrupt", "v1").await;
    let daemon = Daemon::start("");

    let cases = [
        (format!("{}/test/corrupt:no-such-tag", registry.host()), tonic::Code::NotFound),
        (format!("{}/test/no-such-repo:v1", registry.host()), tonic::Code::NotFound),
        ("UPPERCASE/repo".to_string(), tonic::Code::InvalidArgument),
        (String::new(), tonic::Code::InvalidArgument),
        (format!("{}/test/corrupt@sha256:abc", registry.host()), tonic::Code::InvalidArgument),
    ];
    for (reference, code) in cases {
        let err = pull(&daemon, &reference).await.unwrap_err();
        assert_eq!(err.code(), code, "{reference:?}: {}", err.message());
    }

    // A registry that is not there: unavailable, with the cause in the message.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = pull(&daemon, &format!("127.0.0.1:{closed}/test/x:v1")).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{}", err.message());

    // Flip bytes in the stored layer blob: the registry serves corrupt data.
    let blob = registry.blob_file(&image.layers[0].digest);
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let err = pull(&daemon, &format!("{}/test/corrupt:v1", registry.host())).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::DataLoss, "{}", err.message());
    assert!(err.message().contains(&image.layers[0].digest), "{}", err.message());

    let listed = daemon.images().await.list_images(cri::ListImagesRequest::default()).await.unwrap().into_inner();
    assert!(listed.images.is_empty());
    assert_store_empty(&daemon);
}
