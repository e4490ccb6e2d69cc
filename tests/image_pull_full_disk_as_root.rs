//! A pull into a state root whose disk fills up while the layer unpacks as it downloads
//! (early, or half-way): ResourceExhausted naming the cause, nothing half-stored, and the
//! same pull succeeds once space is freed.

mod common;

use std::path::{Path, PathBuf};

use common::images::{Compress, LayerTar, TestImage};
use common::registry::Registry;
use common::{require_root, Daemon};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use swapcri::cri;

/// A tmpfs of a given size, lazily unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        mount(Some("tmpfs"), path, Some("tmpfs"), MsFlags::empty(), Some(format!("size={size}").as_str())).unwrap();
        Tmpfs(path.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let data = format!("size={size}");
        mount(None::<&str>, &self.0, None::<&str>, MsFlags::MS_REMOUNT, Some(data.as_str())).unwrap();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = umount2(&self.0, MntFlags::MNT_DETACH);
    }
}

/// Bytes no compressor shrinks (xorshift).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

async fn pull(daemon: &Daemon, image: &str) -> Result<String, tonic::Status> {
    let request = cri::PullImageRequest {
        image: Some(cri::ImageSpec { image: image.into(), ..Default::default() }),
        ..Default::default()
    };
    daemon.images().await.pull_image(request).await.map(|r| r.into_inner().image_ref)
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_fails_the_pull_cleanly_and_a_retry_after_freeing_space_succeeds() {
    require_root();
    let registry = Registry::start();
    let layer = LayerTar::new().file("big", 0o644, &noise(6 << 20)).finish();
    let image = TestImage::build(vec![(layer, Compress::None)], "", false);
    image.push(&registry.host(), "test/big", "v1").await;
    let reference = format!("{}/test/big:v1", registry.host());

    let mut daemon = Daemon::configure("");
    let store = Tmpfs::mount(&daemon.state_root(), "2m");
    daemon.restart();
    // The layer is unpacked as it downloads (no blob file is kept): at 2 MiB and at 5 MiB its
    // 6 MiB unpacked copy does not fit, and the unpack is the failing step.
    for (size, during) in [("2m", "layer"), ("5m", "layer")] {
        store.resize(size);
        let err = pull(&daemon, &reference).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{size}: {}", err.message());
        assert!(err.message().contains("No space left on device"), "{size}: {}", err.message());
        assert!(err.message().contains(during), "{size}: the failing step is named: {}", err.message());
        for dir in ["images/layers", "images/tmp", "images/blobs/sha256"] {
            let left = entries(&daemon.state_root().join(dir));
            assert!(left.is_empty(), "{size}: {dir} holds {left:?}");
        }
        let listed = daemon.images().await.list_images(cri::ListImagesRequest::default()).await.unwrap();
        assert!(listed.into_inner().images.is_empty(), "{size}: no image entry");
    }

    store.resize("64m");
    let image_ref = pull(&daemon, &reference).await.expect("the pull succeeds once there is room");
    assert_eq!(image_ref, image.id());
    let listed = daemon.images().await.list_images(cri::ListImagesRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.images.len(), 1);
    assert!(daemon.log().contains("No space left on device"), "the failures are logged");
}
