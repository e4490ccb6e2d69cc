//! CheckpointContainer: CRIU dumps a running container through its runtime (which leaves it
//! running), and the archive at the requested location gets the dump, the container's spec,
//! its writable layer's changes and its log, in the layout CRI-O and containerd write.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::checkpoint::layout::{self, ConfigDump};
use crate::error::Error;
use crate::model::container::ContainerState;
use crate::oci::CheckpointPaths;
use crate::service::owners::objects::{now_nanos, Container};
use crate::service::pod_service::PodService;
use crate::service::steps::criu::{find_criu, stage};

/// The longest timeout a request may ask for.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

impl PodService {
    pub async fn checkpoint_container(&self, id: &str, location: &str, timeout_seconds: i64) -> Result<(), Error> {
        let location = archive_location(location)?;
        let criu = find_criu(&self.config.checkpoint.criu)?;
        let container = self.registry.find_container(id)?;
        let _guard = self.registry.lock(container.meta.id.as_str()).await;
        let container = self.registry.find_container(container.meta.id.as_str())?;
        if container.status.state != ContainerState::Running {
            return Err(Error::FailedPrecondition(format!(
                "container {} is {:?}: only a running container can be checkpointed",
                container.meta.id, container.status.state
            )));
        }
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str())?;
        let handler = self.runtimes.get(&sandbox.meta.runtime_handler)?;
        let stage = crate::blocking::run(|| stage(&self.config.state_root, "dump-"))?;
        let timeout = match timeout_seconds {
            s if s > 0 => Duration::from_secs(s as u64).min(MAX_TIMEOUT),
            _ => Duration::from_secs(self.config.checkpoint.timeout_seconds),
        };
        let frozen = Frozen {
            runtime: handler.runtime.clone(),
            id: container.meta.id.to_string(),
            archive: stage.path().join("archive"),
            work: stage.path().join("work"),
            criu,
            upper: self.registry.container_state_dir(&container.meta.id).join("upper"),
        };
        let mut dump = tokio::spawn(frozen.dump());
        match tokio::time::timeout(timeout, &mut dump).await {
            Ok(dumped) => dumped.map_err(|e| Error::Internal(format!("the checkpoint task: {e}")))??,
            Err(_) => {
                // CRIU is left to finish (and thaw the container); its files go when it ends.
                tokio::spawn(async move {
                    let _ = dump.await;
                    crate::blocking::spawn(move || drop(stage));
                });
                return Err(Error::DeadlineExceeded(format!(
                    "checkpoint of container {} did not finish within {timeout:?}",
                    container.meta.id
                )));
            }
        }
        let size = crate::blocking::spawn({
            let (runtime, target) = (handler.spec.name.clone(), location.clone());
            let run_dir = self.registry.container_run_dir(&container.meta.id);
            let container = container.clone();
            move || assemble(&container, &runtime, &run_dir, stage, &target)
        })
        .await
        .map_err(|e| Error::Internal(format!("the checkpoint archive task: {e}")))??;
        tracing::info!(container = %container.meta.id, location = %location.display(), bytes = size, "container checkpointed");
        Ok(())
    }
}

/// What the frozen part of a checkpoint takes.
struct Frozen {
    runtime: std::sync::Arc<dyn crate::oci::OciRuntime>,
    id: String,
    /// The archive's files are gathered here.
    archive: PathBuf,
    /// CRIU's work files.
    work: PathBuf,
    criu: PathBuf,
    /// The container's writable layer.
    upper: PathBuf,
}

/// How many times a thaw is tried before the container is reported frozen.
const THAW_TRIES: u32 = 3;

impl Frozen {
    /// With the container frozen: CRIU's dump, then its writable layer, so the two agree
    /// (CRIU checks the size of every file the processes hold open when it restores). Thawed
    /// whatever the outcome.
    async fn dump(self) -> Result<(), Error> {
        self.runtime.pause(&self.id).await?;
        let dumped = async {
            let images = self.archive.join(layout::CHECKPOINT_DIR);
            let paths = CheckpointPaths { image_dir: &images, work_dir: &self.work, criu: &self.criu };
            self.runtime.checkpoint(&self.id, &paths).await?;
            let (upper, archive) = (self.upper.clone(), self.archive.clone());
            crate::blocking::spawn(move || write_layer_changes(&upper, &archive)).await?
        }
        .await;
        let mut thawed = self.runtime.resume(&self.id).await;
        for _ in 1..THAW_TRIES {
            if thawed.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            thawed = self.runtime.resume(&self.id).await;
        }
        if let Err(e) = &thawed {
            tracing::error!(container = %self.id, error = %e, "the container stays frozen after its checkpoint");
        }
        dumped?;
        Ok(thawed?)
    }
}

/// rootfs-diff.tar and deleted.files from the container's writable layer.
fn write_layer_changes(upper: &Path, archive: &Path) -> Result<(), Error> {
    let diff =
        std::fs::File::create(archive.join(layout::ROOTFS_DIFF)).map_err(Error::io("creating rootfs-diff.tar"))?;
    let deleted = crate::checkpoint::rootfs_diff::write_rootfs_diff(upper, std::io::BufWriter::new(diff))
        .map_err(Error::io("writing the writable layer's changes"))?;
    let json = serde_json::to_vec(&deleted).map_err(|e| Error::Internal(e.to_string()))?;
    crate::store::private::write_file(&archive.join(layout::DELETED_FILES), &json)
        .map_err(Error::io("writing deleted.files"))
}

/// Adds what a restore needs beside CRIU's images and writes the archive; the stage goes
/// with it, whatever the outcome.
fn assemble(
    container: &Container,
    runtime: &str,
    run_dir: &Path,
    stage: tempfile::TempDir,
    location: &Path,
) -> Result<u64, Error> {
    let archive = stage.path().join("archive");
    let write = |name: &str, bytes: &[u8]| {
        crate::store::private::write_file(&archive.join(name), bytes).map_err(Error::io(format!("writing {name}")))
    };
    let meta = &container.meta;
    let name = meta.config.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default();
    let config = ConfigDump {
        id: meta.id.to_string(),
        name,
        rootfs_image: meta.image_ref.clone(),
        rootfs_image_ref: meta.image_id.to_string(),
        rootfs_image_name: meta.image_ref.clone(),
        oci_runtime: runtime.to_string(),
        created_time: layout::go_time(meta.created_at),
        checkpointed_time: layout::go_time(now_nanos()),
        restored_time: layout::go_time(0),
        restored: false,
    };
    write(layout::CONFIG_DUMP, &serde_json::to_vec_pretty(&config).map_err(|e| Error::Internal(e.to_string()))?)?;
    let spec_path = run_dir.join("bundle").join("config.json");
    let spec = std::fs::read(&spec_path).map_err(Error::io(spec_path.display()))?;
    let spec = layout::spec_dump(&spec, &meta.config.annotations, &meta.config.labels)
        .map_err(|e| Error::Internal(format!("{}: {e}", spec_path.display())))?;
    write(layout::SPEC_DUMP, &spec)?;
    if !meta.log_path.is_empty() {
        copy_if_there(Path::new(&meta.log_path), &archive.join(layout::CONTAINER_LOG))?;
    }
    copy_if_there(&stage.path().join("work").join(layout::DUMP_LOG), &archive.join(layout::DUMP_LOG))?;
    crate::checkpoint::archive::write_archive(&archive, location)
        .map_err(Error::io(format!("writing the checkpoint archive {}", location.display())))
}

/// Copies a file the container may not have (a log it never wrote).
fn copy_if_there(from: &Path, to: &Path) -> Result<(), Error> {
    match std::fs::copy(from, to) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other.map(drop).map_err(Error::io(format!("copying {}", from.display()))),
    }
}

/// The request's location: an absolute path, no `..`, in a directory that exists, not a
/// directory itself.
fn archive_location(location: &str) -> Result<PathBuf, Error> {
    let invalid = |why: &str| Error::InvalidArgument(format!("checkpoint location {location:?}: {why}"));
    let path = Path::new(location);
    if location.is_empty() || !path.is_absolute() {
        return Err(invalid("an absolute path is required"));
    }
    if path.components().any(|c| c == Component::ParentDir) || path.file_name().is_none() {
        return Err(invalid("it must name a file, with no `..`"));
    }
    crate::blocking::run(|| {
        let parent = path.parent().unwrap_or(Path::new("/"));
        if !parent.is_dir() {
            return Err(invalid("its directory does not exist"));
        }
        if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            return Err(invalid("it is a directory"));
        }
        Ok(path.to_path_buf())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_absolute_files_in_existing_directories() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let cases = [
            (format!("{d}/cp.tar"), true),
            (format!("{d}/sub"), false),
            (format!("{d}/missing/cp.tar"), false),
            (format!("{d}/sub/../cp.tar"), false),
            ("cp.tar".to_string(), false),
            (String::new(), false),
            ("/".to_string(), false),
        ];
        for (location, ok) in cases {
            let got = archive_location(&location);
            assert_eq!(got.is_ok(), ok, "{location:?}: {got:?}");
            if let Err(e) = got {
                assert!(matches!(e, Error::InvalidArgument(_)), "{location:?}: {e:?}");
            }
        }
    }
}
