//! Store bookkeeping against a temporary root.

use super::*;

fn digest(n: u8) -> Digest {
    Digest::of(&[n])
}

fn record(config: u8, layers: &[u8], tags: &[&str]) -> ImageRecord {
    ImageRecord {
        id: ImageId::from_config_digest(&digest(config)),
        repo_tags: tags.iter().map(|t| t.to_string()).collect(),
        repo_digests: BTreeSet::new(),
        manifest: digest(config + 100),
        layers: layers.iter().map(|&l| digest(l)).collect(),
        user: String::new(),
        created_at: 0,
    }
}

/// Installs a fake unpacked layer for each of the image's layers not present yet.
fn install_layers(store: &ImageStore, image: &ImageRecord) -> Vec<LayerRecord> {
    let mut records = Vec::new();
    for layer in &image.layers {
        if !store.has_layer(layer) {
            let work = store.scratch_dir().unwrap();
            let dir = work.path().join("fs");
            fs::create_dir(&dir).unwrap();
            fs::write(dir.join("file"), layer.as_str()).unwrap();
            store.install_layer(&dir, layer).unwrap();
        }
        records.push(LayerRecord { diff_id: layer.clone(), disk_bytes: 4096, inodes: 2 });
    }
    records
}

/// Installs fake unpacked layers and commits the image.
fn add(store: &ImageStore, image: &ImageRecord) {
    let records = install_layers(store, image);
    let blobs = [image.id.digest(), image.manifest.clone()].map(|d| {
        let bytes = one_byte_blob(&d);
        (d, bytes)
    });
    store.commit(image.clone(), records, &blobs).unwrap();
}

/// Fixture digests are digests of one byte; find it.
fn one_byte_blob(digest: &Digest) -> Vec<u8> {
    (0..=255u8).map(|n| vec![n]).find(|b| &Digest::of(b) == digest).expect("a fixture digest")
}

fn no_users(_: &ImageId) -> Result<(), ImageError> {
    Ok(())
}

#[test]
fn shared_layers_live_until_the_last_image_goes() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(dir.path()).unwrap();
    let a = record(1, &[10, 11], &["r/a:1"]);
    let b = record(2, &[10, 12], &["r/b:1"]);
    add(&store, &a);
    add(&store, &b);
    assert_eq!(store.list_sized().unwrap().len(), 2);
    assert!(store.usage().unwrap().inodes >= 6);

    let removed = store.remove(&ImageLookup::Tag("r/a:1".into()), no_users).unwrap();
    assert_eq!(removed, Some(a.id.clone()));
    assert!(store.has_layer(&digest(10)), "shared layer kept");
    assert!(!store.has_layer(&digest(11)), "private layer removed");

    // Idempotent: removing again finds nothing and succeeds.
    assert_eq!(store.remove(&ImageLookup::Tag("r/a:1".into()), no_users).unwrap(), None);

    store.remove(&ImageLookup::Id(b.id.clone()), no_users).unwrap();
    assert!(!store.has_layer(&digest(10)));
    assert_eq!(fs::read_dir(store.layers_dir()).unwrap().count(), 0);
    assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
}

#[test]
fn tags_move_to_the_newest_image_and_lookups_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(dir.path()).unwrap();
    let old = record(1, &[10], &["r/app:latest", "r/app:v1"]);
    let mut new = record(2, &[11], &["r/app:latest"]);
    new.repo_digests.insert(format!("r/app@{}", digest(102)));
    add(&store, &old);
    add(&store, &new);
    let old_now = store.find(&ImageLookup::Id(old.id.clone())).unwrap().unwrap();
    assert_eq!(old_now.repo_tags.iter().collect::<Vec<_>>(), vec!["r/app:v1"]);
    let by_tag = store.find(&ImageLookup::Tag("r/app:latest".into())).unwrap().unwrap();
    assert_eq!(by_tag.id, new.id);
    let by_digest = store.find(&ImageLookup::Digest(format!("r/app@{}", digest(102)))).unwrap().unwrap();
    assert_eq!(by_digest.id, new.id);
    assert!(store.find(&ImageLookup::Tag("r/other:1".into())).unwrap().is_none());
}

#[test]
fn removal_vetoed_by_users_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(dir.path()).unwrap();
    let a = record(1, &[10], &["r/a:1"]);
    add(&store, &a);
    let veto = |id: &ImageId| Err(ImageError::InUse { image: id.to_string(), containers: "c1".into() });
    let err = store.remove(&ImageLookup::Tag("r/a:1".into()), veto).unwrap_err();
    assert!(matches!(err, ImageError::InUse { .. }));
    assert!(store.find(&ImageLookup::Id(a.id.clone())).unwrap().is_some());
    assert!(store.has_layer(&digest(10)));
}

#[test]
fn a_second_handle_sees_changes_and_state_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = ImageStore::open(dir.path()).unwrap();
    let importer = ImageStore::open(dir.path()).unwrap();
    assert!(daemon.list_sized().unwrap().is_empty());
    add(&importer, &record(1, &[10], &["r/a:1"]));
    assert_eq!(daemon.list_sized().unwrap().len(), 1, "the daemon sees the import");
    drop(daemon);
    let reopened = ImageStore::open(dir.path()).unwrap();
    assert_eq!(reopened.list_sized().unwrap()[0].0.repo_tags.len(), 1);
}

#[test]
fn commit_fails_when_a_layer_vanished() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(dir.path()).unwrap();
    let image = record(1, &[10], &["r/a:1"]);
    let blobs = [image.id.digest(), image.manifest.clone()].map(|d| {
        let bytes = one_byte_blob(&d);
        (d, bytes)
    });
    let err = store.commit(image, Vec::new(), &blobs).unwrap_err();
    assert!(matches!(err, ImageError::LayerVanished(_)));
    assert!(store.list_sized().unwrap().is_empty());
    assert_eq!(fs::read_dir(dir.path().join("blobs/sha256")).unwrap().count(), 0, "no blob left behind");
}

#[test]
fn garbage_collection_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(dir.path()).unwrap();
    add(&store, &record(1, &[10], &["r/a:1"]));
    add(&store, &record(2, &[11], &["r/b:1"]));
    // Leftovers of a crash: work in progress, a stray layer, a stray blob.
    let work = dir.path().join("tmp/work-crashed");
    fs::create_dir_all(work.join("fs")).unwrap();
    fs::create_dir(store.layer_path(&digest(99))).unwrap();
    fs::write(store.blob_path(&digest(98)), b"x").unwrap();
    // A layer of image 2 disappears: the image is dropped rather than half-listed.
    fs::remove_dir_all(store.layer_path(&digest(11))).unwrap();
    store.collect_garbage().unwrap();
    let images = store.list_sized().unwrap();
    assert_eq!(images.len(), 1);
    assert!(images[0].0.repo_tags.contains("r/a:1"));
    assert!(!work.exists());
    assert!(!store.layer_path(&digest(99)).exists());
    assert!(!store.blob_path(&digest(98)).exists());
    assert!(store.has_layer(&digest(10)));
}

#[test]
fn sizes_come_with_the_records_they_belong_to() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::open(dir.path()).unwrap();
    let (a, b) = (record(1, &[10, 11], &["r/a:1"]), record(2, &[11], &["r/b:1"]));
    add(&store, &a);
    add(&store, &b);
    // Layers as recorded (4096 bytes each) plus the one-byte config blob.
    let (found, size) = store.find_sized(&ImageLookup::Tag("r/a:1".into())).unwrap().unwrap();
    assert_eq!((found.id, size), (a.id.clone(), 2 * 4096 + 1));
    let mut listed: Vec<(ImageId, u64)> = store.list_sized().unwrap().into_iter().map(|(r, s)| (r.id, s)).collect();
    listed.sort();
    let mut expected = vec![(a.id.clone(), 2 * 4096 + 1), (b.id.clone(), 4096 + 1)];
    expected.sort();
    assert_eq!(listed, expected);
    // Once removed, the image is not found at all, never found with a size of nothing.
    store.remove(&ImageLookup::Tag("r/a:1".into()), no_users).unwrap();
    assert!(store.find_sized(&ImageLookup::Id(a.id.clone())).unwrap().is_none());
}

/// A manifest and config that name `layers` (diff ids), as a pull stores them.
fn stored_image(store: &ImageStore, layers: &[u8], user: &str) -> ImageRecord {
    let diff_ids: Vec<Digest> = layers.iter().map(|&l| digest(l)).collect();
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux", "config": { "User": user },
        "rootfs": { "type": "layers", "diff_ids": diff_ids.iter().map(|d| d.as_str()).collect::<Vec<_>>() },
    }))
    .unwrap();
    let layer_descriptors: Vec<_> = diff_ids
        .iter()
        .map(|d| serde_json::json!({ "mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d.as_str(), "size": 1 }))
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": { "mediaType": "application/vnd.oci.image.config.v1+json", "digest": Digest::of(&config).as_str(), "size": config.len() },
        "layers": layer_descriptors,
    }))
    .unwrap();
    let mut image = record(0, layers, &["r/stored:1"]);
    image.id = ImageId::from_config_digest(&Digest::of(&config));
    image.manifest = Digest::of(&manifest);
    image.user = user.into();
    let records = install_layers(store, &image);
    let blobs = [(image.id.digest(), config), (image.manifest.clone(), manifest)];
    store.commit(image.clone(), records, &blobs).unwrap();
    image
}

#[test]
fn an_unreadable_index_is_moved_aside_and_rebuilt_from_the_stored_images() {
    for damage in [&b"{\"version\": 1, \"data\": {\"ima"[..], b"", b"\x00\xff garbage"] {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(dir.path()).unwrap();
        let kept = stored_image(&store, &[30, 31], "1000:1000");
        let broken = stored_image(&store, &[32], "");
        drop(store);
        // One image lost a layer as well: it cannot come back.
        fs::remove_dir_all(dir.path().join("layers").join(digest(32).hex())).unwrap();
        fs::write(dir.path().join("index.json"), damage).unwrap();

        let store = ImageStore::open(dir.path()).unwrap();
        let images = store.list_sized().unwrap();
        assert_eq!(images.len(), 1, "{images:?}");
        let (restored, size) = &images[0];
        assert_eq!(restored.id, kept.id);
        assert_eq!(
            (&restored.manifest, &restored.layers, restored.user.as_str()),
            (&kept.manifest, &kept.layers, "1000:1000")
        );
        assert!(restored.repo_tags.is_empty(), "tags lived only in the lost index");
        assert!(*size > 0);
        assert!(store.find(&ImageLookup::Id(broken.id)).unwrap().is_none());
        let aside: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("index.json.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "the damaged index is kept for a look");

        // Start-up cleanup keeps the restored image's layers; a pull by tag re-tags it.
        store.collect_garbage().unwrap();
        assert!(store.has_layer(&digest(30)) && store.has_layer(&digest(31)));
        let mut again = kept.clone();
        again.repo_tags = ["r/stored:1".to_string()].into();
        store.commit(again, vec![], &[]).unwrap();
        assert!(store.find(&ImageLookup::Tag("r/stored:1".into())).unwrap().is_some());
    }
}
