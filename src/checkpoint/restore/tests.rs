use std::io::Write;

use super::*;

/// A stage as a checkpoint writes it, minus what `change` takes away or adds.
fn archive_with(change: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let stage = dir.path().join("stage");
    std::fs::create_dir_all(stage.join("checkpoint")).unwrap();
    std::fs::write(stage.join("checkpoint/inventory.img"), "inventory").unwrap();
    let config = ConfigDump { id: "old".into(), rootfs_image_name: "busybox:1.36".into(), ..Default::default() };
    std::fs::write(stage.join("config.dump"), serde_json::to_vec(&config).unwrap()).unwrap();
    let spec = r#"{"ociVersion":"1.2.0","process":{"args":["sh","-c","count"],"cwd":"/work","user":{"uid":0,"gid":0}},
        "mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/data","type":"bind","source":"/srv"}]}"#;
    std::fs::write(stage.join("spec.dump"), spec).unwrap();
    change(&stage);
    let archive = dir.path().join("cp.tar");
    crate::checkpoint::archive::write_archive(&stage, &archive).unwrap();
    (dir, archive)
}

fn extracted(archive: &Path) -> (tempfile::TempDir, Result<Checkpoint, RestoreError>) {
    let into = tempfile::tempdir().unwrap();
    let got = extract(archive, into.path());
    (into, got)
}

#[test]
fn an_archive_unpacks_with_its_dumps_read() {
    let (_dir, archive) = archive_with(|_| {});
    assert!(names_archive(archive.to_str().unwrap()));
    assert!(!names_archive("docker.io/library/busybox:latest"));
    assert!(!names_archive("/nonexistent/cp.tar"));
    let (_into, got) = extracted(&archive);
    let checkpoint = got.unwrap();
    assert_eq!(checkpoint.base_image(), Some("busybox:1.36"));
    assert_eq!(checkpoint.config.id, "old");
    assert!(checkpoint.images().join("inventory.img").is_file());
    assert!(!had_terminal(&checkpoint));
}

#[test]
fn archives_missing_a_part_or_holding_anything_else_are_invalid() {
    type Change = fn(&Path);
    let cases: [(&str, Change); 4] = [
        ("no spec.dump", |s| std::fs::remove_file(s.join("spec.dump")).unwrap()),
        ("no config.dump", |s| std::fs::remove_file(s.join("config.dump")).unwrap()),
        ("no CRIU images", |s| std::fs::remove_file(s.join("checkpoint/inventory.img")).unwrap()),
        ("a symbolic link", |s| std::os::unix::fs::symlink("/etc/shadow", s.join("checkpoint/pages-1.img")).unwrap()),
    ];
    for (what, change) in cases {
        let (_dir, archive) = archive_with(change);
        let (_into, got) = extracted(&archive);
        let err = got.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{what}: {err}");
    }
    // A name that climbs out, written by hand (tar's builder refuses to).
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("evil.tar");
    let mut header = tar::Header::new_gnu();
    header.as_gnu_mut().unwrap().name[..8].copy_from_slice(b"../evil\0");
    header.set_size(1);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    let mut builder = tar::Builder::new(std::fs::File::create(&archive).unwrap());
    builder.append(&header, &b"x"[..]).unwrap();
    builder.into_inner().unwrap().flush().unwrap();
    let (into, got) = extracted(&archive);
    assert_eq!(got.unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert!(!into.path().parent().unwrap().join("evil").exists());
    std::fs::write(dir.path().join("junk.tar"), "not a tar").unwrap();
    let (_into, junk) = extracted(&dir.path().join("junk.tar"));
    assert_eq!(junk.unwrap_err().kind(), ErrorKind::InvalidArgument);
    let (_into, missing) = extracted(&dir.path().join("none.tar"));
    assert_eq!(missing.unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn the_restore_request_takes_the_checkpoints_command_only_where_the_request_has_none() {
    let (_dir, archive) = archive_with(|_| {});
    let (_into, got) = extracted(&archive);
    let checkpoint = got.unwrap();
    let bare = cri::ContainerConfig {
        image: Some(cri::ImageSpec { image: archive.display().to_string(), ..Default::default() }),
        ..Default::default()
    };
    let restored = restore_request(&bare, &checkpoint, "busybox:1.36");
    assert_eq!(restored.image.unwrap().image, "busybox:1.36");
    assert_eq!(
        (restored.command, restored.working_dir.as_str()),
        (vec!["sh".into(), "-c".into(), "count".into()], "/work")
    );
    let own = cri::ContainerConfig { command: vec!["top".into()], working_dir: "/".into(), ..bare };
    let restored = restore_request(&own, &checkpoint, "busybox:1.36");
    assert_eq!((restored.command, restored.working_dir.as_str()), (vec!["top".into()], "/"));
}

#[test]
fn mounts_the_checkpoint_had_must_all_be_there_again() {
    let (_dir, archive) = archive_with(|_| {});
    let (_into, got) = extracted(&archive);
    let dumped = got.unwrap().spec;
    let spec = |mounts: &str| -> Spec {
        serde_json::from_str(&format!(r#"{{"ociVersion":"1.2.0","mounts":{mounts}}}"#)).unwrap()
    };
    let cases = [
        (r#"[{"destination":"/proc"},{"destination":"/data","source":"/elsewhere"}]"#, vec![]),
        (r#"[{"destination":"/proc"}]"#, vec!["/data"]),
        (r#"[]"#, vec!["/proc", "/data"]),
    ];
    for (mounts, missing) in cases {
        assert_eq!(missing_mounts(&dumped, &spec(mounts)), missing, "{mounts}");
    }
}

/// A root filesystem with an absolute link that leads out of it, and a file outside.
fn rootfs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (root, outside) = (dir.path().join("rootfs"), dir.path().join("outside"));
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::create_dir_all(root.join("var")).unwrap();
    std::fs::write(root.join("etc/gone"), "").unwrap();
    std::fs::write(root.join("var/old"), "").unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim"), "keep").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
    (dir, root, outside)
}

/// An unpacked checkpoint whose diff is `diff` (gzip'd when asked) and deletions `deleted`.
fn changes(diff: &[(&str, &str)], deleted: &[&str], gzip: bool) -> (tempfile::TempDir, Checkpoint) {
    let dir = tempfile::tempdir().unwrap();
    let mut tar = tar::Builder::new(Vec::new());
    for (name, content) in diff {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o640);
        (header.set_uid(0), header.set_gid(0), header.set_mtime(0));
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, name, content.as_bytes()).unwrap();
    }
    let mut bytes = tar.into_inner().unwrap();
    if gzip {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        bytes = gz.finish().unwrap();
    }
    std::fs::write(dir.path().join(layout::ROOTFS_DIFF), bytes).unwrap();
    std::fs::write(dir.path().join(layout::DELETED_FILES), serde_json::to_vec(deleted).unwrap()).unwrap();
    let spec = serde_json::from_str(r#"{"ociVersion":"1.2.0"}"#).unwrap();
    let checkpoint = Checkpoint { dir: dir.path().to_path_buf(), config: ConfigDump::default(), spec };
    (dir, checkpoint)
}

#[test]
fn changes_land_inside_the_root_whatever_its_links_say() {
    for gzip in [false, true] {
        let (_dir, root, outside) = rootfs();
        let diff = [("etc/new", "new"), ("var/old", "changed")];
        let (_cp, checkpoint) = changes(&diff, &["/etc/gone", "/escape/victim", "/not/there"], gzip);
        apply_rootfs_changes(&checkpoint, &root).unwrap();
        assert!(!root.join("etc/gone").exists(), "gzip {gzip}");
        assert_eq!(std::fs::read_to_string(root.join("etc/new")).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(root.join("var/old")).unwrap(), "changed");
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "keep",
            "nothing outside the root changes"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(root.join("etc/new")).unwrap().permissions().mode() & 0o777, 0o640);
    }
}

#[test]
fn entries_without_a_directory_or_of_a_refused_kind_fail_the_restore() {
    let (_dir, root, outside) = rootfs();
    let (_cp, checkpoint) = changes(&[("no/such/dir/file", "x")], &[], false);
    let err = apply_rootfs_changes(&checkpoint, &root).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    // Through the root's absolute link: the link leads to a path the root does not have.
    let (_cp, checkpoint) = changes(&[("escape/victim", "replaced")], &[], false);
    assert_eq!(apply_rootfs_changes(&checkpoint, &root).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(std::fs::read_to_string(outside.join("victim")).unwrap(), "keep");
    let (_cp, checkpoint) = changes(&[], &["/../etc"], false);
    assert_eq!(apply_rootfs_changes(&checkpoint, &root).unwrap_err().kind(), ErrorKind::InvalidArgument);
    let dir = tempfile::tempdir().unwrap();
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Char);
    header.set_size(0);
    tar.append_data(&mut header, "etc/disk", &[][..]).unwrap();
    std::fs::write(dir.path().join(layout::ROOTFS_DIFF), tar.into_inner().unwrap()).unwrap();
    let spec = serde_json::from_str(r#"{"ociVersion":"1.2.0"}"#).unwrap();
    let checkpoint = Checkpoint { dir: dir.path().to_path_buf(), config: ConfigDump::default(), spec };
    assert_eq!(apply_rootfs_changes(&checkpoint, &root).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert!(!root.join("etc/disk").exists());
}
