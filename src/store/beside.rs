//! Documents kept beside a record (`<root>/<id>/<name>`) by the owner of what they describe
//! (the swap guard's throttle and verdict): versioned like the record and removed with it.
//! One that does not decode is set aside as a record is: renamed `<name>.corrupt`, kept for
//! the operator and never obeyed, and read as absent. A document written before these
//! carried a version (the bare value) reads as version 0.

use std::fs;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::atomic::{replace_versioned, StoreError};
use super::records::{Records, QUARANTINED};

/// What reading a document beside a record found.
#[derive(Debug, PartialEq)]
pub enum Beside<T> {
    Absent,
    Read(T),
    /// It did not decode and was renamed to the path given, with why.
    SetAside(std::path::PathBuf, String),
}

impl Records {
    /// Writes a document beside a record that exists: NotFound once the record is removed.
    pub fn write_beside<T: Serialize>(&self, id: &str, name: &str, version: u32, data: &T) -> Result<(), StoreError> {
        replace_versioned(&self.dir(id).join(name), version, data)
    }

    pub fn read_beside<T: DeserializeOwned>(&self, id: &str, name: &str) -> Result<Beside<T>, StoreError> {
        crate::blocking::check("a document read");
        let path = self.dir(id).join(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Beside::Absent),
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        let why = match decode::<T>(&bytes) {
            Ok(value) => return Ok(Beside::Read(value)),
            Err(e) => e.to_string(),
        };
        let aside = path.with_file_name(format!("{name}.{QUARANTINED}"));
        fs::rename(&path, &aside).map_err(|source| StoreError::Write { path: path.clone(), source })?;
        Ok(Beside::SetAside(aside, why))
    }

    /// The ids of the records that have a document `name` beside them.
    pub fn ids_with_beside(&self, name: &str) -> Vec<String> {
        crate::blocking::check("listing records");
        let Ok(entries) = fs::read_dir(self.dir("")) else { return Vec::new() };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter(|e| e.path().join(name).is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|id| !id.contains('.'))
            .collect();
        ids.sort();
        ids
    }

    /// Removes a document beside a record; one already gone is fine.
    pub fn remove_beside(&self, id: &str, name: &str) -> Result<(), StoreError> {
        let path = self.dir(id).join(name);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::Write { path, source: e }),
            _ => Ok(()),
        }
    }
}

/// `{"version": N, "data": …}`, or the bare value of a document written before versions.
fn decode<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    let value: serde_json::Value = serde_json::from_slice(bytes)?;
    match value {
        serde_json::Value::Object(mut doc)
            if doc.len() == 2 && doc.contains_key("version") && doc.contains_key("data") =>
        {
            serde_json::from_value(doc.remove("data").unwrap_or_default())
        }
        bare => serde_json::from_value(bare),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_read_set_aside_and_removed() {
        let root = tempfile::tempdir().unwrap();
        let records = Records::open(root.path()).unwrap();
        assert!(records.write_beside("a", "doc.json", 1, &vec![1u32]).is_err(), "no record a yet");
        std::fs::create_dir(records.dir("a")).unwrap();
        assert_eq!(records.read_beside::<Vec<u32>>("a", "doc.json").unwrap(), Beside::Absent);
        records.write_beside("a", "doc.json", 1, &vec![1u32, 2]).unwrap();
        assert_eq!(records.read_beside::<Vec<u32>>("a", "doc.json").unwrap(), Beside::Read(vec![1, 2]));
        // A bare document of an earlier build.
        std::fs::write(records.dir("a").join("bare.json"), "[3]").unwrap();
        assert_eq!(records.read_beside::<Vec<u32>>("a", "bare.json").unwrap(), Beside::Read(vec![3]));
        // One that does not decode is kept aside, and then absent.
        std::fs::write(records.dir("a").join("torn.json"), "[3,").unwrap();
        match records.read_beside::<Vec<u32>>("a", "torn.json").unwrap() {
            Beside::SetAside(path, _) => assert_eq!(path, records.dir("a").join("torn.json.corrupt")),
            other => panic!("{other:?}"),
        }
        assert!(records.dir("a").join("torn.json.corrupt").exists());
        assert_eq!(records.read_beside::<Vec<u32>>("a", "torn.json").unwrap(), Beside::Absent);
        std::fs::create_dir(records.dir("b")).unwrap();
        std::fs::create_dir(records.dir("c.corrupt")).unwrap();
        std::fs::write(records.dir("c.corrupt").join("doc.json"), "[1]").unwrap();
        assert_eq!(records.ids_with_beside("doc.json"), ["a"], "b has none; a record set aside is not listed");
        records.remove_beside("a", "doc.json").unwrap();
        records.remove_beside("a", "doc.json").unwrap();
        assert!(records.ids_with_beside("doc.json").is_empty());
        assert_eq!(records.read_beside::<Vec<u32>>("a", "doc.json").unwrap(), Beside::Absent);
    }
}
