//! Where pods and containers go in the cgroup tree, per cgroup driver. With cgroupfs a parent
//! is a path (`/kubepods/burstable/pod<uid>`) and a container a directory below it. With
//! systemd a parent is a slice name (`kubepods-burstable-pod<uid>.slice`), whose dashes spell
//! its place in the tree, and a container a transient scope `swapcri-<id>.scope` in it.

use serde::{Deserialize, Serialize};

/// Who manages the cgroup tree: swapcri itself (cgroupfs) or systemd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupDriver {
    Cgroupfs,
    Systemd,
}

/// The prefix of container scopes (`<prefix>-<id>.scope`) and of the OCI cgroupsPath.
pub const SCOPE_PREFIX: &str = "swapcri";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a systemd slice name: {reason}")]
pub struct SliceError {
    pub name: String,
    pub reason: &'static str,
}

/// Checks a slice unit name: `<a>-<b>-...-<c>.slice` (or the root `-.slice`), where each
/// dash-separated part is non-empty and of the characters unit names allow.
pub fn check_slice(name: &str) -> Result<(), SliceError> {
    let err = |reason| Err(SliceError { name: name.to_string(), reason });
    if name == "-.slice" {
        return Ok(());
    }
    let Some(stem) = name.strip_suffix(".slice") else {
        return err("it does not end in .slice");
    };
    if stem.is_empty() || name.len() > 255 {
        return err("empty or longer than 255 characters");
    }
    if stem.split('-').any(str::is_empty) {
        return err("a leading, trailing or double dash");
    }
    if !stem.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:\\@".contains(&b)) {
        return err("characters a unit name cannot hold");
    }
    Ok(())
}

/// The path of a slice relative to the cgroup root: `a-b-c.slice` is
/// `/a.slice/a-b.slice/a-b-c.slice`; the root slice is `/`.
pub fn slice_path(name: &str) -> Result<String, SliceError> {
    check_slice(name)?;
    if name == "-.slice" {
        return Ok("/".into());
    }
    let stem = name.trim_end_matches(".slice");
    let mut path = String::new();
    let mut end = 0;
    for part in stem.split('-') {
        end += part.len();
        path.push('/');
        path.push_str(&stem[..end]);
        path.push_str(".slice");
        end += 1;
    }
    Ok(path)
}

/// The slice `child` of slice `parent` (`swapcri.slice` + `pod1` = `swapcri-pod1.slice`).
pub fn child_slice(parent: &str, child: &str) -> String {
    match parent {
        "-.slice" => format!("{child}.slice"),
        _ => format!("{}-{child}.slice", parent.trim_end_matches(".slice")),
    }
}

/// The scope unit of a container.
pub fn container_scope(id: &str) -> String {
    format!("{SCOPE_PREFIX}-{id}.scope")
}

/// The cgroup placement rules of the configured driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub driver: CgroupDriver,
}

impl Layout {
    /// Checks a pod's `cgroup_parent` as kubelet sends it. Under systemd the slice may also
    /// come as its path (`/test.slice`, `/a.slice/a-b.slice`), as critest and some tools send
    /// it: the path must be the one systemd gives that slice.
    pub fn check_parent(&self, parent: &str) -> Result<(), String> {
        match self.driver {
            CgroupDriver::Systemd => {
                let slice = self.normalize_parent(parent);
                let path = slice_path(&slice).map_err(|e| format!("cgroup_parent: {e} (systemd driver)"))?;
                if parent.contains('/') && path != parent.trim_end_matches('/') {
                    return Err(format!(
                        "cgroup_parent {parent:?}: systemd puts slice {slice:?} at {path:?} (systemd driver)"
                    ));
                }
                Ok(())
            }
            CgroupDriver::Cgroupfs if parent.ends_with(".slice") && !parent.contains('/') => {
                Err(format!("cgroup_parent {parent:?} is a systemd slice, but the cgroup driver is cgroupfs"))
            }
            CgroupDriver::Cgroupfs if parent.split('/').any(|p| p == "..") => {
                Err(format!("cgroup_parent {parent:?} leaves the cgroup tree"))
            }
            CgroupDriver::Cgroupfs => Ok(()),
        }
    }

    /// The parent as this driver keeps it: under systemd the slice's name, also when it came
    /// as a path.
    pub fn normalize_parent(&self, parent: &str) -> String {
        match self.driver {
            CgroupDriver::Systemd if parent.contains('/') => {
                parent.trim_end_matches('/').rsplit('/').next().unwrap_or_default().to_string()
            }
            _ => parent.to_string(),
        }
    }

    /// The cgroup directory of a pod parent, relative to the cgroup root.
    pub fn parent_path(&self, parent: &str) -> String {
        match self.driver {
            CgroupDriver::Systemd => slice_path(parent).unwrap_or_else(|_| parent.to_string()),
            CgroupDriver::Cgroupfs => parent.to_string(),
        }
    }

    /// The OCI `cgroupsPath` of a container: a path, or `slice:prefix:name` for systemd.
    pub fn oci_cgroups_path(&self, parent: &str, id: &str) -> String {
        match self.driver {
            CgroupDriver::Systemd => format!("{parent}:{SCOPE_PREFIX}:{id}"),
            CgroupDriver::Cgroupfs => format!("{}/{id}", parent.trim_end_matches('/')),
        }
    }

    /// Where the runtime puts a container's cgroup, relative to the cgroup root.
    pub fn container_path(&self, parent: &str, id: &str) -> String {
        match self.driver {
            CgroupDriver::Systemd => {
                format!("{}/{}", self.parent_path(parent).trim_end_matches('/'), container_scope(id))
            }
            CgroupDriver::Cgroupfs => format!("{}/{id}", parent.trim_end_matches('/')),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_names_expand_to_paths() {
        let cases: &[(&str, Option<&str>)] = &[
            ("-.slice", Some("/")),
            ("system.slice", Some("/system.slice")),
            ("kubepods.slice", Some("/kubepods.slice")),
            (
                "kubepods-burstable-pod1234_5678.slice",
                Some("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice"),
            ),
            (
                "kubelet-kubepods-besteffort.slice",
                Some("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice"),
            ),
            ("swapcri-podabc.slice", Some("/swapcri.slice/swapcri-podabc.slice")),
            ("kubepods", None),
            ("kubepods/burstable.slice", None),
            ("-kubepods.slice", None),
            ("kubepods-.slice", None),
            ("kubepods--x.slice", None),
            (".slice", None),
            ("a b.slice", None),
            ("../x.slice", None),
        ];
        for (name, want) in cases {
            assert_eq!(slice_path(name).ok().as_deref(), *want, "{name}");
        }
    }

    #[test]
    fn children_and_scopes() {
        assert_eq!(child_slice("swapcri.slice", "pod1"), "swapcri-pod1.slice");
        assert_eq!(child_slice("-.slice", "swapcri"), "swapcri.slice");
        assert_eq!(container_scope("c1"), "swapcri-c1.scope");
    }

    #[test]
    fn container_places_per_driver() {
        let systemd = Layout { driver: CgroupDriver::Systemd };
        let parent = "kubepods-burstable-pod1.slice";
        assert_eq!(systemd.oci_cgroups_path(parent, "c1"), "kubepods-burstable-pod1.slice:swapcri:c1");
        assert_eq!(
            systemd.container_path(parent, "c1"),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/swapcri-c1.scope"
        );
        assert!(systemd.check_parent(parent).is_ok());
        assert!(systemd.check_parent("/kubepods/burstable").is_err());
        for (path, slice, ok) in [
            ("/test.slice", "test.slice", true),
            ("/kubepods.slice/kubepods-burstable.slice/", "kubepods-burstable.slice", true),
            ("/other.slice/test.slice", "test.slice", false),
            ("/kubepods.slice/x", "x", false),
            ("kubepods.slice", "kubepods.slice", true),
        ] {
            assert_eq!(systemd.normalize_parent(path), slice, "{path}");
            assert_eq!(systemd.check_parent(path).is_ok(), ok, "{path}: {:?}", systemd.check_parent(path));
        }
        let cgroupfs = Layout { driver: CgroupDriver::Cgroupfs };
        assert_eq!(cgroupfs.oci_cgroups_path("/kubepods/pod1/", "c1"), "/kubepods/pod1/c1");
        assert_eq!(cgroupfs.container_path("/kubepods/pod1", "c1"), "/kubepods/pod1/c1");
        assert_eq!(cgroupfs.parent_path("/kubepods/pod1"), "/kubepods/pod1");
        assert!(cgroupfs.check_parent("/kubepods/burstable/pod1").is_ok());
        assert!(cgroupfs.check_parent("kubepods-pod1.slice").is_err(), "a slice needs the systemd driver");
        assert!(cgroupfs.check_parent("/kubepods/../../etc").is_err());
    }
}
