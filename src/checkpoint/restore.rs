//! A checkpoint archive read back for a restore: unpacked and checked, the request that
//! recreates its container, and its root filesystem changes applied to the new container's.

use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use oci_spec::runtime::Spec;

use super::layout::{self, ConfigDump};
use crate::cri;
use crate::model::error_kind::{Classify, ErrorKind};

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("checkpoint archive {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("checkpoint archive {}: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
}

impl Classify for RestoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            RestoreError::Read { source, .. } if source.kind() == io::ErrorKind::NotFound => ErrorKind::NotFound,
            RestoreError::Read { .. } => ErrorKind::Internal,
            RestoreError::Invalid { .. } => ErrorKind::InvalidArgument,
        }
    }
}

/// Whether a container's image names a checkpoint archive on this node (an absolute path to
/// a file: no image reference starts with `/`).
pub fn names_archive(image: &str) -> bool {
    crate::blocking::check("looking for a checkpoint archive");
    image.starts_with('/') && Path::new(image).is_file()
}

/// An unpacked checkpoint: where, and what its container was.
#[derive(Debug)]
pub struct Checkpoint {
    pub dir: PathBuf,
    pub config: ConfigDump,
    pub spec: Spec,
}

impl Checkpoint {
    /// CRIU's images.
    pub fn images(&self) -> PathBuf {
        self.dir.join(layout::CHECKPOINT_DIR)
    }

    /// The image the checkpointed container ran, by name if the archive gives one.
    pub fn base_image(&self) -> Option<&str> {
        let c = &self.config;
        [&c.rootfs_image_name, &c.rootfs_image, &c.rootfs_image_ref]
            .into_iter()
            .map(String::as_str)
            .find(|s| !s.is_empty())
    }
}

/// Unpacks `archive` into the empty directory `into`: regular files and directories only,
/// each by a plain relative name. It must hold `config.dump`, `spec.dump` and CRIU's images.
pub fn extract(archive: &Path, into: &Path) -> Result<Checkpoint, RestoreError> {
    crate::blocking::check("unpacking a checkpoint archive");
    let read = |source| RestoreError::Read { path: archive.to_path_buf(), source };
    let invalid = |why: String| RestoreError::Invalid { path: archive.to_path_buf(), why };
    let mut tar = tar::Archive::new(std::fs::File::open(archive).map_err(read)?);
    tar.set_preserve_permissions(true);
    // What the archive's own bytes get wrong is the request's fault; what writing it out
    // meets (a full disk) is not.
    let malformed = |e: io::Error| invalid(format!("not a readable tar: {e}"));
    for entry in tar.entries().map_err(malformed)? {
        let mut entry = entry.map_err(malformed)?;
        let name = entry.path().map_err(malformed)?.into_owned();
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) || !plain(&name) {
            return Err(invalid(format!("{}: only files and directories by plain names belong here", name.display())));
        }
        if !entry.unpack_in(into).map_err(read)? {
            return Err(invalid(format!("{}: outside the archive", name.display())));
        }
    }
    read_checkpoint(archive, into)
}

/// Copies a checkpoint image's unpacked layers (bottom first: an OCI image built from an
/// archive, whose files are the archive's) into the empty directory `into`: regular files
/// and directories only.
pub fn copy_layers(layers: &[PathBuf], into: &Path, image: &str) -> Result<Checkpoint, RestoreError> {
    crate::blocking::check("copying a checkpoint image");
    let named = PathBuf::from(image);
    let invalid = |why: String| RestoreError::Invalid { path: named.clone(), why };
    for layer in layers {
        for entry in walkdir::WalkDir::new(layer).min_depth(1).follow_links(false) {
            let entry = entry.map_err(|e| RestoreError::Read { path: layer.clone(), source: e.into() })?;
            let rel = entry.path().strip_prefix(layer).map_err(|e| invalid(e.to_string()))?;
            let target = into.join(rel);
            let copied = match entry.file_type() {
                t if t.is_dir() => crate::store::private::create_dir_all(&target),
                t if t.is_file() => std::fs::copy(entry.path(), &target).map(drop),
                _ => return Err(invalid(format!("{}: only files and directories belong here", rel.display()))),
            };
            copied.map_err(|source| RestoreError::Read { path: target.clone(), source })?;
        }
    }
    read_checkpoint(&named, into)
}

/// Reads the dumps of an unpacked checkpoint and checks it holds CRIU's images.
fn read_checkpoint(source: &Path, dir: &Path) -> Result<Checkpoint, RestoreError> {
    let invalid = |why: String| RestoreError::Invalid { path: source.to_path_buf(), why };
    let read_json = |name: &str| -> Result<Vec<u8>, RestoreError> {
        std::fs::read(dir.join(name)).map_err(|e| invalid(format!("no readable {name}: {e}")))
    };
    let config: ConfigDump = serde_json::from_slice(&read_json(layout::CONFIG_DUMP)?)
        .map_err(|e| invalid(format!("{}: {e}", layout::CONFIG_DUMP)))?;
    let spec: Spec = serde_json::from_slice(&read_json(layout::SPEC_DUMP)?)
        .map_err(|e| invalid(format!("{}: {e}", layout::SPEC_DUMP)))?;
    if !dir.join(layout::CHECKPOINT_DIR).join("inventory.img").is_file() {
        return Err(invalid("it holds no CRIU images (checkpoint/inventory.img)".into()));
    }
    Ok(Checkpoint { dir: dir.to_path_buf(), config, spec })
}

/// A relative path of plain names.
fn plain(path: &Path) -> bool {
    path.components().count() > 0 && path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// The request that recreates the checkpointed container: the new request (its resources,
/// security context, mounts, labels and annotations) on the checkpoint's image, with the
/// checkpointed process's command and working directory where the request names none.
pub fn restore_request(request: &cri::ContainerConfig, checkpoint: &Checkpoint, image: &str) -> cri::ContainerConfig {
    let mut config = request.clone();
    config.image = Some(cri::ImageSpec { image: image.to_string(), ..Default::default() });
    if let Some(process) = checkpoint.spec.process() {
        if config.command.is_empty() && config.args.is_empty() {
            config.command = process.args().clone().unwrap_or_default();
        }
        if config.working_dir.is_empty() {
            config.working_dir = process.cwd().display().to_string();
        }
    }
    config
}

/// Whether the checkpointed process had a terminal (its restore would need one handed over).
pub fn had_terminal(checkpoint: &Checkpoint) -> bool {
    checkpoint.spec.process().as_ref().and_then(|p| p.terminal()).unwrap_or(false)
}

/// The checkpointed container's mount points the new spec does not have: CRIU restores
/// each mount it dumped and needs every one again.
pub fn missing_mounts(dumped: &Spec, new: &Spec) -> Vec<String> {
    let targets =
        |spec: &Spec| -> Vec<PathBuf> { spec.mounts().iter().flatten().map(|m| m.destination().clone()).collect() };
    let have = targets(new);
    targets(dumped).into_iter().filter(|d| !have.contains(d)).map(|d| d.display().to_string()).collect()
}

/// Applies the checkpointed container's changes to a new root filesystem: the deleted paths
/// go, then `rootfs-diff.tar` (plain, or gzip as containerd writes it) is unpacked. Paths are
/// resolved inside `rootfs` as the container sees it; devices and hard links are refused.
pub fn apply_rootfs_changes(checkpoint: &Checkpoint, rootfs: &Path) -> Result<(), RestoreError> {
    crate::blocking::check("applying a checkpoint's root filesystem changes");
    let diff = checkpoint.dir.join(layout::ROOTFS_DIFF);
    let invalid = |why: String| RestoreError::Invalid { path: diff.clone(), why };
    let read = |source| RestoreError::Read { path: diff.clone(), source };
    match std::fs::read(checkpoint.dir.join(layout::DELETED_FILES)) {
        Ok(bytes) => {
            let deleted: Vec<String> =
                serde_json::from_slice(&bytes).map_err(|e| invalid(format!("{}: {e}", layout::DELETED_FILES)))?;
            for path in deleted {
                delete_in_root(rootfs, &path).map_err(|e| invalid(format!("deleting {path}: {e}")))?;
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(read(e)),
    }
    let mut file = match std::fs::File::open(&diff) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(read(e)),
    };
    let mut magic = [0u8; 2];
    let gzip = file.read(&mut magic).map_err(read)? == 2 && magic == [0x1f, 0x8b];
    std::io::Seek::rewind(&mut file).map_err(read)?;
    let reader: Box<dyn Read> = if gzip { Box::new(flate2::read::GzDecoder::new(file)) } else { Box::new(file) };
    let mut tar = tar::Archive::new(reader);
    tar.set_preserve_permissions(true);
    tar.set_preserve_ownerships(true);
    tar.set_overwrite(true);
    let malformed = |e: io::Error| invalid(format!("not a readable tar: {e}"));
    for entry in tar.entries().map_err(malformed)? {
        let mut entry = entry.map_err(malformed)?;
        let name = entry.path().map_err(malformed)?.into_owned();
        let kind = entry.header().entry_type();
        let allowed = kind.is_file() || kind.is_dir() || kind.is_symlink() || kind.is_fifo();
        if !allowed || !plain(&name) {
            return Err(invalid(format!(
                "{}: only files, directories, links and fifos by plain names",
                name.display()
            )));
        }
        let Some(target) = target_in_root(rootfs, &name).map_err(|e| invalid(format!("{}: {e}", name.display())))?
        else {
            return Err(invalid(format!(
                "{}: its directory is neither in the image nor in the archive",
                name.display()
            )));
        };
        match target.symlink_metadata() {
            Ok(m) if kind.is_dir() && m.is_dir() => continue, // there already, with the image's mode
            // A link the container replaced by a directory: never followed to set a mode.
            Ok(m) if kind.is_dir() && m.file_type().is_symlink() => {
                std::fs::remove_file(&target).map_err(|e| invalid(format!("{}: {e}", name.display())))?
            }
            _ => {}
        }
        entry.unpack(&target).map_err(|e| invalid(format!("{}: {e}", name.display())))?;
    }
    Ok(())
}

/// Where `rel` goes in `root`: its directory resolved inside the root, then its own name
/// (never followed). None when the directory does not exist.
fn target_in_root(root: &Path, rel: &Path) -> io::Result<Option<PathBuf>> {
    let name = rel.file_name().ok_or_else(|| io::Error::other("no name"))?;
    let parent = rel.parent().map(|p| p.display().to_string()).unwrap_or_default();
    let parent = if parent.is_empty() { ".".to_string() } else { parent };
    Ok(crate::store::confined::resolve_in_root(root, &parent)?.map(|dir| dir.join(name)))
}

/// Removes `path` (absolute, as the container sees it) from `root`, whatever it is; a path
/// already gone is no error.
fn delete_in_root(root: &Path, path: &str) -> io::Result<()> {
    let rel = Path::new(path.trim_start_matches('/'));
    if !plain(rel) {
        return Err(io::Error::other("not a plain path"));
    }
    let Some(target) = target_in_root(root, rel)? else { return Ok(()) };
    match target.symlink_metadata() {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&target),
        Ok(_) => std::fs::remove_file(&target),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests;
