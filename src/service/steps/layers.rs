//! An image's layers as overlayfs lower directories. In a pod with its own user namespace
//! each layer is first bind-mounted id-mapped through that namespace (under the container's
//! run directory), so files owned by host root are the container root's.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::model::image::ImageRecord;
use crate::model::userns::PodUserns;

use crate::service::owners::host;
use crate::service::owners::objects::Sandbox;
use crate::service::pod_service::PodService;

/// Where a container's id-mapped layers are mounted, under its run directory.
const DIR: &str = "idmap";

/// The pod's user namespace, opened, and where to mount layers mapped through it.
pub(in crate::service) struct MappedLayers {
    userns: File,
    pub map: PodUserns,
    dir: PathBuf,
}

impl PodService {
    /// The layer mapping of a container of `sandbox` (None: the pod uses the host's ids).
    pub(in crate::service) fn mapped_layers(
        &self,
        sandbox: &Sandbox,
        run_dir: &Path,
    ) -> Result<Option<MappedLayers>, Error> {
        let request = self.ns_request(&sandbox.meta.id, &sandbox.meta.config);
        let Some(user) = request.user else { return Ok(None) };
        let userns = File::open(&user.path)
            .map_err(|e| Error::FailedPrecondition(format!("the pod's user namespace {}: {e}", user.path.display())))?;
        Ok(Some(MappedLayers { userns, map: user.map, dir: run_dir.join(DIR) }))
    }

    /// The image's layer directories, top first; mapped ones are named `<use>-<n>`.
    pub(in crate::service) fn lower_dirs(
        &self,
        image: &ImageRecord,
        mapped: Option<&MappedLayers>,
        usage: &str,
    ) -> Result<Vec<PathBuf>, Error> {
        let layers = image.layers.iter().rev().map(|l| self.images.layer_path(l));
        let Some(mapped) = mapped else { return Ok(layers.collect()) };
        layers
            .enumerate()
            .map(|(n, layer)| {
                let target = mapped.dir.join(format!("{usage}-{n}"));
                crate::store::private::create_dir_all(&target)
                    .and_then(|()| self.host.bind_mapped(&layer, &target, &mapped.userns, true))
                    .map_err(Error::io(format!("id-mapping layer {}", layer.display())))?;
                Ok(target)
            })
            .collect()
    }
}

/// Unmounts a container's id-mapped layers.
pub(in crate::service) fn unmount_mapped(host: &dyn host::Host, run_dir: &Path) -> std::io::Result<()> {
    if let Ok(entries) = std::fs::read_dir(run_dir.join(DIR)) {
        for entry in entries.flatten() {
            host.unmount(&entry.path())?;
        }
    }
    Ok(())
}
