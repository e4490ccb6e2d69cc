//! `swapcri image import`: an OCI layout archive into the store of a running daemon.

mod common;

use common::images::{multi_layer_image, small_image};
use common::{require_root, Daemon};
use swapcri::cri;

async fn status(daemon: &Daemon, image: &str) -> Option<cri::Image> {
    daemon
        .images()
        .await
        .image_status(cri::ImageStatusRequest {
            image: Some(cri::ImageSpec { image: image.into(), ..Default::default() }),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner()
        .image
}

#[tokio::test]
async fn import_layouts_into_a_running_daemon() {
    require_root();
    let daemon = Daemon::start("");
    let dir = tempfile::tempdir().unwrap();

    // A full name in the layout, an index inside.
    let image = multi_layer_image().with_index();
    let archive = dir.path().join("multi.tar");
    image.write_layout_archive(&archive, "localhost/test/multi:v1");
    let out = daemon.command().args(["image", "import"]).arg(&archive).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&image.id()));
    let found = status(&daemon, "localhost/test/multi:v1").await.expect("the daemon sees the import");
    assert_eq!(found.id, image.id());

    // Only a tag in the layout: --name supplies the repository.
    let small = small_image("imported", "", false);
    let archive = dir.path().join("small.tar");
    small.write_layout_archive(&archive, "v3");
    let out = daemon.command().args(["image", "import"]).arg(&archive).output().unwrap();
    assert!(!out.status.success(), "a bare tag needs --name");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--name"));
    let out =
        daemon.command().args(["image", "import", "--name", "localhost/test/small"]).arg(&archive).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(status(&daemon, "localhost/test/small:v3").await.unwrap().id, small.id());

    // A layout whose blob does not match its digest is refused and stores nothing.
    let mut broken = small_image("broken", "", false);
    let last = broken.layers[0].bytes.len() - 1;
    broken.layers[0].bytes[last] ^= 0xff;
    let archive = dir.path().join("broken.tar");
    broken.write_layout_archive(&archive, "localhost/test/broken:v1");
    let out = daemon.command().args(["image", "import"]).arg(&archive).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("corrupt"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(status(&daemon, "localhost/test/broken:v1").await.is_none());
    let tmp = daemon.state_root().join("images/tmp");
    assert_eq!(std::fs::read_dir(tmp).unwrap().count(), 0);
}
