//! A runtime handler as configured and resolved: which OCI runtime, its binary and root (the
//! daemon and its monitors drive the same one).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Which OCI runtime a handler drives; they share runc's command line but differ in what
/// they report and support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Runc,
    Crun,
}

impl Engine {
    /// The engine a binary is, by its file name (`crun`, `crun-1.8`: crun; anything else: runc).
    pub fn of_binary(binary: &Path) -> Engine {
        match binary.file_name().and_then(|n| n.to_str()) {
            Some(name) if name.starts_with("crun") => Engine::Crun,
            _ => Engine::Runc,
        }
    }
}

/// A runtime handler as the daemon and its monitors know it (serialized into the monitor's
/// configuration, so a monitor drives the same runtime the daemon chose).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerSpec {
    /// The handler's name (RuntimeClass handler), used in messages.
    pub name: String,
    pub engine: Engine,
    pub binary: PathBuf,
    /// The runtime's state directory (`--root`).
    pub root: PathBuf,
    /// Create without pivot_root (a root filesystem pivot_root cannot leave, e.g. an initramfs).
    pub no_pivot: bool,
    /// Containers' cgroups are systemd scopes (`--systemd-cgroup`, on every call).
    #[serde(default)]
    pub systemd_cgroup: bool,
    /// Prefixes of runtime-interpreted annotations passed to this runtime.
    #[serde(default)]
    pub allowed_annotations: Vec<String>,
}
