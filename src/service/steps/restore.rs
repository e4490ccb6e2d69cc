//! CreateContainer from a checkpoint archive (or an OCI image built from one): unpacked and
//! checked before anything is made, then the checkpointed container's root filesystem changes
//! applied to the new container's, and CRIU's images kept with its state for the start that
//! restores them.

use std::path::{Path, PathBuf};

use crate::checkpoint::restore::{self, Checkpoint};
use crate::checkpoint::{criu, layout};
use crate::cri;
use crate::error::Error;
use crate::model::handler::Engine;
use crate::model::ids::ContainerId;
use crate::model::image::ImageRecord;
use crate::service::owners::objects::Sandbox;
use crate::service::pod_service::PodService;
use crate::service::steps::bundle::Bundle;
use crate::service::steps::criu::{find_criu, stage};

/// Where a restored container keeps the unpacked checkpoint, in its state directory.
const KEPT: &str = "checkpoint";

/// What a container's image names.
pub(in crate::service) enum Source {
    Image(ImageRecord),
    Checkpoint(Box<Restoring>),
}

/// A checkpoint being restored into a new container.
pub(in crate::service) struct Restoring {
    stage: tempfile::TempDir,
    checkpoint: Checkpoint,
    /// The image the checkpointed container ran, which the new one runs on.
    pub image: String,
}

impl Restoring {
    /// The request that recreates the checkpointed container from the new one.
    pub fn request(&self, request: &cri::ContainerConfig) -> cri::ContainerConfig {
        restore::restore_request(request, &self.checkpoint, &self.image)
    }
}

impl PodService {
    /// Whether an image was built from a checkpoint archive: its manifest says so.
    fn is_checkpoint_image(&self, image: &ImageRecord) -> bool {
        let Ok(bytes) = self.images.read_blob(&image.manifest) else { return false };
        let manifest: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        manifest["annotations"].get(layout::CHECKPOINT_IMAGE_ANNOTATION).is_some()
    }

    /// What a container's image names: an image on the node, or a checkpoint (an archive's
    /// path, or an OCI image built from one), unpacked and checked.
    pub(in crate::service) async fn open_image(&self, image: &str, sandbox: &Sandbox) -> Result<Source, Error> {
        let layers = if crate::blocking::run(|| restore::names_archive(image)) {
            None
        } else {
            let record = self.find_image(image).await?;
            if !crate::blocking::run(|| self.is_checkpoint_image(&record)) {
                return Ok(Source::Image(record));
            }
            Some(record.layers.iter().map(|l| self.images.layer_path(l)).collect::<Vec<_>>())
        };
        find_criu(&self.config.checkpoint.criu)?;
        if self.ns_request(&sandbox.meta.id, &sandbox.meta.config).user.is_some() {
            return Err(Error::FailedPrecondition(format!(
                "restoring {image}: a pod with its own user namespace cannot take a restored container"
            )));
        }
        let (stage, checkpoint) = crate::blocking::run(|| {
            let stage = stage(&self.config.state_root, "restore-")?;
            let checkpoint = match &layers {
                None => restore::extract(std::path::Path::new(image), stage.path())?,
                Some(layers) => restore::copy_layers(layers, stage.path(), image)?,
            };
            Ok::<_, Error>((stage, checkpoint))
        })?;
        if restore::had_terminal(&checkpoint) {
            return Err(Error::InvalidArgument(format!(
                "restoring {image}: its container had a terminal, which a restore cannot hand over"
            )));
        }
        let base = checkpoint.base_image().map(str::to_string);
        let image = base.ok_or_else(|| Error::InvalidArgument(format!("{image}: config.dump names no image")))?;
        Ok(Source::Checkpoint(Box::new(Restoring { stage, checkpoint, image })))
    }

    /// Once the bundle is ready: every mount the checkpoint had is there again, the root
    /// filesystem gets the checkpointed container's changes, and the checkpoint moves into
    /// the container's state directory (its rollback removes it). Returns CRIU's images.
    pub(in crate::service) fn apply_checkpoint(
        &self,
        restoring: Restoring,
        id: &ContainerId,
        sandbox: &Sandbox,
        bundle: &mut Bundle,
    ) -> Result<PathBuf, Error> {
        crate::blocking::check("applying a checkpoint");
        let missing = restore::missing_mounts(&restoring.checkpoint.spec, &bundle.spec);
        if !missing.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "the checkpoint needs these mounts, which the request lacks: {}",
                missing.join(", ")
            )));
        }
        restore::apply_rootfs_changes(&restoring.checkpoint, &bundle.run_dir.join("rootfs"))?;
        let kept = self.registry.container_state_dir(id).join(KEPT);
        // Moved: the stage's own removal then finds nothing.
        std::fs::rename(restoring.stage.path(), &kept)
            .map_err(Error::io(format!("keeping the checkpoint in {}", kept.display())))?;
        self.restore_into_new_cgroup(sandbox, bundle, &kept)?;
        Ok(kept.join(layout::CHECKPOINT_DIR))
    }

    /// Has the runtime's CRIU leave the restored processes in the new container's cgroup
    /// (see `criu::restore_config`), through a configuration file beside the images.
    fn restore_into_new_cgroup(&self, sandbox: &Sandbox, bundle: &mut Bundle, kept: &Path) -> Result<(), Error> {
        let handler = self.runtimes.get(&sandbox.meta.runtime_handler)?;
        // The runtime's own default file, which the annotation replaces (runc documents one).
        let node = match handler.spec.engine {
            Engine::Runc => std::fs::read_to_string("/etc/criu/runc.conf").ok(),
            Engine::Crun => None,
        };
        let path = kept.join("criu-restore.conf");
        crate::store::private::write_file(&path, criu::restore_config(node.as_deref()).as_bytes())
            .map_err(Error::io(path.display()))?;
        let mut annotations = bundle.spec.annotations().clone().unwrap_or_default();
        annotations.insert(criu::CONFIG_ANNOTATION.to_string(), path.display().to_string());
        bundle.spec.set_annotations(Some(annotations));
        Ok(())
    }
}
