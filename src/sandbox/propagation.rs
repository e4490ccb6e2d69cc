//! Volumes with mount propagation: a host path mounted `rshared` or `rslave` only
//! propagates when the host side is itself a shared mount. kubelet makes its own
//! directories shared; any other source is made shared here, by bind-mounting it onto
//! itself (when it is not a mount point already) and marking it shared.

use std::path::{Path, PathBuf};

use nix::mount::{mount, MsFlags};

/// One line of /proc/self/mountinfo: the mount point and whether it is shared.
#[derive(Debug, PartialEq, Eq)]
struct MountInfo {
    mount_point: PathBuf,
    shared: bool,
}

fn parse_line(line: &str) -> Option<MountInfo> {
    let fields: Vec<&str> = line.split(' ').collect();
    let point = fields.get(4)?;
    let separator = fields.iter().position(|f| *f == "-")?;
    let shared = fields[6..separator].iter().any(|f| f.starts_with("shared:"));
    // Spaces and other odd bytes in paths are octal escapes (\040).
    let unescaped = point.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\");
    Some(MountInfo { mount_point: PathBuf::from(unescaped), shared })
}

/// The mount `path` lives on: the last listed mount whose point is an ancestor of it
/// (later mounts cover earlier ones at the same point).
fn containing_mount(mountinfo: &str, path: &Path) -> Option<MountInfo> {
    mountinfo.lines().filter_map(parse_line).filter(|m| path.starts_with(&m.mount_point)).fold(
        None,
        |best: Option<MountInfo>, m| match &best {
            Some(b) if b.mount_point.components().count() > m.mount_point.components().count() => best,
            _ => Some(m),
        },
    )
}

/// What `ensure_shared` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shared {
    /// The path already sat on a shared mount.
    Already,
    /// The mount point at the path was marked shared.
    Marked,
    /// A bind mount of the path onto itself was made and marked shared; it is the caller's
    /// to unmount when no container needs it any more.
    Bound(PathBuf),
}

/// Makes `path` a shared mount unless the mount it lives on already is.
pub fn ensure_shared(path: &Path) -> std::io::Result<Shared> {
    let path = path.canonicalize()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let containing = containing_mount(&mountinfo, &path);
    if containing.as_ref().is_some_and(|m| m.shared) {
        return Ok(Shared::Already);
    }
    let bound = containing.is_none_or(|m| m.mount_point != path);
    if bound {
        mount(Some(&path), &path, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)?;
    }
    mount(None::<&str>, &path, None::<&str>, MsFlags::MS_SHARED | MsFlags::MS_REC, None::<&str>)?;
    Ok(if bound { Shared::Bound(path) } else { Shared::Marked })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 27 0:27 / /var/lib/kubelet rw,relatime shared:5 - ext4 /dev/vda rw
31 27 0:28 / /tmp/with\\040space rw,relatime master:3 - tmpfs tmpfs rw
32 30 0:29 / /var/lib/kubelet/pods/x rw,relatime - tmpfs tmpfs rw
";

    #[test]
    fn finds_the_covering_mount_and_its_propagation() {
        let at = |p: &str| containing_mount(MOUNTINFO, Path::new(p)).map(|m| (m.mount_point, m.shared));
        assert_eq!(at("/srv/data"), Some(("/".into(), false)));
        assert_eq!(at("/var/lib/kubelet/volumes/v"), Some(("/var/lib/kubelet".into(), true)));
        assert_eq!(at("/var/lib/kubelet/pods/x/vol"), Some(("/var/lib/kubelet/pods/x".into(), false)));
        assert_eq!(at("/tmp/with space/d"), Some(("/tmp/with space".into(), false)));
        assert_eq!(at("/var/lib/kubeletx"), Some(("/".into(), false)), "a path prefix is not an ancestor");
    }
}
