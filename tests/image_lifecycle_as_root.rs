//! List, status, remove and filesystem usage; images survive a daemon restart; removal
//! leaves no layers behind. Needs root (layers with whiteouts).

mod common;

use common::images::{multi_layer_image, small_image};
use common::registry::Registry;
use common::{require_root, Daemon};
use nix::sys::signal::Signal;
use swapcri::cri;

fn spec(image: &str) -> Option<cri::ImageSpec> {
    Some(cri::ImageSpec { image: image.into(), ..Default::default() })
}

async fn list(daemon: &Daemon, filter: Option<&str>) -> Vec<cri::Image> {
    let filter = filter.map(|f| cri::ImageFilter { image: spec(f) });
    daemon.images().await.list_images(cri::ListImagesRequest { filter }).await.unwrap().into_inner().images
}

async fn fs_info(daemon: &Daemon) -> cri::FilesystemUsage {
    let info = daemon.images().await.image_fs_info(cri::ImageFsInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.image_filesystems.len(), 1);
    info.image_filesystems[0].clone()
}

async fn remove(daemon: &Daemon, image: &str) -> Result<(), tonic::Status> {
    daemon.images().await.remove_image(cri::RemoveImageRequest { image: spec(image) }).await.map(|_| ())
}

#[tokio::test]
async fn list_status_remove_fsinfo_and_restart() {
    require_root();
    let registry = Registry::start();
    let multi = multi_layer_image();
    multi.push(&registry.host(), "test/multi", "v1").await;
    multi.push(&registry.host(), "test/multi", "v2").await;
    let small = small_image("small", "", false);
    small.push(&registry.host(), "test/small", "v1").await;
    let mut daemon = Daemon::start(&format!("[image]\npinned = [\"{}/test/small:v1\"]", registry.host()));

    let empty = fs_info(&daemon).await;
    assert!(std::path::Path::new(&empty.fs_id.as_ref().unwrap().mountpoint).is_dir(), "mountpoint is a real path");

    let mut images = daemon.images().await;
    for reference in ["test/multi:v1", "test/multi:v2", "test/small:v1"] {
        images
            .pull_image(cri::PullImageRequest {
                image: spec(&format!("{}/{reference}", registry.host())),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    let all = list(&daemon, None).await;
    assert_eq!(all.len(), 2, "two tags of one image are one image");
    let multi_listed = all.iter().find(|i| i.id == multi.id()).unwrap();
    assert_eq!(multi_listed.repo_tags.len(), 2);
    assert!(!multi_listed.pinned);
    assert!(all.iter().find(|i| i.id == small.id()).unwrap().pinned, "configured pin reported");
    let filtered = list(&daemon, Some(&format!("{}/test/small:v1", registry.host()))).await;
    assert_eq!(filtered.iter().map(|i| i.id.clone()).collect::<Vec<_>>(), vec![small.id()]);
    assert!(list(&daemon, Some("docker.io/library/absent:1")).await.is_empty());

    // An unknown image has no status, and that is not an error.
    let unknown = images
        .image_status(cri::ImageStatusRequest { image: spec("docker.io/library/absent:1"), verbose: false })
        .await
        .unwrap()
        .into_inner();
    assert!(unknown.image.is_none());

    let full = fs_info(&daemon).await;
    let used = full.used_bytes.unwrap().value;
    assert!(used > 2 * 1_000_000, "two busybox layers counted: {used}");
    assert!(full.inodes_used.unwrap().value > empty.inodes_used.unwrap().value);

    // kill -9 and restart: everything is listed as before.
    daemon.stop_with(Signal::SIGKILL);
    daemon.restart();
    let after = list(&daemon, None).await;
    assert_eq!(after, all);

    // Removing by one tag removes the image with all its tags.
    remove(&daemon, &format!("{}/test/multi:v1", registry.host())).await.unwrap();
    let left = list(&daemon, None).await;
    assert_eq!(left.iter().map(|i| i.id.clone()).collect::<Vec<_>>(), vec![small.id()]);
    assert!(fs_info(&daemon).await.used_bytes.unwrap().value < used);
    // Idempotent.
    remove(&daemon, &format!("{}/test/multi:v2", registry.host())).await.unwrap();
    remove(&daemon, &multi.id()).await.unwrap();
    // By id.
    remove(&daemon, &small.id()).await.unwrap();
    assert!(list(&daemon, None).await.is_empty());
    let layers = daemon.state_root().join("images/layers");
    assert_eq!(std::fs::read_dir(&layers).unwrap().count(), 0, "no layer left behind");
    let blobs = daemon.state_root().join("images/blobs/sha256");
    assert_eq!(std::fs::read_dir(&blobs).unwrap().count(), 0, "no blob left behind");
    assert_eq!(fs_info(&daemon).await.inodes_used.unwrap().value, 0);

    let err = remove(&daemon, "Not A Reference").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
}
