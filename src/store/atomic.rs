//! Atomic, versioned JSON files: write to a temporary file, fsync, rename, fsync the directory.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::model::error_kind::{Classify, ErrorKind};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("corrupt state file {path}: {source}")]
    Corrupt { path: PathBuf, source: serde_json::Error },
}

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    version: u32,
    data: T,
}

/// Writes `bytes` to `path` so that readers see either the old or the new content. Each
/// write has a temporary file of its own (a unique name, mode 0600): two writers of one path
/// never share one, the last rename wins whole.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    super::private::create_dir_all(dir).map_err(|source| StoreError::Write { path: path.to_path_buf(), source })?;
    replace_atomic(path, bytes)
}

/// As `write_atomic`, in a directory that must exist: a record removed meanwhile (its
/// directory gone) is not brought back by a late writer, which gets NotFound.
pub fn replace_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    crate::blocking::check("an atomic write (fsync)");
    let err = |source| StoreError::Write { path: path.to_path_buf(), source };
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("state");
    // Dropped on any error, the temporary file is removed.
    let mut tmp = tempfile::Builder::new().prefix(&format!(".{name}.tmp-")).tempfile_in(dir).map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(err)
}

/// Writes `data` as `{"version": N, "data": …}`.
pub fn write_versioned<T: Serialize>(path: &Path, version: u32, data: &T) -> Result<(), StoreError> {
    write_atomic(path, &envelope(path, version, data)?)
}

/// As `write_versioned`, in a directory that must exist (see `replace_atomic`).
pub fn replace_versioned<T: Serialize>(path: &Path, version: u32, data: &T) -> Result<(), StoreError> {
    replace_atomic(path, &envelope(path, version, data)?)
}

fn envelope<T: Serialize>(path: &Path, version: u32, data: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec_pretty(&Envelope { version, data })
        .map_err(|e| StoreError::Write { path: path.to_path_buf(), source: std::io::Error::other(e) })
}

/// Reads a versioned document; `Ok(None)` when the file does not exist. A document of an
/// older version is read as this one (its missing fields take their defaults), one of a
/// newer version too (fields this build does not know are ignored): an upgrade and a
/// downgrade both keep the state. Only a document that does not decode is an error.
pub fn read_versioned<T: DeserializeOwned>(path: &Path, version: u32) -> Result<Option<T>, StoreError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StoreError::Read { path: path.to_path_buf(), source }),
    };
    let envelope: Envelope<T> =
        serde_json::from_slice(&bytes).map_err(|source| StoreError::Corrupt { path: path.to_path_buf(), source })?;
    if envelope.version != version {
        tracing::debug!(path = %path.display(), found = envelope.version, current = version, "read a document of another version");
    }
    Ok(Some(envelope.data))
}

/// A state file that cannot be written or read is the node's trouble, not the caller's.
impl Classify for StoreError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Internal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_every_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        assert!(read_versioned::<Vec<u32>>(&path, 1).unwrap().is_none());
        write_versioned(&path, 1, &vec![1u32, 2, 3]).unwrap();
        assert_eq!(read_versioned::<Vec<u32>>(&path, 1).unwrap(), Some(vec![1, 2, 3]));
        // A later build (version 2) reads it, and this one reads what the later one wrote.
        assert_eq!(read_versioned::<Vec<u32>>(&path, 2).unwrap(), Some(vec![1, 2, 3]));
        write_versioned(&path, 2, &vec![4u32]).unwrap();
        assert_eq!(read_versioned::<Vec<u32>>(&path, 1).unwrap(), Some(vec![4]));
        write_versioned(&path, 1, &vec![1u32, 2, 3]).unwrap();
        // No temporary file is left beside the document.
        let names: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn concurrent_writers_never_tear_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.json");
        let documents: Vec<Vec<u8>> = (0..8u8).map(|n| vec![b'a' + n; 64 * 1024]).collect();
        let (documents, path) = (&documents, &path);
        std::thread::scope(|scope| {
            for document in documents {
                scope.spawn(move || {
                    for _ in 0..20 {
                        write_atomic(path, document).unwrap();
                        let seen = fs::read(path).unwrap();
                        assert!(documents.contains(&seen), "a torn file of {} bytes", seen.len());
                    }
                });
            }
        });
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("status.json")], "no temporary file is left");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn corrupt_file_is_reported_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        fs::write(&path, b"{not json").unwrap();
        let err = read_versioned::<Vec<u32>>(&path, 1).unwrap_err();
        assert!(err.to_string().contains("state.json"), "{err}");
    }
}
