//! A cgroup's statistics at a point in time, per container and pod, and a directory's disk
//! usage.

use std::path::Path;

use crate::model::cgroup_stats::CgroupStats;

use crate::service::owners::objects::{Container, Sandbox};

/// One cgroup's statistics at a point in time.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub timestamp: i64,
    pub stats: CgroupStats,
    pub nano_cores: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct ContainerSample {
    pub container: Container,
    pub sample: Sample,
    /// Writable layer: bytes and inodes used, and the directory it lives in.
    pub writable: Option<(u64, u64)>,
    pub writable_mountpoint: String,
}

#[derive(Debug, Clone)]
pub struct PodSample {
    pub sandbox: Sandbox,
    pub sample: Sample,
    pub containers: Vec<ContainerSample>,
    /// The pod network's interfaces, loopback left out: None for a host-network pod, or
    /// with no running container to look through.
    pub interfaces: Option<Vec<crate::network::interfaces::InterfaceCounters>>,
    /// Processes in the pod's running containers.
    pub processes: Option<u64>,
}

/// Bytes (allocated) and inodes under `dir`, hard links counted once.
pub(in crate::service) fn disk_usage(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    if !dir.is_dir() {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    let (mut bytes, mut inodes) = (0u64, 0u64);
    for entry in walkdir::WalkDir::new(dir).into_iter().flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.nlink() > 1 && !meta.is_dir() && !seen.insert(meta.ino()) {
            continue;
        }
        bytes += meta.blocks() * 512;
        inodes += 1;
    }
    Some((bytes, inodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_usage_counts_blocks_and_inodes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![1u8; 10000]).unwrap();
        std::fs::hard_link(dir.path().join("a"), dir.path().join("b")).unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let (bytes, inodes) = disk_usage(dir.path()).unwrap();
        assert_eq!(inodes, 3, "root, d and one of the linked files");
        assert!(bytes >= 10000, "{bytes}");
        assert_eq!(disk_usage(&dir.path().join("missing")), None);
    }
}
