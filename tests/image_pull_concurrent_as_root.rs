//! Concurrent pulls of one image share one download.

mod common;

use common::images::multi_layer_image;
use common::registry::Registry;
use common::{require_root, Daemon};
use swapcri::cri;

#[tokio::test]
async fn concurrent_pulls_share_one_download() {
    require_root();
    let registry = Registry::start();
    let image = multi_layer_image();
    image.push(&registry.host(), "test/shared", "v1").await;
    let daemon = Daemon::start("");
    let reference = format!("{}/test/shared:v1", registry.host());

    let mut pulls = Vec::new();
    for _ in 0..4 {
        let mut client = daemon.images().await;
        let request = cri::PullImageRequest {
            image: Some(cri::ImageSpec { image: reference.clone(), ..Default::default() }),
            ..Default::default()
        };
        pulls.push(tokio::spawn(async move { client.pull_image(request).await.map(|r| r.into_inner().image_ref) }));
    }
    for pull in pulls {
        assert_eq!(pull.await.unwrap().unwrap(), image.id());
    }
    for layer in &image.layers {
        assert_eq!(registry.blob_gets(&layer.digest), 1, "layer {} fetched once:\n{}", layer.digest, registry.log());
    }
    assert!(daemon.log().contains("joining a pull already in progress"));

    // A later pull of a present image downloads no layer again.
    let mut client = daemon.images().await;
    client
        .pull_image(cri::PullImageRequest {
            image: Some(cri::ImageSpec { image: reference.clone(), ..Default::default() }),
            ..Default::default()
        })
        .await
        .unwrap();
    for layer in &image.layers {
        assert_eq!(registry.blob_gets(&layer.digest), 1);
    }
}
