//! Unpacks one layer archive into its own directory, in overlayfs form: OCI whiteouts
//! become 0:0 character devices and opaque directories carry `trusted.overlay.opaque=y`,
//! so the layer directories stack as overlay lower directories.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use sha2::Digest as _;

use crate::model::image::Digest;

use super::limits::UnpackBudget;

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_MARKER: &str = ".wh..wh..opq";
const OPAQUE_XATTR: &str = "trusted.overlay.opaque";

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("layer entry {path:?} escapes the layer directory")]
    Escape { path: String },
    #[error("layer entry {path:?} cannot be unpacked: {source}")]
    Entry { path: String, source: io::Error },
    #[error("cannot read layer archive: {0}")]
    Archive(#[source] io::Error),
    #[error("layer content is {0}")]
    TooLarge(super::limits::LimitHit),
    #[error("layer content has digest {actual}, the image config says {expected}")]
    DiffId { expected: Digest, actual: Digest },
}

impl UnpackError {
    /// True when the archive itself is damaged (as opposed to hostile or unwritable).
    pub fn is_corruption(&self) -> bool {
        matches!(self, UnpackError::Archive(_) | UnpackError::DiffId { .. })
    }
}

/// What an unpacked layer occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerStats {
    pub disk_bytes: u64,
    pub inodes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// Detects the compression from the first bytes, whatever the media type claims.
pub fn detect_compression(prefix: &[u8]) -> Compression {
    if prefix.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if prefix.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Hashes everything read through it.
struct HashingReader<R> {
    inner: R,
    hasher: sha2::Sha256,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Unpacks the (possibly compressed) layer file `blob` into `dest`: [`unpack_layer_from`].
pub fn unpack_layer(
    blob: &Path,
    dest: &Path,
    diff_id: &Digest,
    budget: &UnpackBudget,
) -> Result<LayerStats, UnpackError> {
    let file = File::open(blob).map_err(UnpackError::Archive)?;
    unpack_layer_from(file, dest, diff_id, budget)
}

/// Unpacks a (possibly compressed) layer read from `archive` into `dest`, which must be an
/// empty directory, and checks the uncompressed content against `diff_id`; `archive` is read
/// to its end. The decompressed stream is charged to `budget`.
pub fn unpack_layer_from(
    archive: impl Read,
    dest: &Path,
    diff_id: &Digest,
    budget: &UnpackBudget,
) -> Result<LayerStats, UnpackError> {
    let mut buffered = BufReader::with_capacity(256 * 1024, archive);
    // The magic number, however few bytes the first reads bring; then put back in front.
    let mut head = Vec::with_capacity(4);
    (&mut buffered).take(4).read_to_end(&mut head).map_err(UnpackError::Archive)?;
    let compression = detect_compression(&head);
    let buffered = io::Cursor::new(head).chain(buffered);
    let decoded: Box<dyn Read> = match compression {
        Compression::None => Box::new(buffered),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(buffered)),
        Compression::Zstd => {
            Box::new(zstd::stream::read::Decoder::with_buffer(buffered).map_err(UnpackError::Archive)?)
        }
    };
    let mut reader = HashingReader { inner: budget.meter(decoded), hasher: sha2::Sha256::new() };
    // The digest covers the whole stream, including padding after the end-of-archive marker.
    let unpacked = unpack_tar(&mut reader, dest)
        .and_then(|()| io::copy(&mut reader, &mut io::sink()).map_err(UnpackError::Archive));
    if let Some(hit) = reader.inner.hit {
        return Err(UnpackError::TooLarge(hit));
    }
    unpacked?;
    let actual = Digest::from_sha256(reader.hasher);
    if &actual != diff_id {
        return Err(UnpackError::DiffId { expected: diff_id.clone(), actual });
    }
    layer_stats(dest)
}

fn unpack_tar(reader: &mut dyn Read, dest: &Path) -> Result<(), UnpackError> {
    fs::create_dir_all(dest).map_err(UnpackError::Archive)?;
    let root = fs::canonicalize(dest).map_err(UnpackError::Archive)?;
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.set_preserve_mtime(true);
    // Only the attributes in KEPT_XATTRS are applied, by `apply_xattrs`.
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    for entry in archive.entries().map_err(UnpackError::Archive)? {
        let mut entry = entry.map_err(UnpackError::Archive)?;
        let raw = entry.path().map_err(UnpackError::Archive)?.into_owned();
        let shown = raw.display().to_string();
        let rel = clean_path(&raw).ok_or_else(|| UnpackError::Escape { path: shown.clone() })?;
        let Some(name) = rel.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue; // the layer root itself ("./")
        };
        let entry_err = |source: io::Error| UnpackError::Entry { path: shown.clone(), source: with_causes(source) };
        let parent = ensure_dir(&root, rel.parent().unwrap_or(Path::new("")), &shown)?;
        if name == OPAQUE_MARKER {
            xattr::set(&parent, OPAQUE_XATTR, b"y").map_err(entry_err)?;
            continue;
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
            if hidden.is_empty() || hidden == "." || hidden == ".." {
                return Err(UnpackError::Escape { path: shown });
            }
            let target = parent.join(hidden);
            remove_existing(&target, false).map_err(entry_err)?;
            mknod(&target, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0)).map_err(|e| entry_err(e.into()))?;
            continue;
        }
        let kind = entry.header().entry_type();
        let target = parent.join(&name);
        remove_existing(&target, kind.is_dir()).map_err(entry_err)?;
        if kind.is_character_special() || kind.is_block_special() || kind.is_fifo() {
            make_special(&entry, &target).map_err(entry_err)?;
        } else {
            let xattrs = kept_xattrs(&mut entry).map_err(entry_err)?;
            if !entry.unpack_in(&root).map_err(entry_err)? {
                return Err(UnpackError::Escape { path: shown });
            }
            for (name, value) in xattrs {
                xattr::set(&target, &name, &value).map_err(entry_err)?;
            }
        }
    }
    Ok(())
}

/// Extended attributes a layer may set. `user.*` is the files' own data and
/// `security.capability` gives binaries their file capabilities (ping). Everything else is
/// dropped: `trusted.overlay.*` would steer overlayfs (redirects, opaque directories, metacopy
/// pointing at other layers' files), `security.selinux` / `security.ima` belong to the node's
/// policy, and `system.*` holds ACLs the node did not grant.
fn xattr_kept(name: &str) -> bool {
    name.starts_with("user.") || name == "security.capability"
}

/// The entry's kept extended attributes (PAX `SCHILY.xattr.<name>` records).
fn kept_xattrs<R: Read>(entry: &mut tar::Entry<R>) -> io::Result<Vec<(String, Vec<u8>)>> {
    let Some(extensions) = entry.pax_extensions()? else { return Ok(Vec::new()) };
    let mut kept = Vec::new();
    for extension in extensions {
        let extension = extension?;
        let Ok(key) = extension.key() else { continue };
        if let Some(name) = key.strip_prefix("SCHILY.xattr.") {
            if xattr_kept(name) {
                kept.push((name.to_string(), extension.value_bytes().to_vec()));
            } else {
                tracing::debug!(xattr = name, "layer extended attribute dropped");
            }
        }
    }
    Ok(kept)
}

/// The tar crate nests the real cause (EPERM, ENOSPC…) as a source; keep it in the message.
fn with_causes(e: io::Error) -> io::Error {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    io::Error::new(e.kind(), text)
}

/// Drops `/` and `.` components; `None` when a `..` component appears.
fn clean_path(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => return None,
        }
    }
    Some(out)
}

/// Creates the directories of `rel` below `root` one by one, refusing any symlink that
/// leads outside `root` before anything is created through it. Returns the real path.
fn ensure_dir(root: &Path, rel: &Path, shown: &str) -> Result<PathBuf, UnpackError> {
    let escape = || UnpackError::Escape { path: shown.to_string() };
    let entry_err = |source| UnpackError::Entry { path: shown.to_string(), source };
    let mut current = root.to_path_buf();
    for component in rel.components() {
        let next = current.join(component);
        match fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let resolved = fs::canonicalize(&next).map_err(|_| escape())?;
                if !resolved.starts_with(root) || !resolved.is_dir() {
                    return Err(escape());
                }
                current = resolved;
            }
            Ok(meta) if meta.is_dir() => current = next,
            Ok(_) => {
                fs::remove_file(&next).map_err(entry_err)?;
                fs::create_dir(&next).map_err(entry_err)?;
                current = next;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&next).map_err(entry_err)?;
                current = next;
            }
            Err(e) => return Err(entry_err(e)),
        }
    }
    Ok(current)
}

/// Clears the way for a new entry; a directory replacing a directory merges into it.
fn remove_existing(path: &Path, new_is_dir: bool) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            if new_is_dir {
                Ok(())
            } else {
                fs::remove_dir_all(path)
            }
        }
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Device nodes and FIFOs, which the tar crate would turn into empty files.
fn make_special<R: Read>(entry: &tar::Entry<R>, target: &Path) -> io::Result<()> {
    let header = entry.header();
    let kind = header.entry_type();
    let flag = if kind.is_character_special() {
        SFlag::S_IFCHR
    } else if kind.is_block_special() {
        SFlag::S_IFBLK
    } else {
        SFlag::S_IFIFO
    };
    let major = header.device_major()?.unwrap_or(0) as u64;
    let minor = header.device_minor()?.unwrap_or(0) as u64;
    let mode = Mode::from_bits_truncate(header.mode()? & 0o7777);
    mknod(target, flag, mode, makedev(major, minor))?;
    std::os::unix::fs::lchown(target, Some(header.uid()? as u32), Some(header.gid()? as u32))?;
    // mknod applies the umask; set the mode the archive asks for.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(target, fs::Permissions::from_mode(mode.bits()))?;
    let mtime = filetime::FileTime::from_unix_time(header.mtime()? as i64, 0);
    filetime::set_symlink_file_times(target, mtime, mtime)
}

/// Disk usage (allocated blocks, hard links counted once) and inode count of a tree.
pub fn layer_stats(dir: &Path) -> Result<LayerStats, UnpackError> {
    let mut seen = HashSet::new();
    let mut stats = LayerStats::default();
    for entry in walkdir::WalkDir::new(dir).follow_links(false) {
        let entry = entry.map_err(|e| UnpackError::Archive(io::Error::other(e)))?;
        let meta = entry.metadata().map_err(|e| UnpackError::Archive(io::Error::other(e)))?;
        if seen.insert((meta.dev(), meta.ino())) {
            stats.inodes += 1;
            stats.disk_bytes += meta.blocks() * 512;
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests;
