//! Modes of what the runtime creates on the node. Images, records and bundles hold what
//! other users must not read (a container's environment carries its secrets) or run (setuid
//! files from image layers): directories are 0700 and files 0600 unless another user must
//! reach them, and those exceptions are named where they are made.

use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// A directory only root enters.
pub const DIR: u32 = 0o700;
/// A directory other users may pass through but not list: the way to a user-namespaced
/// container's root filesystem, which its runtime reaches as the pod's (unprivileged) root.
pub const TRAVERSE: u32 = 0o711;
/// A file only root reads.
pub const FILE: u32 = 0o600;
/// Container logs: root and the log's group (as other runtimes write them).
pub const LOG: u32 = 0o640;

/// Creates `path` and its missing parents with mode 0700. An existing directory is left as
/// it is (see `restrict`).
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR).create(path)
}

/// Creates `path` (and missing parents) and gives it exactly `mode`, whatever it had.
pub fn ensure_dir(path: &Path, mode: u32) -> io::Result<()> {
    create_dir_all(path)?;
    set_mode(path, mode)
}

/// Takes from `path` every permission bit `mode` does not grant; a missing path is fine.
/// Symbolic links are left alone (their target is not ours to change).
pub fn restrict(path: &Path, mode: u32) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Ok(()),
        Ok(meta) if meta.mode() & 0o7777 & !mode != 0 => set_mode(path, meta.mode() & mode & 0o7777),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Brings an installation made by an earlier version to these modes: the roots, their
/// top-level directories, each container's run directory and its OCI spec. What lies deeper
/// is out of reach once these are closed.
pub fn secure_roots(state_root: &Path, run_root: &Path) -> io::Result<()> {
    ensure_dir(state_root, DIR)?;
    ensure_dir(run_root, TRAVERSE)?;
    for root in [state_root, run_root] {
        for entry in fs::read_dir(root)? {
            let entry = entry?;
            // The CRI socket (0660, for its group) may live in the run root: directories only.
            if entry.file_type()?.is_dir() && !(root == run_root && entry.file_name() == "containers") {
                restrict(&entry.path(), DIR)?;
            }
        }
    }
    let containers = run_root.join("containers");
    ensure_dir(&containers, TRAVERSE)?;
    for entry in fs::read_dir(&containers)? {
        let dir = entry?.path();
        let meta = fs::symlink_metadata(&dir)?;
        if meta.is_dir() {
            // A user-namespaced container's directory lets its pod's root group through (0710).
            restrict(&dir, if meta.gid() != 0 { 0o710 } else { DIR })?;
            restrict(&dir.join("bundle/config.json"), FILE)?;
        }
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    fs::set_permissions(path, Permissions::from_mode(mode))
}

/// Writes a whole file with mode 0600, replacing any earlier one (whose mode would
/// otherwise be kept).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = fs::remove_file(path);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn created_directories_and_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        for p in ["a", "a/b", "a/b/c"] {
            assert_eq!(mode(&dir.path().join(p)), DIR, "{p}");
        }
        let file = deep.join("f");
        fs::write(&file, "old").unwrap();
        fs::set_permissions(&file, Permissions::from_mode(0o644)).unwrap();
        write_file(&file, b"new").unwrap();
        assert_eq!((mode(&file), fs::read_to_string(&file).unwrap().as_str()), (FILE, "new"));
    }

    #[test]
    fn restrict_only_takes_bits_away() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (0o755, DIR, 0o700),
            (0o711, TRAVERSE, 0o711),
            (0o750, TRAVERSE, 0o710),
            (0o644, LOG, 0o640),
            (0o600, LOG, 0o600),
            (0o4755, FILE, 0o600),
        ];
        for (n, (before, limit, after)) in cases.into_iter().enumerate() {
            let p = dir.path().join(n.to_string());
            fs::write(&p, "").unwrap();
            fs::set_permissions(&p, Permissions::from_mode(before)).unwrap();
            restrict(&p, limit).unwrap();
            assert_eq!(mode(&p), after, "{before:o} under {limit:o}");
        }
        restrict(&dir.path().join("missing"), DIR).unwrap();
    }

    #[test]
    fn an_earlier_installation_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let (state, run) = (dir.path().join("state"), dir.path().join("run"));
        let open = |p: &Path, m: u32| {
            fs::create_dir_all(p).unwrap();
            fs::set_permissions(p, Permissions::from_mode(m)).unwrap();
        };
        open(&state.join("images/layers/sha256"), 0o755);
        open(&state.join("containers/c1"), 0o755);
        open(&run.join("sandboxes/p1"), 0o755);
        open(&run.join("containers/c1/bundle"), 0o755);
        open(&run.join("containers/c2"), 0o750);
        std::os::unix::fs::chown(run.join("containers/c2"), None, Some(65536)).unwrap();
        fs::write(run.join("containers/c1/bundle/config.json"), "{}").unwrap();
        fs::set_permissions(run.join("containers/c1/bundle/config.json"), Permissions::from_mode(0o644)).unwrap();
        fs::write(run.join("swapcri.sock"), "").unwrap();
        fs::set_permissions(run.join("swapcri.sock"), Permissions::from_mode(0o660)).unwrap();
        fs::set_permissions(&state, Permissions::from_mode(0o711)).unwrap();
        fs::set_permissions(&run, Permissions::from_mode(0o755)).unwrap();
        secure_roots(&state, &run).unwrap();
        let expected = [
            ("state", DIR),
            ("state/images", DIR),
            ("state/containers", DIR),
            ("run", TRAVERSE),
            ("run/sandboxes", DIR),
            ("run/containers", TRAVERSE),
            ("run/containers/c1", DIR),
            ("run/containers/c2", 0o710),
            ("run/containers/c1/bundle/config.json", FILE),
            ("run/swapcri.sock", 0o660),
        ];
        for (p, m) in expected {
            assert_eq!(mode(&dir.path().join(p)), m, "{p}");
        }
    }

    #[test]
    fn ensure_dir_sets_the_mode_of_an_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d");
        fs::create_dir(&p).unwrap();
        fs::set_permissions(&p, Permissions::from_mode(0o755)).unwrap();
        ensure_dir(&p, TRAVERSE).unwrap();
        assert_eq!(mode(&p), TRAVERSE);
    }
}
