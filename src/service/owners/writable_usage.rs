//! Writable-layer usage of each container (bytes and inodes of its upper directory), walked
//! in the background: stats calls read the last walk instead of walking every container's
//! files per call. A container the last walk did not see yet is walked once on demand.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::model::ids::ContainerId;

/// How often the writable layers are walked again (kubelet asks for stats every 10 s).
pub const REFRESH: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct WritableUsage {
    entries: Mutex<HashMap<ContainerId, Option<(u64, u64)>>>,
}

impl WritableUsage {
    pub fn get(&self, id: &ContainerId) -> Option<Option<(u64, u64)>> {
        self.lock().get(id).copied()
    }

    pub fn set(&self, id: &ContainerId, usage: Option<(u64, u64)>) {
        self.lock().insert(id.clone(), usage);
    }

    /// Replaces every entry with a fresh walk (containers gone since are dropped).
    pub fn replace(&self, fresh: HashMap<ContainerId, Option<(u64, u64)>>) {
        *self.lock() = fresh;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ContainerId, Option<(u64, u64)>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kept_until_replaced_by_a_fresh_walk() {
        let usage = WritableUsage::default();
        let (a, b) = (ContainerId::generate(), ContainerId::generate());
        assert_eq!(usage.get(&a), None);
        usage.set(&a, Some((4096, 1)));
        usage.set(&b, None);
        assert_eq!(usage.get(&a), Some(Some((4096, 1))));
        assert_eq!(usage.get(&b), Some(None));
        usage.replace([(b.clone(), Some((8192, 2)))].into());
        assert_eq!(usage.get(&a), None, "a container the walk no longer saw is dropped");
        assert_eq!(usage.get(&b), Some(Some((8192, 2))));
    }
}
