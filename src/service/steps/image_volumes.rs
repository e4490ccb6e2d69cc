//! Image volumes (`Mount.image`, the ImageVolume feature): an image from the store mounted
//! read-only into a container. Several layers are stacked with overlayfs (lower layers
//! only, so read-only); a single layer is bind-mounted as it is, since overlayfs needs two
//! lower layers when it has no upper one. `image_sub_path` picks a directory inside.

use std::path::{Component, Path, PathBuf};

use crate::cri;

use crate::error::Error;
use crate::model::image::ImageRecord;

use crate::service::owners::host;
use crate::service::pod_service::PodService;
use crate::service::steps::layers;
use crate::service::steps::layers::MappedLayers;

/// Where a container's image volumes are mounted, under its run directory.
const DIR: &str = "image-volumes";

/// An image mount of the request, with the image it names.
pub(in crate::service) struct ImageVolume {
    /// Index in `ContainerConfig.mounts`.
    pub index: usize,
    pub image: ImageRecord,
}

impl PodService {
    /// Checks the request's image mounts and finds their images: an image mount has no host
    /// path and is read-only, and its image is in the store.
    pub(in crate::service) async fn find_image_volumes(
        &self,
        config: &cri::ContainerConfig,
    ) -> Result<Vec<ImageVolume>, Error> {
        let mut found = Vec::new();
        for (index, m) in config.mounts.iter().enumerate() {
            let Some(spec) = m.image.as_ref().filter(|i| !i.image.is_empty()) else { continue };
            let at = &m.container_path;
            if !m.host_path.is_empty() {
                return Err(Error::InvalidArgument(format!("mount {at:?} names both a host path and an image")));
            }
            if !m.readonly {
                return Err(Error::InvalidArgument(format!("image volume {at:?} must be read-only")));
            }
            found.push(ImageVolume { index, image: self.find_image(&spec.image).await? });
        }
        Ok(found)
    }

    /// Mounts each image volume under `run_dir` and returns the config the OCI spec is built
    /// from, whose image mounts are read-only binds of those mounts.
    pub(in crate::service) fn mount_image_volumes(
        &self,
        config: &cri::ContainerConfig,
        volumes: &[ImageVolume],
        run_dir: &Path,
        userns: Option<&MappedLayers>,
    ) -> Result<cri::ContainerConfig, Error> {
        let mut for_spec = config.clone();
        for v in volumes {
            let target = run_dir.join(DIR).join(v.index.to_string());
            let root = self.mount_image(&v.image, &target, userns, v.index)?;
            let m = &mut for_spec.mounts[v.index];
            let source = sub_path(&root, &m.image_sub_path)
                .map_err(|why| Error::InvalidArgument(format!("image volume {:?}: {why}", m.container_path)))?;
            m.host_path = source.display().to_string();
            m.image = None;
            m.image_sub_path.clear();
            // The layers are already mapped; overlayfs itself cannot be.
            m.uid_mappings.clear();
            m.gid_mappings.clear();
        }
        Ok(for_spec)
    }

    fn mount_image(
        &self,
        image: &ImageRecord,
        target: &Path,
        userns: Option<&MappedLayers>,
        index: usize,
    ) -> Result<PathBuf, Error> {
        let io = |e| Error::io(format!("image volume of {}", image.id))(e);
        if image.layers.is_empty() {
            // Mounted as the volume itself: its mode is what the container sees.
            std::fs::create_dir_all(target).map_err(io)?;
            return Ok(target.to_path_buf());
        }
        let lower = self.lower_dirs(image, userns, &format!("volume{index}"))?;
        match lower.as_slice() {
            [only] => Ok(only.clone()),
            layers => {
                crate::store::private::create_dir_all(target).map_err(io)?;
                let lower: Vec<String> = layers.iter().map(|l| l.display().to_string()).collect();
                self.host.mount_overlay(target, &format!("lowerdir={}", lower.join(":")), true).map_err(io)?;
                Ok(target.to_path_buf())
            }
        }
    }
}

/// The fully qualified image references recorded for the container: each image mount's
/// `image_ref` is its image's id (ContainerStatus reports it).
pub(in crate::service) fn record_image_refs(config: &mut cri::ContainerConfig, volumes: &[ImageVolume]) {
    for v in volumes {
        if let Some(spec) = config.mounts[v.index].image.as_mut() {
            spec.image_ref = v.image.id.to_string();
        }
    }
}

/// `sub` inside `root`: relative, without `..`, existing, and resolved as the container
/// would see the image (its links, absolute ones included, stay inside it).
fn sub_path(root: &Path, sub: &str) -> Result<PathBuf, String> {
    if sub.is_empty() {
        return Ok(root.to_path_buf());
    }
    let relative = Path::new(sub);
    if !relative.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
        return Err(format!("sub path {sub:?} must be relative and stay inside the image"));
    }
    match crate::store::confined::resolve_in_root(root, sub) {
        Ok(Some(resolved)) => Ok(resolved),
        Ok(None) => Err(format!("sub path {sub:?} does not exist in the image")),
        Err(e) => Err(format!("sub path {sub:?}: {e}")),
    }
}

/// Unmounts a container's image volumes, root filesystem and id-mapped layers (removal,
/// recovery).
pub(in crate::service) fn unmount_container(host: &dyn host::Host, run_dir: &Path) -> std::io::Result<()> {
    if let Ok(entries) = std::fs::read_dir(run_dir.join(DIR)) {
        for entry in entries.flatten() {
            host.unmount(&entry.path())?;
        }
    }
    host.unmount(&run_dir.join("rootfs"))?;
    layers::unmount_mapped(host, run_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("image");
        std::fs::create_dir_all(root.join("etc/conf")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("hostlink")).unwrap();
        std::os::unix::fs::symlink("etc/conf", root.join("inner")).unwrap();
        let base = root.canonicalize().unwrap();
        assert_eq!(sub_path(&root, "").unwrap(), root);
        assert_eq!(sub_path(&root, "etc/conf").unwrap(), base.join("etc/conf"));
        assert_eq!(sub_path(&root, "inner").unwrap(), base.join("etc/conf"), "a link inside the image is followed");
        assert_eq!(sub_path(&root, "hostlink").unwrap(), base.join("etc"), "an absolute link stays in the image");
        std::os::unix::fs::symlink("../../..", root.join("etc/up")).unwrap();
        assert_eq!(sub_path(&root, "etc/up").unwrap(), base, "a link climbing out stops at the image's root");
        for (sub, why) in [
            ("missing", "does not exist"),
            ("../outside", "stay inside"),
            ("etc/../../x", "stay inside"),
            ("/etc", "stay inside"),
            ("hostlink/passwd", "does not exist"),
        ] {
            let err = sub_path(&root, sub).unwrap_err();
            assert!(err.contains(why), "{sub}: {err}");
        }
    }
}
