//! CRI container config + pod context + image defaults + node facts → OCI runtime spec, built
//! from named steps: process, namespaces, mounts, resources, devices, security. The
//! resources step is also what UpdateContainerResources applies, so create and update
//! cannot drift.

mod devices;
mod input;
mod namespaces;
mod process;
mod resources;
mod security;

pub use input::{BuiltSpec, ContainerInput, Device, ImageDefaults, PodContext};
pub use process::{apparmor_request, command_line, environment, oom_score_adj};
pub use resources::{linux_resources, update_document};

use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxBuilder, Root, Spec};

use super::{NodeFacts, PolicyError};
use crate::cri;

pub fn build(input: &ContainerInput, node: &NodeFacts) -> Result<BuiltSpec, PolicyError> {
    let linux_config = input.config.linux.clone().unwrap_or_default();
    let security = linux_config.security_context.clone().unwrap_or_default();
    let requested = linux_config.resources.clone().unwrap_or_default();
    let mut warnings = Vec::new();
    let (process, cap_names) = process::with_process(input, &security, &requested, node, &mut warnings)?;
    let namespaces = namespaces::with_namespaces(input, &security, node)?;
    let all_mounts = with_mounts(input, &security, node)?;
    let mut resources = resources::linux_resources(&requested, &input.memory_unified, node, &mut warnings);
    let (devices, device_rules) = devices::with_devices(&input.devices, security.privileged);
    resources.set_devices(Some(device_rules));
    let confinement = security::with_security(&security, &cap_names, input.localhost_seccomp.clone())?;

    let mut linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .resources(resources)
        .cgroups_path(PathBuf::from(input.pod.cgroup_layout.oci_cgroups_path(&input.pod.cgroup_parent, input.id)))
        .devices(devices)
        .sysctl(input.pod.sysctls.clone())
        .masked_paths(confinement.masked_paths)
        .readonly_paths(confinement.readonly_paths)
        .build()
        .map_err(|e| PolicyError::Invalid(format!("linux section: {e}")))?;
    linux.set_seccomp(confinement.seccomp);
    if let Some((_, map)) = &input.pod.userns {
        linux.set_uid_mappings(Some(vec![crate::policy::userns::oci_mapping(&map.uids)]));
        linux.set_gid_mappings(Some(vec![crate::policy::userns::oci_mapping(&map.gids)]));
    }
    linux.set_rootfs_propagation(rootfs_propagation(&input.config.mounts));

    let mut root = Root::default();
    root.set_path(input.rootfs.clone());
    root.set_readonly(Some(security.readonly_rootfs));
    let mut spec = Spec::default();
    spec.set_hostname(None);
    spec.set_process(Some(process));
    spec.set_root(Some(root));
    spec.set_mounts(Some(all_mounts));
    spec.set_linux(Some(linux));
    let annotations =
        crate::policy::annotations::filter(&input.config.annotations, input.allowed_annotations, &mut warnings);
    spec.set_annotations(Some(annotations));
    Ok(BuiltSpec { spec, warnings, user: input.user.clone() })
}

/// A bidirectional mount needs the container's root to be a shared mount, and a
/// host-to-container one a slave, or propagation stops at the root.
fn rootfs_propagation(mounts: &[cri::Mount]) -> Option<String> {
    let has = |p: cri::MountPropagation| mounts.iter().any(|m| m.propagation == p as i32);
    if has(cri::MountPropagation::PropagationBidirectional) {
        Some("rshared".into())
    } else if has(cri::MountPropagation::PropagationHostToContainer) {
        Some("rslave".into())
    } else {
        None
    }
}

/// Standard mounts, the pod's files, then the request's (the request wins for the same
/// destination).
fn with_mounts(
    input: &ContainerInput,
    security: &cri::LinuxContainerSecurityContext,
    node: &NodeFacts,
) -> Result<Vec<oci_spec::runtime::Mount>, PolicyError> {
    let requested = super::mounts::from_request(&input.config.mounts, input.recursive_read_only, input.idmap_mounts)
        .map_err(PolicyError::Invalid)?;
    let taken = |dest: &str| requested.iter().any(|m| m.destination() == Path::new(dest));
    // The kernel takes `noswap` only from the initial user namespace; the runtime mounts the
    // container's /dev inside the pod's.
    let noswap = node.noswap.supported() && input.pod.userns.is_none();
    let mut all = super::mounts::standard(security.privileged, noswap);
    if input.pod.userns.is_some() && input.pod.net_ns.is_none() {
        // sysfs belongs to a network namespace; the host's is not the pod user namespace's to
        // mount, so the container sees the host's /sys through a bind mount.
        for m in all.iter_mut().filter(|m| m.destination() == Path::new("/sys")) {
            *m = super::mounts::bind(Path::new("/sys"), "/sys", !security.privileged, "rprivate");
            let mut options = m.options().clone().unwrap_or_default();
            options.extend(["nosuid".into(), "noexec".into(), "nodev".into()]);
            m.set_options(Some(options));
        }
    }
    let shm = input.pod.shm.clone().unwrap_or_else(|| PathBuf::from("/dev/shm"));
    for (source, destination) in [
        (shm.as_path(), "/dev/shm"),
        (input.pod.hostname_file.as_path(), "/etc/hostname"),
        (input.pod.hosts_file.as_path(), "/etc/hosts"),
        (input.pod.resolv_file.as_path(), "/etc/resolv.conf"),
    ] {
        if !taken(destination) {
            let readonly = security.readonly_rootfs && destination != "/dev/shm";
            all.push(super::mounts::bind(source, destination, readonly, "rprivate"));
        }
    }
    all.extend(requested);
    Ok(all)
}

#[cfg(test)]
mod tests;
