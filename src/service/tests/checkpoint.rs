//! CheckpointContainer against the fake runtime: the archive's layout, and the refusals that
//! leave nothing behind.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::model::container::ContainerState;
use crate::oci::fake::FAKE_CHECKPOINT_IMAGES;

use super::fixture::{fixture_with, write_spec, Fixture};

/// A running container (unless `state` says otherwise) with a bundle spec and a writable
/// layer, and a stand-in `criu` the configuration names.
fn checkpointable(state: ContainerState) -> (Fixture, tempfile::TempDir) {
    let tools = tempfile::tempdir().unwrap();
    let criu = tools.path().join("criu");
    std::fs::write(&criu, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&criu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = fixture_with(state, "SIGTERM", "SIGKILL", false, |c| c.checkpoint.criu = criu);
    write_spec(&f);
    let upper = f.service.registry.container_state_dir(&f.id).join("upper");
    std::fs::create_dir_all(upper.join("tmp")).unwrap();
    std::fs::write(upper.join("tmp/count"), "41").unwrap();
    (f, tools)
}

/// The archive's files and their contents.
fn entries(archive: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut tar = tar::Archive::new(std::fs::File::open(archive).unwrap());
    let mut out = BTreeMap::new();
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        out.insert(name.trim_end_matches('/').to_string(), bytes);
    }
    out
}

/// The checkpoint and restore working directories left under the state root.
fn left_in_state(f: &Fixture) -> Vec<String> {
    let staging = f.service.config.state_root.join("checkpoints");
    let names = std::fs::read_dir(staging).into_iter().flatten().map(|e| e.unwrap().file_name());
    names.map(|n| n.to_string_lossy().into_owned()).collect()
}

#[tokio::test]
async fn a_checkpoint_archive_holds_the_dump_spec_config_and_writable_layer() {
    let (f, _tools) = checkpointable(ContainerState::Running);
    let out = tempfile::tempdir().unwrap();
    let location = out.path().join("checkpoint.tar");
    f.service.checkpoint_container(&f.id.as_str()[..12], location.to_str().unwrap(), 0).await.unwrap();
    let id = &f.id;
    assert_eq!(
        f.fake.calls(),
        [format!("pause {id}"), format!("checkpoint {id}"), format!("resume {id}")],
        "dumped frozen"
    );
    let files = entries(&location);
    for (image, content) in FAKE_CHECKPOINT_IMAGES {
        assert_eq!(files[&format!("checkpoint/{image}")], content.as_bytes(), "{image}");
    }
    let config: serde_json::Value = serde_json::from_slice(&files["config.dump"]).unwrap();
    assert_eq!(config["id"], f.id.as_str());
    assert_eq!((config["rootfsImageName"].as_str(), config["runtime"].as_str()), (Some("img"), Some("runc")));
    assert!(config["rootfsImageRef"].as_str().unwrap().starts_with("sha256:"));
    let spec: serde_json::Value = serde_json::from_slice(&files["spec.dump"]).unwrap();
    assert_eq!(spec["process"]["args"][0], "sleep", "the bundle's spec");
    assert_eq!(spec["annotations"][crate::checkpoint::layout::CRIO_ANNOTATIONS], "{}");
    let mut diff = tar::Archive::new(&files["rootfs-diff.tar"][..]);
    let names: Vec<String> =
        diff.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
    assert_eq!(names, ["tmp", "tmp/count"]);
    assert_eq!(files["deleted.files"], b"[]");
    assert_eq!(files["dump.log"], b"Dumping finished successfully");
    assert!(!files.contains_key("container.log"), "the container had no log");
    assert!(!files.keys().any(|k| k.starts_with("work")), "CRIU's work directory stays out: {:?}", files.keys());
    assert_eq!(left_in_state(&f), Vec::<String>::new(), "the stage is removed");
    assert_eq!(f.service.registry.find_container(f.id.as_str()).unwrap().status.state, ContainerState::Running);
}

#[tokio::test]
async fn a_dump_criu_refuses_names_the_cause_and_leaves_nothing() {
    let (f, _tools) = checkpointable(ContainerState::Running);
    f.fake.checkpoint_fails.store(true, std::sync::atomic::Ordering::Relaxed);
    let out = tempfile::tempdir().unwrap();
    let location = out.path().join("checkpoint.tar");
    let err = f.service.checkpoint_container(f.id.as_str(), location.to_str().unwrap(), 0).await.unwrap_err();
    assert_eq!(err.kind(), crate::error::ErrorKind::FailedPrecondition, "{err}");
    assert!(err.to_string().contains("Can't dump file 9"), "{err}");
    let id = &f.id;
    assert_eq!(
        f.fake.calls(),
        [format!("pause {id}"), format!("checkpoint {id}"), format!("resume {id}")],
        "thawed all the same"
    );
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "no archive, no temporary file");
    assert_eq!(left_in_state(&f), Vec::<String>::new(), "the stage is removed");
}

#[tokio::test]
async fn refused_checkpoints_change_nothing() {
    let out = tempfile::tempdir().unwrap();
    let location = out.path().join("checkpoint.tar");
    let at = location.to_str().unwrap();
    for state in [ContainerState::Created, ContainerState::Exited, ContainerState::Unknown] {
        let (f, _tools) = checkpointable(state);
        let err = f.service.checkpoint_container(f.id.as_str(), at, 0).await.unwrap_err();
        assert!(matches!(err, Error::FailedPrecondition(ref m) if m.contains("only a running")), "{state:?}: {err}");
        assert!(f.fake.calls().is_empty(), "{state:?}");
    }
    let (f, _tools) = checkpointable(ContainerState::Running);
    let cases: [(String, fn(&Error) -> bool); 4] = [
        ("relative.tar".into(), |e| matches!(e, Error::InvalidArgument(_))),
        (out.path().join("missing/cp.tar").display().to_string(), |e| matches!(e, Error::InvalidArgument(_))),
        (out.path().display().to_string(), |e| matches!(e, Error::InvalidArgument(_))),
        (String::new(), |e| matches!(e, Error::InvalidArgument(_))),
    ];
    for (location, expected) in cases {
        let err = f.service.checkpoint_container(f.id.as_str(), &location, 0).await.unwrap_err();
        assert!(expected(&err), "{location:?}: {err:?}");
    }
    let err = f.service.checkpoint_container("0123456789ab", at, 0).await.unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err:?}");
    assert!(f.fake.calls().is_empty());
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn without_criu_a_checkpoint_is_a_failed_precondition() {
    let criu = PathBuf::from("/nonexistent/criu");
    let f = fixture_with(ContainerState::Running, "SIGTERM", "SIGKILL", false, |c| c.checkpoint.criu = criu);
    let out = tempfile::tempdir().unwrap();
    let at = out.path().join("cp.tar");
    let err = f.service.checkpoint_container(f.id.as_str(), at.to_str().unwrap(), 0).await.unwrap_err();
    assert!(matches!(err, Error::FailedPrecondition(ref m) if m.contains("not installed")), "{err:?}");
    assert!(f.fake.calls().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn recovery_removes_what_an_unfinished_checkpoint_or_restore_left() {
    let (f, _tools) = checkpointable(ContainerState::Running);
    let state_dir = f.service.registry.container_state_dir(&f.id);
    let (dump, staging) = (
        f.service.config.state_root.join("checkpoints/dump-abc"),
        f.service.config.state_root.join("checkpoints/restore-xyz"),
    );
    for dir in [dump.join("work"), state_dir.join("checkpoint/checkpoint"), staging.clone()] {
        std::fs::create_dir_all(dir).unwrap();
    }
    f.service.recover().unwrap();
    assert!(!staging.exists(), "an archive being unpacked for a create that never finished");
    assert!(!dump.exists(), "a dump being gathered");
    assert!(state_dir.join("checkpoint/checkpoint").is_dir(), "a restored container's images stay");
    assert!(state_dir.join("upper/tmp/count").is_file());
}
