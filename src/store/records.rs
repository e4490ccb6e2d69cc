//! Per-object state directories: `<root>/<id>/meta.json` (immutable) and `status.json`
//! (mutable). An object is complete once its status exists; a directory without one is
//! what a crash during creation left. A record this build cannot read is quarantined: moved
//! to `<id>.corrupt`, its object left as it is on the node until the operator adopts it
//! (back to `<id>`) or releases it (`<id>.release`, cleaned up at the next start). A record
//! is removed by renaming it to `<id>.removing` first: a late status write finds no
//! directory instead of bringing one back, and a removal a crash cut short ends at the next
//! load.

use std::fs;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::atomic::{read_versioned, replace_versioned, write_versioned, StoreError};

const VERSION: u32 = 1;

#[derive(Debug, Clone)]
pub struct Records {
    root: PathBuf,
}

/// What loading found on disk.
pub struct Loaded<M, S> {
    pub complete: Vec<(M, S)>,
    /// Ids whose directory has no status: half-created objects to clean up.
    pub incomplete: Vec<String>,
    /// Records that cannot be read, with why: moved aside (never deleted) for an operator
    /// to adopt or release; this start's and earlier ones'.
    pub quarantined: Vec<(String, String)>,
    /// Ids the operator released: what they hold on the node is to be cleaned up.
    pub released: Vec<String>,
}

pub(super) const QUARANTINED: &str = "corrupt";
const RELEASED: &str = "release";
const REMOVING: &str = "removing";

impl Records {
    pub fn open(root: &Path) -> Result<Records, StoreError> {
        super::private::create_dir_all(root)
            .map_err(|source| StoreError::Write { path: root.to_path_buf(), source })?;
        Ok(Records { root: root.to_path_buf() })
    }

    pub fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    pub fn write_meta<M: Serialize>(&self, id: &str, meta: &M) -> Result<(), StoreError> {
        write_versioned(&self.dir(id).join("meta.json"), VERSION, meta)
    }

    /// Writes the status of a record whose meta is written: NotFound once it is removed.
    pub fn write_status<S: Serialize>(&self, id: &str, status: &S) -> Result<(), StoreError> {
        replace_versioned(&self.dir(id).join("status.json"), VERSION, status)
    }

    /// Removes a record: renamed aside at once, so no writer brings it back, then deleted.
    pub fn remove(&self, id: &str) -> Result<(), StoreError> {
        crate::blocking::check("removing a record directory");
        let removing = self.aside_dir(id, REMOVING);
        match fs::rename(self.dir(id), &removing) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::Write { path: self.dir(id), source: e })
            }
            _ => {}
        }
        match fs::remove_dir_all(&removing) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::Write { path: removing, source: e }),
            _ => Ok(()),
        }
    }

    pub fn load<M: DeserializeOwned, S: DeserializeOwned>(&self) -> Result<Loaded<M, S>, StoreError> {
        crate::blocking::check("loading records");
        let mut loaded =
            Loaded { complete: Vec::new(), incomplete: Vec::new(), quarantined: Vec::new(), released: Vec::new() };
        let entries =
            fs::read_dir(&self.root).map_err(|source| StoreError::Read { path: self.root.clone(), source })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            match name.split_once('.') {
                None => match read_pair::<M, S>(&entry.path()) {
                    Ok((Some(m), Some(s))) => loaded.complete.push((m, s)),
                    Ok(_) => loaded.incomplete.push(name),
                    Err(e) => {
                        let _ = fs::rename(entry.path(), self.aside_dir(&name, QUARANTINED));
                        loaded.quarantined.push((name, e.to_string()));
                    }
                },
                Some((id, QUARANTINED)) => {
                    loaded.quarantined.push((id.to_string(), why_unreadable::<M, S>(&entry.path())))
                }
                Some((id, RELEASED)) => loaded.released.push(id.to_string()),
                // A removal a crash cut short: the object was on its way out.
                Some((_, REMOVING)) => {
                    let _ = fs::remove_dir_all(entry.path());
                }
                // Temporary files of an atomic write, earlier builds' leftovers.
                Some(_) => {}
            }
        }
        Ok(loaded)
    }

    /// The quarantined records (with why each cannot be read) and the released ones, read
    /// without changing anything: for the operator's tools while the daemon runs.
    pub fn aside<M: DeserializeOwned, S: DeserializeOwned>(
        &self,
    ) -> Result<(Vec<(String, String)>, Vec<String>), StoreError> {
        let entries =
            fs::read_dir(&self.root).map_err(|source| StoreError::Read { path: self.root.clone(), source })?;
        let (mut quarantined, mut released) = (Vec::new(), Vec::new());
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            match name.split_once('.') {
                Some((id, QUARANTINED)) => quarantined.push((id.to_string(), why_unreadable::<M, S>(&entry.path()))),
                Some((id, RELEASED)) => released.push(id.to_string()),
                _ => {}
            }
        }
        quarantined.sort();
        released.sort();
        Ok((quarantined, released))
    }

    /// Takes a quarantined record back once this build reads it (after an upgrade or the
    /// operator's repair); the daemon lists the object from its next start.
    pub fn adopt<M: DeserializeOwned, S: DeserializeOwned>(&self, id: &str) -> Result<(), StoreError> {
        let aside = self.aside_dir(id, QUARANTINED);
        match read_pair::<M, S>(&aside)? {
            (Some(_), Some(_)) => self.rename(&aside, &self.dir(id)),
            _ => Err(StoreError::Read { path: aside, source: std::io::ErrorKind::NotFound.into() }),
        }
    }

    /// Marks a quarantined record released: the next start cleans up what its object holds
    /// (it stops a container that still runs) and removes the record.
    pub fn release(&self, id: &str) -> Result<(), StoreError> {
        self.rename(&self.aside_dir(id, QUARANTINED), &self.aside_dir(id, RELEASED))
    }

    /// Removes a released record once its object is cleaned up.
    pub fn forget_released(&self, id: &str) -> Result<(), StoreError> {
        let dir = self.aside_dir(id, RELEASED);
        fs::remove_dir_all(&dir).map_err(|source| StoreError::Write { path: dir, source })
    }

    fn aside_dir(&self, id: &str, what: &str) -> PathBuf {
        self.root.join(format!("{id}.{what}"))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        if to.exists() {
            let source = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a record of that id exists");
            return Err(StoreError::Write { path: to.to_path_buf(), source });
        }
        fs::rename(from, to).map_err(|source| StoreError::Write { path: from.to_path_buf(), source })
    }
}

fn why_unreadable<M: DeserializeOwned, S: DeserializeOwned>(dir: &Path) -> String {
    match read_pair::<M, S>(dir) {
        Err(e) => e.to_string(),
        Ok(_) => "readable by this build: adopt it to take it back".into(),
    }
}

/// A record's meta and status, each None when its file is missing.
fn read_pair<M: DeserializeOwned, S: DeserializeOwned>(dir: &Path) -> Result<(Option<M>, Option<S>), StoreError> {
    let meta = read_versioned::<M>(&dir.join("meta.json"), VERSION)?;
    Ok((meta, read_versioned::<S>(&dir.join("status.json"), VERSION)?))
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
        let again = records.load::<String, u32>().unwrap();
        assert_eq!(again.incomplete.len(), 0);
        assert_eq!(again.quarantined.len(), 1, "a record stays quarantined over restarts");
        assert!(again.quarantined[0].1.contains("meta.json"), "{:?}", again.quarantined);
    }

    #[test]
    fn a_quarantined_record_is_adopted_when_readable_or_released() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::open(dir.path()).unwrap();
        for id in ["a", "b"] {
            records.write_meta(id, &7u32).unwrap();
            records.write_status(id, &1u32).unwrap();
        }
        assert_eq!(records.load::<String, u32>().unwrap().quarantined.len(), 2);
        assert!(records.adopt::<String, u32>("a").is_err(), "still unreadable by this build");
        assert!(records.adopt::<String, u32>("zz").is_err(), "no such record");
        // A build that reads it (here: another meta type) takes it back.
        records.adopt::<u32, u32>("a").unwrap();
        records.release("b").unwrap();
        assert!(records.release("b").is_err(), "released once");
        let loaded = records.load::<u32, u32>().unwrap();
        assert_eq!(loaded.complete, vec![(7, 1)]);
        assert_eq!((loaded.quarantined.len(), loaded.released.clone()), (0, vec!["b".to_string()]));
        records.forget_released("b").unwrap();
        let loaded = records.load::<u32, u32>().unwrap();
        assert!(loaded.released.is_empty() && loaded.quarantined.is_empty());
    }

    #[test]
    fn a_removed_record_stays_removed() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::open(dir.path()).unwrap();
        records.write_meta("a", &"meta-a").unwrap();
        records.write_status("a", &1u32).unwrap();
        records.remove("a").unwrap();
        let late = records.write_status("a", &2u32).unwrap_err();
        assert!(matches!(late, StoreError::Write { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound));
        assert!(!records.dir("a").exists(), "a late status write does not bring the record back");
        // A removal a crash cut short (renamed, not yet deleted) ends at the next load.
        records.write_meta("b", &"meta-b").unwrap();
        records.write_status("b", &1u32).unwrap();
        fs::rename(records.dir("b"), dir.path().join("b.removing")).unwrap();
        let loaded = records.load::<String, u32>().unwrap();
        assert!(loaded.complete.is_empty() && loaded.incomplete.is_empty());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
