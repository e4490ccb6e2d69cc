//! Mounts of a container: the standard kernel filesystems, the pod's shared files, and
//! the request's bind mounts. The one place tmpfs options are built.

use std::path::{Path, PathBuf};

use crate::cri;
use oci_spec::runtime::Mount;

/// Options of a tmpfs swapcri mounts itself or puts in a spec; `noswap` (when the kernel
/// supports it) keeps the contents in RAM.
pub fn tmpfs_options(mode: u32, size_bytes: Option<u64>, noswap: bool) -> Vec<String> {
    let mut options = vec!["nosuid".to_string(), "nodev".to_string(), format!("mode={mode:o}")];
    if let Some(size) = size_bytes {
        options.push(format!("size={}k", size.div_ceil(1024)));
    }
    if noswap {
        options.push("noswap".to_string());
    }
    options
}

fn mount(destination: &str, typ: &str, source: &str, options: &[&str]) -> Mount {
    let mut m = Mount::default();
    m.set_destination(PathBuf::from(destination));
    m.set_typ(Some(typ.to_string()));
    m.set_source(Some(PathBuf::from(source)));
    m.set_options(Some(options.iter().map(|s| s.to_string()).collect()));
    m
}

pub fn bind(source: &Path, destination: &str, readonly: bool, propagation: &str) -> Mount {
    let mut options = vec!["rbind", propagation];
    options.push(if readonly { "ro" } else { "rw" });
    let mut m = mount(destination, "bind", "", &options);
    m.set_source(Some(source.to_path_buf()));
    m
}

/// proc, /dev, devpts, mqueue, sysfs and cgroup; sysfs and cgroup read-only unless privileged.
pub fn standard(privileged: bool, noswap: bool) -> Vec<Mount> {
    let sys_mode = if privileged { "rw" } else { "ro" };
    let mut dev = mount("/dev", "tmpfs", "tmpfs", &[]);
    let mut dev_options = tmpfs_options(0o755, Some(64 * 1024 * 1024), noswap);
    dev_options.retain(|o| o != "nodev");
    dev_options.push("strictatime".into());
    dev.set_options(Some(dev_options));
    vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"]),
        dev,
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"],
        ),
        mount("/dev/mqueue", "mqueue", "mqueue", &["nosuid", "noexec", "nodev"]),
        mount("/sys", "sysfs", "sysfs", &["nosuid", "noexec", "nodev", sys_mode]),
        mount("/sys/fs/cgroup", "cgroup", "cgroup", &["nosuid", "noexec", "nodev", "relatime", sys_mode]),
    ]
}

/// The request's mounts as OCI bind mounts. A recursive read-only mount needs `readonly`,
/// private propagation (the CRI's rules) and a handler with `rro` (`rro_supported`); an
/// id-mapped one (kubelet maps a user-namespaced pod's volumes) one uid and one gid range
/// and a handler that maps mounts (`idmap_supported`).
pub fn from_request(mounts: &[cri::Mount], rro_supported: bool, idmap_supported: bool) -> Result<Vec<Mount>, String> {
    mounts
        .iter()
        .map(|m| {
            if !m.container_path.starts_with('/') {
                return Err(format!("mount container path {:?} is not absolute", m.container_path));
            }
            if !m.host_path.starts_with('/') {
                return Err(format!("mount host path {:?} is not absolute", m.host_path));
            }
            let propagation = match cri::MountPropagation::try_from(m.propagation) {
                Ok(cri::MountPropagation::PropagationPrivate) => "rprivate",
                Ok(cri::MountPropagation::PropagationHostToContainer) => "rslave",
                Ok(cri::MountPropagation::PropagationBidirectional) => "rshared",
                Err(_) => return Err(format!("unknown mount propagation {}", m.propagation)),
            };
            let mut mount = bind(Path::new(&m.host_path), &m.container_path, m.readonly, propagation);
            if m.recursive_read_only {
                let at = &m.container_path;
                if !m.readonly {
                    return Err(format!("recursive read-only mount {at:?} must also be read-only"));
                }
                if propagation != "rprivate" {
                    return Err(format!(
                        "recursive read-only mount {at:?} needs private propagation, not {propagation}"
                    ));
                }
                if !rro_supported {
                    return Err(format!(
                        "recursive read-only mount {at:?}: the runtime handler or the kernel (5.12+) lacks support"
                    ));
                }
                let mut options = mount.options().clone().unwrap_or_default();
                options.push("rro".into());
                mount.set_options(Some(options));
            }
            if !m.uid_mappings.is_empty() || !m.gid_mappings.is_empty() {
                id_map(&mut mount, m, idmap_supported)?;
            }
            Ok(mount)
        })
        .collect()
}

fn id_map(mount: &mut Mount, m: &cri::Mount, supported: bool) -> Result<(), String> {
    let at = &m.container_path;
    if !supported {
        return Err(format!("id-mapped mount {at:?}: the runtime handler cannot map mounts"));
    }
    let one = |kind: &str, list: &[cri::IdMapping]| match list {
        [only] if only.length > 0 => Ok(crate::policy::userns::oci_mapping(&crate::model::userns::IdRange {
            container_id: only.container_id,
            host_id: only.host_id,
            length: only.length,
        })),
        _ => Err(format!("id-mapped mount {at:?} needs exactly one non-empty {kind} mapping")),
    };
    mount.set_uid_mappings(Some(vec![one("uid", &m.uid_mappings)?]));
    mount.set_gid_mappings(Some(vec![one("gid", &m.gid_mappings)?]));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmpfs_and_request_mounts() {
        assert_eq!(
            tmpfs_options(0o1777, Some(64 * 1024 * 1024), false),
            vec!["nosuid", "nodev", "mode=1777", "size=65536k"]
        );
        assert_eq!(tmpfs_options(0o755, None, false), vec!["nosuid", "nodev", "mode=755"]);
        assert_eq!(tmpfs_options(0o1777, Some(1000), true), vec!["nosuid", "nodev", "mode=1777", "size=1k", "noswap"]);
        let dev = standard(false, true).into_iter().find(|m| m.destination() == Path::new("/dev")).unwrap();
        assert!(dev.options().as_ref().unwrap().contains(&"noswap".to_string()));
        let dev = standard(false, false).into_iter().find(|m| m.destination() == Path::new("/dev")).unwrap();
        assert!(!dev.options().as_ref().unwrap().contains(&"noswap".to_string()));
        let request = [cri::Mount {
            container_path: "/data".into(),
            host_path: "/srv/data".into(),
            readonly: true,
            propagation: cri::MountPropagation::PropagationHostToContainer as i32,
            ..Default::default()
        }];
        let m = &from_request(&request, false, false).unwrap()[0];
        assert_eq!(m.options().as_ref().unwrap(), &vec!["rbind".to_string(), "rslave".into(), "ro".into()]);
        let relative = [cri::Mount { container_path: "data".into(), host_path: "/x".into(), ..Default::default() }];
        assert!(from_request(&relative, false, false).is_err());
        assert!(
            standard(false, false)
                .iter()
                .any(|m| m.destination() == Path::new("/sys")
                    && m.options().as_ref().unwrap().contains(&"ro".to_string()))
        );
    }

    #[test]
    fn recursive_read_only_rules() {
        let rro = |readonly, propagation: cri::MountPropagation| cri::Mount {
            container_path: "/m".into(),
            host_path: "/h".into(),
            readonly,
            propagation: propagation as i32,
            recursive_read_only: true,
            ..Default::default()
        };
        use cri::MountPropagation::*;
        let cases = [
            (rro(true, PropagationPrivate), true, Ok(vec!["rbind", "rprivate", "ro", "rro"])),
            (rro(true, PropagationPrivate), false, Err("lacks support")),
            (rro(false, PropagationPrivate), true, Err("must also be read-only")),
            (rro(true, PropagationHostToContainer), true, Err("needs private propagation")),
            (rro(true, PropagationBidirectional), true, Err("needs private propagation")),
        ];
        let mapped = cri::Mount {
            container_path: "/m".into(),
            host_path: "/h".into(),
            uid_mappings: vec![cri::IdMapping { container_id: 0, host_id: 1000, length: 10 }],
            gid_mappings: vec![cri::IdMapping { container_id: 0, host_id: 1000, length: 10 }],
            ..Default::default()
        };
        let err = from_request(std::slice::from_ref(&mapped), false, false).unwrap_err();
        assert!(err.contains("cannot map mounts"), "{err}");
        assert!(from_request(std::slice::from_ref(&mapped), false, true).is_ok());
        for (mount, supported, want) in cases {
            let got = from_request(std::slice::from_ref(&mount), supported, false);
            match (got, want) {
                (Ok(m), Ok(options)) => assert_eq!(m[0].options().as_ref().unwrap(), &options),
                (Err(e), Err(part)) => assert!(e.contains(part), "{e}"),
                (got, want) => panic!("{mount:?} supported={supported}: got {got:?}, want {want:?}"),
            }
        }
    }
}
