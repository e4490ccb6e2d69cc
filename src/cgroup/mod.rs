//! cgroup facts and housekeeping: the host's cgroup mode, where a process's cgroups are,
//! OOM kills (oom.rs), ending every process of a group (kill.rs), removal of cgroups swapcri created, and moving helper processes out of
//! the daemon's cgroup.

pub mod control;
pub mod detail;
pub mod files;
pub mod kill;
pub mod memory_files;
pub mod oom;
pub mod pod;
pub mod pressure;
pub mod stats;
pub mod swap;
pub mod systemd;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::model::node::CgroupMode;

/// Probes how the host mounts cgroups at `root` (normally /sys/fs/cgroup), as libcgroups
/// does; a root it cannot classify is treated as cgroup v1.
pub fn probe_mode(root: &Path) -> CgroupMode {
    use libcgroups::common::{get_cgroup_setup_with_root, CgroupSetup};
    match get_cgroup_setup_with_root(root) {
        Ok(CgroupSetup::Unified) => CgroupMode::Unified,
        Ok(CgroupSetup::Hybrid) => CgroupMode::Hybrid,
        _ => CgroupMode::Legacy,
    }
}

/// A mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub mountpoint: PathBuf,
    pub v2: bool,
    /// Mount options (v1 controllers such as `memory`, or `name=systemd`).
    pub options: Vec<String>,
}

/// Where cgroup `rel` sits in the cgroup v1 hierarchy of `controller`, when mounted.
pub fn v1_dir(hierarchies: &[Hierarchy], controller: &str, rel: &str) -> Option<PathBuf> {
    hierarchies
        .iter()
        .find(|h| !h.v2 && h.options.iter().any(|o| o == controller))
        .map(|h| h.mountpoint.join(rel.trim_start_matches('/')))
}

/// The cgroup hierarchies mounted in this mount namespace.
pub fn hierarchies() -> Vec<Hierarchy> {
    fs::read_to_string("/proc/self/mountinfo").map(|s| parse_mountinfo(&s)).unwrap_or_default()
}

fn parse_mountinfo(text: &str) -> Vec<Hierarchy> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split_whitespace();
            let fstype = right.next()?;
            let super_options = right.nth(1).unwrap_or("");
            let mountpoint = left.split_whitespace().nth(4)?;
            match fstype {
                "cgroup2" => Some(Hierarchy { mountpoint: mountpoint.into(), v2: true, options: Vec::new() }),
                "cgroup" => Some(Hierarchy {
                    mountpoint: mountpoint.into(),
                    v2: false,
                    options: super_options.split(',').map(str::to_string).collect(),
                }),
                _ => None,
            }
        })
        .collect()
}

/// The directory of `pid`'s memory cgroup (v2, or the v1 memory controller).
pub fn memory_cgroup_dir(pid: i32, hierarchies: &[Hierarchy]) -> Option<PathBuf> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    memory_dir_from(&text, hierarchies)
}

/// The cgroup `pid` is in, relative to the hierarchy root (the memory controller's on v1):
/// where a runtime really put a container, which need not be the path it was asked for
/// (crun with the systemd driver nests the process in a `container` sub-cgroup).
pub fn cgroup_of(pid: i32, hierarchies: &[Hierarchy]) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    cgroup_from(&text, hierarchies)
}

fn cgroup_from(proc_cgroup: &str, hierarchies: &[Hierarchy]) -> Option<String> {
    let dir = memory_dir_from(proc_cgroup, hierarchies)?;
    let root = hierarchies.iter().find(|h| dir.starts_with(&h.mountpoint))?;
    Some(format!("/{}", dir.strip_prefix(&root.mountpoint).ok()?.display()))
}

fn memory_dir_from(proc_cgroup: &str, hierarchies: &[Hierarchy]) -> Option<PathBuf> {
    let v1 = hierarchies.iter().find(|h| !h.v2 && h.options.iter().any(|o| o == "memory"));
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        match v1 {
            Some(h) if controllers.split(',').any(|c| c == "memory") => return Some(h.mountpoint.join(rel)),
            None if id == "0" && controllers.is_empty() => {
                let v2 = hierarchies.iter().find(|h| h.v2)?;
                return Some(v2.mountpoint.join(rel));
            }
            _ => {}
        }
    }
    None
}

/// Removes the cgroup `rel` (relative to each hierarchy's root) and anything left below
/// it, in every hierarchy. Missing directories are fine.
pub fn remove(rel: &str, hierarchies: &[Hierarchy]) -> io::Result<()> {
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        return Ok(());
    }
    for h in hierarchies {
        remove_tree(&h.mountpoint.join(rel))?;
    }
    Ok(())
}

/// cgroup directories go with rmdir, deepest first; their files cannot be unlinked.
fn remove_tree(dir: &Path) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_tree(&entry.path())?;
        }
    }
    match fs::remove_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Moves `pid` into the cgroup `rel` of the hierarchies a service manager tracks
/// processes by (v2 and v1 `name=systemd`), so stopping the daemon's service does not
/// kill the processes that keep containers alive.
pub fn move_to(rel: &str, pid: u32, hierarchies: &[Hierarchy]) -> io::Result<()> {
    let rel = rel.trim_start_matches('/');
    for h in hierarchies.iter().filter(|h| h.v2 || h.options.iter().any(|o| o == "name=systemd")) {
        let dir = h.mountpoint.join(rel);
        fs::create_dir_all(&dir)?;
        fs::write(dir.join("cgroup.procs"), pid.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
31 25 0:28 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,memory
32 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct
";

    #[test]
    fn mountinfo_and_memory_dirs() {
        let h = parse_mountinfo(HYBRID);
        assert_eq!(h.len(), 4);
        assert!(h[0].v2);
        assert_eq!(h[2].options, vec!["rw", "memory"]);
        let proc_cgroup = "12:memory:/swapcri/pod/c1\n4:cpu,cpuacct:/swapcri/pod/c1\n0::/swapcri/pod/c1\n";
        assert_eq!(memory_dir_from(proc_cgroup, &h), Some(PathBuf::from("/sys/fs/cgroup/memory/swapcri/pod/c1")));
        let unified = parse_mountinfo("30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
        assert_eq!(memory_dir_from("0::/kubepods/x\n", &unified), Some(PathBuf::from("/sys/fs/cgroup/kubepods/x")));
        assert_eq!(cgroup_from(proc_cgroup, &h).as_deref(), Some("/swapcri/pod/c1"));
        // crun with the systemd driver: the process sits one level below the scope.
        let nested = "0::/kubepods.slice/kubepods-burstable.slice/crun-abc.scope/container\n";
        assert_eq!(
            cgroup_from(nested, &unified).as_deref(),
            Some("/kubepods.slice/kubepods-burstable.slice/crun-abc.scope/container")
        );
    }

    #[test]
    fn removal_is_deepest_first_and_tolerates_absence() {
        let dir = tempfile::tempdir().unwrap();
        let h = vec![Hierarchy { mountpoint: dir.path().into(), v2: true, options: vec![] }];
        fs::create_dir_all(dir.path().join("swapcri/pod/c1")).unwrap();
        remove("/swapcri/pod", &h).unwrap();
        assert!(!dir.path().join("swapcri/pod").exists());
        assert!(dir.path().join("swapcri").exists(), "the parent stays");
        remove("/swapcri/pod", &h).unwrap();
    }
}
