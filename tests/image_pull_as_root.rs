//! Pulling from a real registry: multi-layer images with whiteouts, tag and digest
//! references, indexes, Docker media types, image users. Needs root (device nodes and
//! trusted xattrs in layers, overlay mounts to check them).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::images::{multi_layer_image, small_image, TestImage};
use common::registry::Registry;
use common::{require_root, Daemon};
use swapcri::cri;

fn spec(image: &str) -> Option<cri::ImageSpec> {
    Some(cri::ImageSpec { image: image.into(), ..Default::default() })
}

async fn pull(daemon: &Daemon, image: &str) -> Result<String, tonic::Status> {
    let mut images = daemon.images().await;
    images
        .pull_image(cri::PullImageRequest { image: spec(image), ..Default::default() })
        .await
        .map(|r| r.into_inner().image_ref)
}

async fn status(daemon: &Daemon, image: &str) -> Option<cri::Image> {
    let mut images = daemon.images().await;
    images
        .image_status(cri::ImageStatusRequest { image: spec(image), verbose: false })
        .await
        .unwrap()
        .into_inner()
        .image
}

/// Mounts the image's layers as overlay lower directories, read-only, and returns the mount.
struct Rootfs {
    dir: tempfile::TempDir,
}

impl Rootfs {
    fn mount(daemon: &Daemon, image: &TestImage) -> Rootfs {
        let layers: Vec<PathBuf> = image
            .diff_ids
            .iter()
            .rev()
            .map(|d| daemon.state_root().join("images/layers").join(&d["sha256:".len()..]))
            .collect();
        let lower = layers.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":");
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &format!("ro,lowerdir={lower}")])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "overlay mount of {lower}");
        Rootfs { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

impl Drop for Rootfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[tokio::test]
async fn multi_layer_pull_by_tag_and_digest() {
    require_root();
    let registry = Registry::start();
    let image = multi_layer_image();
    image.push(&registry.host(), "test/multi", "v1").await;
    let daemon = Daemon::start("");
    let reference = format!("{}/test/multi:v1", registry.host());

    let started = Instant::now();
    let image_ref = pull(&daemon, &reference).await.unwrap();
    println!(
        "pull of the 3-layer test image ({} compressed bytes) took {} ms",
        image.layers.iter().map(|l| l.bytes.len()).sum::<usize>(),
        started.elapsed().as_millis()
    );
    assert_eq!(image_ref, image.id());

    let found = status(&daemon, &reference).await.expect("pulled image has a status");
    assert_eq!(found.id, image.id());
    assert_eq!(found.repo_tags, vec![reference.clone()]);
    let repo_digest = format!("{}/test/multi@{}", registry.host(), image.manifest.digest);
    assert_eq!(found.repo_digests, vec![repo_digest.clone()]);
    assert!(found.size > busybox_size(), "size {} covers the unpacked busybox", found.size);
    assert_eq!(found.uid.map(|u| u.value), None, "no USER in the image");

    // The layers stack: whiteouts and the opaque directory hide the lower entries.
    let rootfs = Rootfs::mount(&daemon, &image);
    assert!(!rootfs.path("etc/removed").exists(), "whiteout honoured");
    assert_eq!(std::fs::read_to_string(rootfs.path("etc/kept")).unwrap(), "kept\n");
    assert!(!rootfs.path("data/old/a").exists(), "opaque directory honoured");
    assert_eq!(std::fs::read_to_string(rootfs.path("data/old/b")).unwrap(), "new\n");
    assert_eq!(std::fs::read_to_string(rootfs.path("etc/motd")).unwrap(), "layer 3\n");
    assert_eq!(std::fs::read_link(rootfs.path("bin/sh")).unwrap(), PathBuf::from("busybox"));
    let out = Command::new(rootfs.path("bin/busybox")).arg("true").status().unwrap();
    assert!(out.success(), "the unpacked busybox runs");
    drop(rootfs);

    // By digest: the same image, found by its repo digest.
    assert_eq!(pull(&daemon, &repo_digest).await.unwrap(), image.id());
    assert_eq!(status(&daemon, &repo_digest).await.unwrap().id, image.id());
    // By id, short (bare hex) and long.
    assert!(status(&daemon, &image.id()).await.is_some());
    assert!(status(&daemon, &image.id()["sha256:".len()..]).await.is_some());

    let mut images = daemon.images().await;
    let verbose = images
        .image_status(cri::ImageStatusRequest { image: spec(&reference), verbose: true })
        .await
        .unwrap()
        .into_inner();
    let info: serde_json::Value = serde_json::from_str(&verbose.info["info"]).unwrap();
    assert_eq!(info["manifestDigest"], image.manifest.digest);
    assert_eq!(info["imageSpec"]["rootfs"]["diff_ids"].as_array().unwrap().len(), 3);
    assert!(daemon.log().contains("layer 3/3 ready"), "progress lines are logged");
}

#[tokio::test]
async fn index_docker_types_and_users() {
    require_root();
    let registry = Registry::start();
    let indexed = small_image("indexed", "", false).with_index();
    indexed.push(&registry.host(), "test/indexed", "v1").await;
    let docker_user = small_image("docker", "1000:1000", true);
    docker_user.push(&registry.host(), "test/docker", "v1").await;
    let named = small_image("named", "nobody", false);
    named.push(&registry.host(), "test/named", "latest").await;
    let daemon = Daemon::start("");

    // An index: the linux/amd64 entry is chosen, the repo digest is the index's.
    let reference = format!("{}/test/indexed:v1", registry.host());
    assert_eq!(pull(&daemon, &reference).await.unwrap(), indexed.id());
    let found = status(&daemon, &reference).await.unwrap();
    assert_eq!(found.repo_digests, vec![format!("{}/test/indexed@{}", registry.host(), indexed.top().digest)]);

    // Docker schema2 media types, numeric user.
    let reference = format!("{}/test/docker:v1", registry.host());
    assert_eq!(pull(&daemon, &reference).await.unwrap(), docker_user.id());
    let found = status(&daemon, &reference).await.unwrap();
    assert_eq!(found.uid.map(|u| u.value), Some(1000));
    assert_eq!(found.username, "");

    // A user name; the default tag is latest.
    let reference = format!("{}/test/named", registry.host());
    assert_eq!(pull(&daemon, &reference).await.unwrap(), named.id());
    let found = status(&daemon, &format!("{reference}:latest")).await.unwrap();
    assert_eq!(found.uid, None);
    assert_eq!(found.username, "nobody");
}

fn busybox_size() -> u64 {
    std::fs::metadata(Path::new("/bin/busybox")).unwrap().len()
}

#[tokio::test]
async fn mirrors_are_tried_before_the_registry() {
    require_root();
    let registry = Registry::start();
    let image = small_image("mirrored", "", false);
    image.push(&registry.host(), "test/mirrored", "v1").await;
    // The upstream name does not resolve; only the mirror has the image.
    let daemon = Daemon::start(&format!(
        "[registries.\"upstream.invalid:5000\"]\nmirrors = [\"{}\"]\n[registries.\"{}\"]\nplain_http = true",
        registry.host(),
        registry.host()
    ));
    let reference = "upstream.invalid:5000/test/mirrored:v1";
    assert_eq!(pull(&daemon, reference).await.unwrap(), image.id());
    let found = status(&daemon, reference).await.unwrap();
    assert_eq!(found.repo_tags, vec![reference.to_string()], "the image keeps its upstream name");
    assert!(registry.blob_gets(&image.layers[0].digest) == 1);
}
