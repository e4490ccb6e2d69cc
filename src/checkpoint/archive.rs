//! The checkpoint archive on disk: written beside its final path and renamed into place, so
//! a reader finds the whole archive or none.

use std::io::{self, Write};
use std::path::Path;

/// Writes the files and directories in `stage` (at the archive's root, in name order) to
/// `location` as a tar readable by the owner only, replacing what was there; returns its size.
/// A failure leaves nothing at `location` that was not there before.
pub fn write_archive(stage: &Path, location: &Path) -> io::Result<u64> {
    let parent = location.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let file = tempfile::Builder::new().prefix(".swapcri-checkpoint-").tempfile_in(parent)?;
    let mut tar = tar::Builder::new(io::BufWriter::new(file));
    tar.follow_symlinks(false);
    let mut names: Vec<_> = std::fs::read_dir(stage)?.map(|e| e.map(|e| e.file_name())).collect::<io::Result<_>>()?;
    names.sort();
    for name in names {
        let path = stage.join(&name);
        if path.symlink_metadata()?.is_dir() {
            tar.append_dir_all(&name, &path)?;
        } else {
            tar.append_path_with_name(&path, &name)?;
        }
    }
    let mut writer = tar.into_inner()?;
    writer.flush()?;
    let file = writer.into_inner().map_err(|e| e.into_error())?;
    file.as_file().sync_all()?;
    let size = file.as_file().metadata()?.len();
    file.persist(location).map_err(|e| e.error)?;
    std::fs::File::open(parent)?.sync_all()?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn stage() -> tempfile::TempDir {
        let stage = tempfile::tempdir().unwrap();
        std::fs::create_dir(stage.path().join("checkpoint")).unwrap();
        std::fs::write(stage.path().join("checkpoint/pages-1.img"), "pages").unwrap();
        std::fs::write(stage.path().join("spec.dump"), "{}").unwrap();
        std::fs::write(stage.path().join("config.dump"), "{}").unwrap();
        stage
    }

    #[test]
    fn the_archive_holds_the_stage_at_its_root_and_only_its_owner_reads_it() {
        let (stage, out) = (stage(), tempfile::tempdir().unwrap());
        let location = out.path().join("cp.tar");
        std::fs::write(&location, "an older archive").unwrap();
        let size = write_archive(stage.path(), &location).unwrap();
        assert_eq!(size, std::fs::metadata(&location).unwrap().len());
        assert_eq!(std::fs::metadata(&location).unwrap().permissions().mode() & 0o777, 0o600);
        let mut names: Vec<String> = tar::Archive::new(std::fs::File::open(&location).unwrap())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string().trim_end_matches('/').to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["checkpoint", "checkpoint/pages-1.img", "config.dump", "spec.dump"]);
        let left: Vec<_> = std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["cp.tar"], "no temporary file stays beside it");
    }

    #[test]
    fn a_failed_write_leaves_the_location_as_it_was() {
        let (stage, out) = (stage(), tempfile::tempdir().unwrap());
        // A stage entry that cannot be read fails the write half way.
        let unreadable = stage.path().join("z-socket");
        std::os::unix::net::UnixListener::bind(&unreadable).unwrap();
        let location = out.path().join("cp.tar");
        std::fs::write(&location, "an older archive").unwrap();
        assert!(write_archive(stage.path(), &location).is_err());
        assert_eq!(std::fs::read_to_string(&location).unwrap(), "an older archive");
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1, "no temporary file stays beside it");
        assert!(write_archive(stage.path(), &out.path().join("missing/cp.tar")).is_err());
    }
}
