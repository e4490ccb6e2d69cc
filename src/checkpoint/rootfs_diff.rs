//! A container's writable layer (its overlayfs upper directory) as a checkpoint archive holds
//! it: what was added or changed as a tar, what was deleted as a list.

use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// overlayfs marks a directory that hides the lower layers' entries of the same name so.
const OPAQUE: &str = "trusted.overlay.opaque";

/// What one entry of an upper directory stands for.
#[derive(Debug, PartialEq)]
enum Change {
    /// Added or changed: into the tar.
    Written,
    /// A whiteout: the image's file of that name was deleted.
    Deleted,
    /// A directory that replaced the image's one: the image's goes, this one comes.
    Replaced,
    /// A socket: nothing a tar holds (its owner recreates it).
    Skipped,
}

fn change_of(path: &Path, meta: &std::fs::Metadata) -> Change {
    let kind = meta.file_type();
    if kind.is_char_device() && meta.rdev() == 0 {
        Change::Deleted
    } else if kind.is_dir() && xattr::get(path, OPAQUE).ok().flatten().is_some_and(|v| v == b"y") {
        Change::Replaced
    } else if kind.is_socket() {
        Change::Skipped
    } else {
        Change::Written
    }
}

/// Writes the changes under `upper` to `out` as a tar (paths relative to the root, symbolic
/// links kept as links) and returns the deleted paths (absolute, in the container). Entries
/// that vanish while it reads (the container runs on) are left out.
pub fn write_rootfs_diff(upper: &Path, out: impl Write) -> io::Result<Vec<String>> {
    if !std::fs::symlink_metadata(upper)?.is_dir() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a directory", upper.display())));
    }
    let mut tar = tar::Builder::new(out);
    tar.follow_symlinks(false);
    tar.mode(tar::HeaderMode::Complete);
    let mut deleted = Vec::new();
    let walk = walkdir::WalkDir::new(upper).follow_links(false).min_depth(1).sort_by_file_name();
    for entry in walk {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if e.io_error().is_some_and(|io| io.kind() == io::ErrorKind::NotFound) => continue,
            Err(e) => return Err(e.into()),
        };
        let rel = entry.path().strip_prefix(upper).map_err(io::Error::other)?;
        let meta = match entry.path().symlink_metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        match change_of(entry.path(), &meta) {
            Change::Deleted => deleted.push(format!("/{}", rel.display())),
            Change::Skipped => {}
            change => {
                if change == Change::Replaced {
                    deleted.push(format!("/{}", rel.display()));
                }
                let appended = match meta.file_type().is_file() {
                    true => append_file(&mut tar, entry.path(), rel),
                    false => tar.append_path_with_name(entry.path(), rel),
                };
                match appended {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    other => other?,
                }
            }
        }
    }
    tar.into_inner()?.flush()?;
    Ok(deleted)
}

/// A regular file as it is when opened: exactly the size its header gives, zeros where the
/// running container shortened it meanwhile, nothing of what it added (the tar stays whole).
fn append_file<W: Write>(tar: &mut tar::Builder<W>, path: &Path, rel: &Path) -> io::Result<()> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let mut header = tar::Header::new_gnu();
    header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
    let size = meta.len();
    tar.append_data(&mut header, rel, file.take(size).chain(io::repeat(0)).take(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds an upper directory: a new file, a changed one in a new directory, a symlink, a
    /// whiteout (when mknod is allowed), an opaque directory (when trusted xattrs are).
    fn upper() -> (tempfile::TempDir, bool, bool) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("etc/app")).unwrap();
        std::fs::write(root.join("etc/app/conf"), "changed").unwrap();
        std::fs::create_dir(root.join("tmp")).unwrap();
        std::fs::write(root.join("tmp/count"), "42").unwrap();
        std::os::unix::fs::symlink("/tmp/count", root.join("tmp/link")).unwrap();
        let whiteout = nix::sys::stat::mknod(
            &root.join("etc/gone"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
            0,
        )
        .is_ok();
        std::fs::create_dir(root.join("var")).unwrap();
        std::fs::write(root.join("var/new"), "").unwrap();
        let opaque = xattr::set(root.join("var"), OPAQUE, b"y").is_ok();
        (dir, whiteout, opaque)
    }

    #[test]
    fn the_diff_holds_what_was_written_and_lists_what_was_deleted() {
        let (dir, whiteout, opaque) = upper();
        let mut out = Vec::new();
        let deleted = write_rootfs_diff(dir.path(), &mut out).unwrap();
        let mut want_deleted = Vec::new();
        if whiteout {
            want_deleted.push("/etc/gone".to_string());
        }
        if opaque {
            want_deleted.push("/var".to_string());
        }
        assert_eq!(deleted, want_deleted);
        let mut archive = tar::Archive::new(&out[..]);
        let mut entries = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().display().to_string();
            let mut content = String::new();
            if entry.header().entry_type().is_file() {
                std::io::Read::read_to_string(&mut entry, &mut content).unwrap();
            }
            let link = entry.link_name().unwrap().map(|l| l.display().to_string());
            entries.push((name, content, link));
        }
        let names: Vec<&str> = entries.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["etc", "etc/app", "etc/app/conf", "tmp", "tmp/count", "tmp/link", "var", "var/new"]);
        assert!(entries.contains(&("tmp/count".into(), "42".into(), None)));
        assert!(entries.contains(&("tmp/link".into(), String::new(), Some("/tmp/count".into()))));
    }

    #[test]
    fn a_file_that_changes_while_it_is_read_leaves_a_whole_tar() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("count"), "1234567890").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (path, stop) = (dir.path().join("count"), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    i += 1;
                    let _ = std::fs::write(&path, format!("{}", if i % 2 == 0 { "1" } else { "1234567890123" }));
                }
            })
        };
        for _ in 0..200 {
            let mut out = Vec::new();
            write_rootfs_diff(dir.path(), &mut out).unwrap();
            let mut archive = tar::Archive::new(&out[..]);
            let names: Vec<String> =
                archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
            assert_eq!(names, ["count"]);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
    }

    #[test]
    fn an_empty_layer_is_an_empty_tar() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Vec::new();
        assert!(write_rootfs_diff(dir.path(), &mut out).unwrap().is_empty());
        assert_eq!(tar::Archive::new(&out[..]).entries().unwrap().count(), 0);
    }

    #[test]
    fn a_missing_layer_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write_rootfs_diff(&dir.path().join("none"), std::io::sink()).is_err());
    }
}
