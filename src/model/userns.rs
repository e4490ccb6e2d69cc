//! A pod's user namespace: the id ranges it maps (checked by `policy::userns`).

use serde::{Deserialize, Serialize};

/// One contiguous range: container ids `container_id..container_id+length` are host ids
/// `host_id..host_id+length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRange {
    pub container_id: u32,
    pub host_id: u32,
    pub length: u32,
}

impl IdRange {
    /// The host id of container id `id`, when the range covers it.
    pub fn host_of(&self, id: u32) -> Option<u32> {
        let offset = id.checked_sub(self.container_id)?;
        (offset < self.length).then(|| self.host_id + offset)
    }

    /// The `/proc/PID/uid_map` line.
    pub fn map_line(&self) -> String {
        format!("{} {} {}\n", self.container_id, self.host_id, self.length)
    }
}

/// A pod's own user namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodUserns {
    pub uids: IdRange,
    pub gids: IdRange,
}

impl PodUserns {
    /// The host uid and gid of the container's root.
    pub fn root(&self) -> (u32, u32) {
        (self.uids.host_id, self.gids.host_id)
    }
}
