//! What a check reads and what it reports.

use std::path::PathBuf;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Info,
    Warn,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    /// What was found.
    pub found: String,
    /// What to do (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub advice: String,
}

/// Where the node's files are and what the operator told us.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub root: PathBuf,
    /// The system daemons' cgroup, relative to the cgroup root.
    pub system_cgroup: String,
    /// kubelet's hard eviction threshold for memory.available, in bytes.
    pub eviction_threshold: Option<u64>,
    /// The configured cgroup driver.
    pub cgroup_driver: crate::config::CgroupDriver,
    /// swapcri's state directory, for the records kept aside (None: not checked).
    pub state_root: Option<PathBuf>,
}

impl Inputs {
    pub fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }
}
