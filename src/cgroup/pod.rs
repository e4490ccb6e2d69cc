//! Pod cgroups through youki's libcgroups: the memory reservations of a pod cgroup swapcri owns
//! under the cgroupfs driver, written by libcgroups' cgroup v2 manager as `unified` resources.
//! What libcgroups cannot do for a pod (create an empty parent cgroup, anything under the
//! systemd driver) stays in [`super::memory_files`] and [`super::systemd`];
//! docs/architecture.md says why.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use libcgroups::common::{CgroupManager, ControllerOpt};
use oci_spec::runtime::LinuxResourcesBuilder;

/// Writes `memory.min` and `memory.low` of the cgroup `rel` below the cgroup v2 `root`.
/// libcgroups joins `..` as it comes, so a path leaving the root is refused here.
pub fn write_reservation(root: &Path, rel: &str, min: u64, low: u64) -> io::Result<()> {
    if rel.split('/').any(|part| part == "..") {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("cgroup {rel:?} leaves the cgroup root")));
    }
    let manager = libcgroups::v2::manager::Manager::new(root.to_path_buf(), rel.trim_start_matches('/').into())
        .map_err(io::Error::other)?;
    let unified =
        HashMap::from([("memory.min".to_string(), min.to_string()), ("memory.low".to_string(), low.to_string())]);
    let resources = LinuxResourcesBuilder::default().unified(unified).build().map_err(io::Error::other)?;
    let options =
        ControllerOpt { resources: &resources, disable_oom_killer: false, oom_score_adj: None, freezer_state: None };
    manager.apply(&options).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_land_in_the_pod_cgroup() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
        super::super::memory_files::ensure_memory_path(root.path(), "/swapcri/pod1").unwrap();
        // The kernel makes a group's interface files; libcgroups only opens them.
        for file in ["memory.min", "memory.low"] {
            std::fs::write(root.path().join("swapcri/pod1").join(file), "0\n").unwrap();
        }
        write_reservation(root.path(), "/swapcri/pod1", 3 << 20, 1 << 20).unwrap();
        let read = |f: &str| std::fs::read_to_string(root.path().join("swapcri/pod1").join(f)).unwrap();
        assert_eq!((read("memory.min"), read("memory.low")), ("3145728".into(), "1048576".into()));
        // The kernel replaces a value on each write; a plain file needs emptying for that.
        for file in ["memory.min", "memory.low"] {
            std::fs::write(root.path().join("swapcri/pod1").join(file), "").unwrap();
        }
        write_reservation(root.path(), "/swapcri/pod1", 0, 0).unwrap();
        assert_eq!((read("memory.min"), read("memory.low")), ("0".into(), "0".into()), "zero clears");
    }

    #[test]
    fn a_path_out_of_the_root_is_refused() {
        let top = tempfile::tempdir().unwrap();
        let (root, outside) = (top.path().join("root"), top.path().join("outside"));
        for dir in [&root, &outside] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("cgroup.controllers"), "memory\n").unwrap();
            for file in ["memory.min", "memory.low"] {
                std::fs::write(dir.join(file), "").unwrap();
            }
        }
        // Writable files wait there: only the refusal keeps them empty.
        assert!(write_reservation(&root, "/../outside", 1, 1).is_err());
        assert_eq!(std::fs::read_to_string(outside.join("memory.min")).unwrap(), "");
    }
}
