//! CRI container config + pod context + image defaults + node facts → OCI runtime spec, built
//! from named steps: process, namespaces, mounts, resources, devices, security. The
//! resources step is also what UpdateContainerResources applies, so create and update
//! cannot drift.

mod devices;
mod namespaces;
mod process;
mod resources;
mod security;

pub use process::{apparmor_request, oom_score_adj};
pub use resources::{linux_resources, update_document};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::cri;
use oci_spec::runtime::{LinuxBuilder, LinuxSeccomp, Root, Spec};

use super::user::ResolvedUser;
use super::{NodeFacts, PolicyError};
use crate::model::userns::PodUserns;

/// What the image says about running it.
#[derive(Debug, Clone, Default)]
pub struct ImageDefaults {
    pub env: Vec<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub working_dir: String,
    pub user: String,
    pub stop_signal: String,
}

/// The pod a container joins, as the sandbox service prepared it.
#[derive(Debug, Clone)]
pub struct PodContext {
    pub hostname: String,
    pub net_ns: Option<PathBuf>,
    pub ipc_ns: Option<PathBuf>,
    pub uts_ns: Option<PathBuf>,
    /// The pod's shared PID namespace (its holder's), when the pod asks for one.
    pub pid_ns: Option<PathBuf>,
    /// The pod's /dev/shm (None: the host's, for host IPC).
    pub shm: Option<PathBuf>,
    pub hostname_file: PathBuf,
    pub hosts_file: PathBuf,
    pub resolv_file: PathBuf,
    pub cgroup_parent: String,
    pub cgroup_layout: crate::cgroup::layout::Layout,
    pub sysctls: HashMap<String, String>,
    /// The pod's own user namespace: where it is pinned and what it maps.
    pub userns: Option<(PathBuf, PodUserns)>,
}

/// A host device resolved for the container.
#[derive(Debug, Clone)]
pub struct Device {
    pub container_path: String,
    pub char: bool,
    pub major: i64,
    pub minor: i64,
    pub mode: u32,
    pub permissions: String,
}

pub struct ContainerInput<'a> {
    pub id: &'a str,
    pub config: &'a cri::ContainerConfig,
    pub pod: &'a PodContext,
    pub image: &'a ImageDefaults,
    pub user: ResolvedUser,
    pub rootfs: PathBuf,
    pub devices: Vec<Device>,
    /// A Localhost seccomp profile, loaded by the caller.
    pub localhost_seccomp: Option<LinuxSeccomp>,
    /// PID namespace of the target container (NamespaceMode TARGET).
    pub target_pid_ns: Option<PathBuf>,
    /// The memory plan's cgroup v2 files (`MemoryPlan::unified`).
    pub memory_unified: BTreeMap<String, String>,
    /// The pod's runtime handler can make mounts recursively read-only.
    pub recursive_read_only: bool,
    /// The pod's runtime handler can id-map mounts (the request's `uidMappings`).
    pub idmap_mounts: bool,
    /// Prefixes of runtime-interpreted annotations this handler lets through.
    pub allowed_annotations: &'a [String],
}

#[derive(Debug)]
pub struct BuiltSpec {
    pub spec: Spec,
    /// What was asked for and could not be applied as asked.
    pub warnings: Vec<String>,
    /// The identities `process.user` starts the container with.
    pub user: ResolvedUser,
}

/// Kubernetes' rules: `command` replaces the entrypoint, `args` the image's cmd.
pub fn command_line(config: &cri::ContainerConfig, image: &ImageDefaults) -> Result<Vec<String>, PolicyError> {
    let line: Vec<String> = if !config.command.is_empty() {
        config.command.iter().chain(&config.args).cloned().collect()
    } else {
        let args = if config.args.is_empty() { &image.cmd } else { &config.args };
        image.entrypoint.iter().chain(args).cloned().collect()
    };
    if line.is_empty() {
        return Err(PolicyError::Invalid("no command: neither the request nor the image gives one".into()));
    }
    Ok(line)
}

/// Image env first, the request's values override by name.
pub fn environment(config: &cri::ContainerConfig, image: &ImageDefaults, hostname: &str) -> Vec<String> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: &str| match env.iter_mut().find(|(key, _)| key == k) {
        Some(entry) => entry.1 = v.to_string(),
        None => env.push((k.to_string(), v.to_string())),
    };
    set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    set("HOSTNAME", hostname);
    for e in &image.env {
        let (k, v) = e.split_once('=').unwrap_or((e, ""));
        set(k, v);
    }
    for kv in &config.envs {
        set(&kv.key, &kv.value);
    }
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

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
