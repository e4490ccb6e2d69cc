//! Per-object state directories: `<root>/<id>/meta.json` (immutable) and `status.json`
//! (mutable). An object is complete once its status exists; a directory without one is
//! what a crash during creation left.

use std::fs;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{read_versioned, write_versioned, StoreError};

const VERSION: u32 = 1;

pub struct Records {
    root: PathBuf,
}

/// What loading found on disk.
pub struct Loaded<M, S> {
    pub complete: Vec<(M, S)>,
    /// Ids whose directory has no status: half-created objects to clean up.
    pub incomplete: Vec<String>,
    /// Records that cannot be read; moved aside (never deleted) for an operator to inspect.
    pub quarantined: Vec<(String, String)>,
}

impl Records {
    pub fn open(root: &Path) -> Result<Records, StoreError> {
        fs::create_dir_all(root).map_err(|source| StoreError::Write { path: root.to_path_buf(), source })?;
        Ok(Records { root: root.to_path_buf() })
    }

    pub fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    pub fn write_meta<M: Serialize>(&self, id: &str, meta: &M) -> Result<(), StoreError> {
        write_versioned(&self.dir(id).join("meta.json"), VERSION, meta)
    }

    pub fn write_status<S: Serialize>(&self, id: &str, status: &S) -> Result<(), StoreError> {
        write_versioned(&self.dir(id).join("status.json"), VERSION, status)
    }

    pub fn remove(&self, id: &str) -> Result<(), StoreError> {
        match fs::remove_dir_all(self.dir(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::Write { path: self.dir(id), source: e })
            }
            _ => Ok(()),
        }
    }

    pub fn load<M: DeserializeOwned, S: DeserializeOwned>(&self) -> Result<Loaded<M, S>, StoreError> {
        let mut loaded = Loaded { complete: Vec::new(), incomplete: Vec::new(), quarantined: Vec::new() };
        let entries =
            fs::read_dir(&self.root).map_err(|source| StoreError::Read { path: self.root.clone(), source })?;
        for entry in entries.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if id.contains('.') {
                continue; // quarantined earlier
            }
            let dir = entry.path();
            let read = read_versioned::<M>(&dir.join("meta.json"), VERSION)
                .and_then(|m| Ok((m, read_versioned::<S>(&dir.join("status.json"), VERSION)?)));
            match read {
                Ok((Some(m), Some(s))) => loaded.complete.push((m, s)),
                Ok(_) => loaded.incomplete.push(id),
                Err(e) => {
                    let aside = self.root.join(format!("{id}.corrupt"));
                    let _ = fs::rename(&dir, &aside);
                    loaded.quarantined.push((id, e.to_string()));
                }
            }
        }
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_and_incomplete_records() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::open(dir.path()).unwrap();
        records.write_meta("a", &"meta-a").unwrap();
        records.write_status("a", &1u32).unwrap();
        records.write_meta("b", &"meta-b").unwrap();
        records.write_meta("c", &7u32).unwrap();
        records.write_status("c", &1u32).unwrap();
        let loaded: Loaded<String, u32> = records.load().unwrap();
        assert_eq!(loaded.complete, vec![("meta-a".to_string(), 1)]);
        assert_eq!(loaded.incomplete, vec!["b".to_string()]);
        assert_eq!(loaded.quarantined.len(), 1, "a record of the wrong shape is moved aside");
        assert!(dir.path().join("c.corrupt/meta.json").exists());
        records.remove("b").unwrap();
        records.remove("b").unwrap();
        assert_eq!(records.load::<String, u32>().unwrap().incomplete.len(), 0);
    }
}
