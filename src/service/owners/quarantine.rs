//! `swapcri quarantine`: the operator's view of the records this build could not read, and
//! the two ways out. Adopting takes a record back (once a build reads it, or after a
//! repair); releasing lets the next start clean up what the object holds. Both act on the
//! state directory and take effect when the daemon starts next: restarting it leaves running
//! containers as they are.

use std::path::Path;

use crate::model::container::{ContainerMeta, ContainerStatus};
use crate::model::sandbox::{SandboxMeta, SandboxStatus};
use crate::store::{Records, StoreError};

/// One record kept aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aside {
    /// "sandbox" or "container".
    pub kind: &'static str,
    pub id: String,
    /// Why it cannot be read, or "released" when the next start cleans it up.
    pub why: String,
}

#[derive(Debug, thiserror::Error)]
pub enum QuarantineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no quarantined record matches {0:?}")]
    NotFound(String),
    #[error("{0:?} matches more than one quarantined record: give more of the id")]
    Ambiguous(String),
}

struct Stores {
    sandboxes: Records,
    containers: Records,
}

fn open(state_root: &Path) -> Result<Stores, StoreError> {
    Ok(Stores {
        sandboxes: Records::open(&state_root.join("sandboxes"))?,
        containers: Records::open(&state_root.join("containers"))?,
    })
}

/// Every record kept aside under `state_root`: pods first.
pub fn list(state_root: &Path) -> Result<Vec<Aside>, QuarantineError> {
    let stores = open(state_root)?;
    let mut all = Vec::new();
    let pods = stores.sandboxes.aside::<SandboxMeta, SandboxStatus>()?;
    let containers = stores.containers.aside::<ContainerMeta, ContainerStatus>()?;
    for (kind, (quarantined, released)) in [("sandbox", pods), ("container", containers)] {
        all.extend(quarantined.into_iter().map(|(id, why)| Aside { kind, id, why }));
        all.extend(released.into_iter().map(|id| Aside { kind, id, why: "released".into() }));
    }
    Ok(all)
}

/// The one quarantined (not released) record whose id starts with `prefix`.
fn find(state_root: &Path, prefix: &str) -> Result<Aside, QuarantineError> {
    if prefix.is_empty() {
        return Err(QuarantineError::NotFound(prefix.into()));
    }
    let mut matches = list(state_root)?.into_iter().filter(|a| a.why != "released" && a.id.starts_with(prefix));
    match (matches.next(), matches.next()) {
        (Some(one), None) => Ok(one),
        (Some(_), Some(_)) => Err(QuarantineError::Ambiguous(prefix.into())),
        _ => Err(QuarantineError::NotFound(prefix.into())),
    }
}

/// Takes the record back: it must decode with this build.
pub fn adopt(state_root: &Path, prefix: &str) -> Result<Aside, QuarantineError> {
    let found = find(state_root, prefix)?;
    let stores = open(state_root)?;
    match found.kind {
        "sandbox" => stores.sandboxes.adopt::<SandboxMeta, SandboxStatus>(&found.id)?,
        _ => stores.containers.adopt::<ContainerMeta, ContainerStatus>(&found.id)?,
    }
    Ok(found)
}

/// Marks the record released: the next start stops and removes what it holds.
pub fn release(state_root: &Path, prefix: &str) -> Result<Aside, QuarantineError> {
    let found = find(state_root, prefix)?;
    let stores = open(state_root)?;
    match found.kind {
        "sandbox" => stores.sandboxes.release(&found.id)?,
        _ => stores.containers.release(&found.id)?,
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quarantine(root: &Path, kind: &str, id: &str, meta: &serde_json::Value) {
        let dir = root.join(kind).join(format!("{id}.corrupt"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("meta.json"),
            serde_json::to_vec(&serde_json::json!({"version": 1, "data": meta})).unwrap(),
        )
        .unwrap();
        let status = serde_json::json!({"version": 1, "data": {}});
        std::fs::write(dir.join("status.json"), serde_json::to_vec(&status).unwrap()).unwrap();
    }

    #[test]
    fn records_aside_are_listed_adopted_when_readable_and_released() {
        let root = tempfile::tempdir().unwrap();
        let pod = "a".repeat(64);
        let container = format!("ab{}", "c".repeat(62));
        quarantine(root.path(), "sandboxes", &pod, &serde_json::json!({"id": pod, "config": 7}));
        let readable = serde_json::json!({"id": container, "sandbox_id": pod, "config": {}});
        quarantine(root.path(), "containers", &container, &readable);

        let listed = list(root.path()).unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!((listed[0].kind, listed[0].id.as_str()), ("sandbox", pod.as_str()));
        assert!(listed[0].why.contains("meta.json"), "{}", listed[0].why);
        assert!(listed[1].why.contains("readable by this build"), "{}", listed[1].why);

        assert!(matches!(adopt(root.path(), "a"), Err(QuarantineError::Ambiguous(_))));
        assert!(matches!(adopt(root.path(), "f"), Err(QuarantineError::NotFound(_))));
        assert!(matches!(adopt(root.path(), ""), Err(QuarantineError::NotFound(_))));
        assert!(matches!(adopt(root.path(), "aaa"), Err(QuarantineError::Store(_))), "the pod is still unreadable");
        assert_eq!(adopt(root.path(), "ab").unwrap().kind, "container");
        assert!(root.path().join("containers").join(&container).join("meta.json").exists());
        assert_eq!(release(root.path(), "aaa").unwrap().kind, "sandbox");
        let listed = list(root.path()).unwrap();
        assert_eq!(listed, vec![Aside { kind: "sandbox", id: pod.clone(), why: "released".into() }]);
        assert!(matches!(release(root.path(), "aaa"), Err(QuarantineError::NotFound(_))), "released once");
    }
}
