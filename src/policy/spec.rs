//! CRI container config + pod context + image defaults + node facts → OCI runtime spec.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use k8s_cri::v1 as cri;
use oci_spec::runtime::{
    Capability, LinuxBuilder, LinuxCapabilities, LinuxCpu, LinuxDevice, LinuxDeviceCgroup, LinuxDeviceType,
    LinuxHugepageLimit, LinuxMemory, LinuxNamespace, LinuxNamespaceType, LinuxResources, LinuxSeccomp, Process, Root,
    Spec, User,
};

use super::user::ResolvedUser;
use super::{caps, memory, mounts, seccomp, NodeFacts, PolicyError};

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
    pub sysctls: HashMap<String, String>,
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
}

#[derive(Debug)]
pub struct BuiltSpec {
    pub spec: Spec,
    /// What was asked for and could not be applied as asked.
    pub warnings: Vec<String>,
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

fn capability(name: &str) -> Result<Capability, PolicyError> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|_| PolicyError::Invalid(format!("unknown capability {name:?}")))
}

fn namespace(typ: LinuxNamespaceType, path: Option<&Path>) -> LinuxNamespace {
    let mut ns = LinuxNamespace::default();
    ns.set_typ(typ);
    ns.set_path(path.map(Path::to_path_buf));
    ns
}

pub fn build(input: &ContainerInput, node: &NodeFacts) -> Result<BuiltSpec, PolicyError> {
    let config = input.config;
    let linux_config = config.linux.clone().unwrap_or_default();
    let security = linux_config.security_context.clone().unwrap_or_default();
    let mut warnings = Vec::new();
    let invalid = |m: String| PolicyError::Invalid(m);

    // Process
    let mut process = Process::default();
    process.set_terminal(Some(config.tty));
    process.set_args(Some(command_line(config, input.image)?));
    process.set_env(Some(environment(config, input.image, &input.pod.hostname)));
    let cwd = [config.working_dir.as_str(), input.image.working_dir.as_str()]
        .into_iter()
        .find(|d| !d.is_empty())
        .unwrap_or("/");
    if !cwd.starts_with('/') {
        return Err(invalid(format!("working directory {cwd:?} is not absolute")));
    }
    process.set_cwd(PathBuf::from(cwd));
    let mut user = User::default();
    user.set_uid(input.user.uid);
    user.set_gid(input.user.gid);
    user.set_additional_gids(Some(input.user.additional_gids.clone()));
    process.set_user(user);
    let (add, drop) = security
        .capabilities
        .as_ref()
        .map(|c| (c.add_capabilities.clone(), c.drop_capabilities.clone()))
        .unwrap_or_default();
    let cap_names = caps::container_set(&add, &drop, security.privileged, &node.held_capabilities).map_err(invalid)?;
    let cap_set = cap_names.iter().map(|c| capability(c)).collect::<Result<std::collections::HashSet<_>, _>>()?;
    let mut capabilities = LinuxCapabilities::default();
    capabilities.set_bounding(Some(cap_set.clone()));
    capabilities.set_effective(Some(cap_set.clone()));
    capabilities.set_permitted(Some(cap_set));
    capabilities.set_inheritable(None);
    capabilities.set_ambient(None);
    process.set_capabilities(Some(capabilities));
    process.set_no_new_privileges(Some(security.no_new_privs));
    let resources = linux_config.resources.clone().unwrap_or_default();
    let mut oom_score_adj = resources.oom_score_adj as i32;
    if oom_score_adj < node.min_oom_score_adj {
        warnings.push(format!(
            "oom_score_adj {oom_score_adj} raised to {}: the daemon lacks CAP_SYS_RESOURCE",
            node.min_oom_score_adj
        ));
        oom_score_adj = node.min_oom_score_adj;
    }
    process.set_oom_score_adj(Some(oom_score_adj));
    apply_apparmor(&mut process, security.apparmor.as_ref(), security.privileged, node, &mut warnings)?;

    // Namespaces
    let ns_options = security.namespace_options.clone().unwrap_or_default();
    let mut namespaces = vec![namespace(LinuxNamespaceType::Mount, None)];
    match cri::NamespaceMode::try_from(ns_options.pid) {
        Ok(cri::NamespaceMode::Pod) => match &input.pod.pid_ns {
            Some(path) => namespaces.push(namespace(LinuxNamespaceType::Pid, Some(path))),
            None => return Err(PolicyError::Unsupported("the pod has no shared PID namespace".into())),
        },
        Ok(cri::NamespaceMode::Node) => {}
        Ok(cri::NamespaceMode::Target) => match &input.target_pid_ns {
            Some(path) => namespaces.push(namespace(LinuxNamespaceType::Pid, Some(path))),
            None => return Err(invalid(format!("target container {:?} is not running", ns_options.target_id))),
        },
        Ok(cri::NamespaceMode::Container) => namespaces.push(namespace(LinuxNamespaceType::Pid, None)),
        Err(_) => return Err(invalid(format!("unknown pid namespace mode {}", ns_options.pid))),
    }
    for (typ, path) in [
        (LinuxNamespaceType::Network, &input.pod.net_ns),
        (LinuxNamespaceType::Ipc, &input.pod.ipc_ns),
        (LinuxNamespaceType::Uts, &input.pod.uts_ns),
    ] {
        if let Some(p) = path {
            namespaces.push(namespace(typ, Some(p)));
        }
    }
    if node.cgroup_mode == crate::model::node::CgroupMode::Unified {
        namespaces.push(namespace(LinuxNamespaceType::Cgroup, None));
    }

    // Mounts: standard, pod files, request (the request wins for the same destination).
    let requested = mounts::from_request(&config.mounts).map_err(invalid)?;
    let taken = |dest: &str| requested.iter().any(|m| m.destination() == Path::new(dest));
    let mut all_mounts = mounts::standard(security.privileged, node.noswap.supported());
    let shm = input.pod.shm.clone().unwrap_or_else(|| PathBuf::from("/dev/shm"));
    for (source, destination, readonly) in [
        (shm.as_path(), "/dev/shm", false),
        (input.pod.hostname_file.as_path(), "/etc/hostname", false),
        (input.pod.hosts_file.as_path(), "/etc/hosts", false),
        (input.pod.resolv_file.as_path(), "/etc/resolv.conf", false),
    ] {
        if !taken(destination) {
            all_mounts.push(mounts::bind(
                source,
                destination,
                readonly || security.readonly_rootfs && destination != "/dev/shm",
                "rprivate",
            ));
        }
    }
    all_mounts.extend(requested);

    // Resources and devices
    let mut linux_resources = LinuxResources::default();
    let mut cpu = LinuxCpu::default();
    if resources.cpu_shares > 0 {
        cpu.set_shares(Some(resources.cpu_shares as u64));
    }
    if resources.cpu_quota > 0 {
        cpu.set_quota(Some(resources.cpu_quota));
    }
    if resources.cpu_period > 0 {
        cpu.set_period(Some(resources.cpu_period as u64));
    }
    if !resources.cpuset_cpus.is_empty() {
        cpu.set_cpus(Some(resources.cpuset_cpus.clone()));
    }
    if !resources.cpuset_mems.is_empty() {
        cpu.set_mems(Some(resources.cpuset_mems.clone()));
    }
    linux_resources.set_cpu(Some(cpu));
    if resources.memory_limit_in_bytes > 0 {
        let mut memory = LinuxMemory::default();
        memory.set_limit(Some(resources.memory_limit_in_bytes));
        linux_resources.set_memory(Some(memory));
    }
    if !resources.hugepage_limits.is_empty() {
        let limits = resources
            .hugepage_limits
            .iter()
            .map(|h| {
                let mut l = LinuxHugepageLimit::default();
                l.set_page_size(h.page_size.clone());
                l.set_limit(h.limit as i64);
                l
            })
            .collect();
        linux_resources.set_hugepage_limits(Some(limits));
    }
    // The memory plan owns its files; kubelet's values for them were its inputs.
    let mut unified: HashMap<String, String> = resources
        .unified
        .iter()
        .filter(|(k, _)| !memory::PLAN_FILES.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if node.cgroup_mode.has_unified_memory() {
        unified.extend(input.memory_unified.iter().map(|(k, v)| (k.clone(), v.clone())));
        if !unified.is_empty() {
            linux_resources.set_unified(Some(unified));
        }
    } else if !resources.unified.is_empty() {
        let mut keys: Vec<&String> = resources.unified.keys().collect();
        keys.sort();
        warnings.push(format!("cgroup v2 values {keys:?} dropped: this node's cgroups are not unified v2"));
    }
    let mut device_rules = vec![device_rule(false, None, None, None, "rwm")];
    let mut linux_devices = Vec::new();
    for d in &input.devices {
        let mut dev = LinuxDevice::default();
        dev.set_path(PathBuf::from(&d.container_path));
        dev.set_typ(if d.char { LinuxDeviceType::C } else { LinuxDeviceType::B });
        dev.set_major(d.major);
        dev.set_minor(d.minor);
        dev.set_file_mode(Some(d.mode & 0o777));
        dev.set_uid(Some(0));
        dev.set_gid(Some(0));
        linux_devices.push(dev);
        let typ = if d.char { LinuxDeviceType::C } else { LinuxDeviceType::B };
        device_rules.push(device_rule(true, Some(typ), Some(d.major), Some(d.minor), &d.permissions));
    }
    if security.privileged {
        device_rules = vec![device_rule(true, None, None, None, "rwm")];
    }
    linux_resources.set_devices(Some(device_rules));

    // Security: seccomp, masked and read-only paths
    let seccomp = if security.privileged {
        None
    } else {
        seccomp_profile(security.seccomp.as_ref(), &cap_names, input.localhost_seccomp.clone())?
    };
    let (masked, readonly_paths) = if security.privileged {
        (Vec::new(), Vec::new())
    } else {
        (
            if security.masked_paths.is_empty() {
                oci_spec::runtime::get_default_maskedpaths()
            } else {
                security.masked_paths.clone()
            },
            if security.readonly_paths.is_empty() {
                oci_spec::runtime::get_default_readonly_paths()
            } else {
                security.readonly_paths.clone()
            },
        )
    };

    let linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .resources(linux_resources)
        .cgroups_path(PathBuf::from(format!("{}/{}", input.pod.cgroup_parent.trim_end_matches('/'), input.id)))
        .devices(linux_devices)
        .sysctl(input.pod.sysctls.clone())
        .masked_paths(masked)
        .readonly_paths(readonly_paths)
        .build()
        .map_err(|e| invalid(format!("linux section: {e}")))?;
    let mut linux = linux;
    linux.set_seccomp(seccomp);

    let mut root = Root::default();
    root.set_path(input.rootfs.clone());
    root.set_readonly(Some(security.readonly_rootfs));
    let mut spec = Spec::default();
    spec.set_hostname(None);
    spec.set_process(Some(process));
    spec.set_root(Some(root));
    spec.set_mounts(Some(all_mounts));
    spec.set_linux(Some(linux));
    let annotations: HashMap<String, String> = config.annotations.clone().into_iter().collect();
    spec.set_annotations(Some(annotations));
    Ok(BuiltSpec { spec, warnings })
}

fn device_rule(
    allow: bool,
    typ: Option<LinuxDeviceType>,
    major: Option<i64>,
    minor: Option<i64>,
    access: &str,
) -> LinuxDeviceCgroup {
    let mut rule = LinuxDeviceCgroup::default();
    rule.set_allow(allow);
    rule.set_typ(typ);
    rule.set_major(major);
    rule.set_minor(minor);
    rule.set_access(Some(access.to_string()));
    rule
}

fn seccomp_profile(
    profile: Option<&cri::SecurityProfile>,
    caps: &[String],
    localhost: Option<LinuxSeccomp>,
) -> Result<Option<LinuxSeccomp>, PolicyError> {
    let Some(profile) = profile else {
        return Ok(None);
    };
    match cri::security_profile::ProfileType::try_from(profile.profile_type) {
        Ok(cri::security_profile::ProfileType::RuntimeDefault) => Ok(Some(seccomp::runtime_default(caps))),
        Ok(cri::security_profile::ProfileType::Unconfined) => Ok(None),
        Ok(cri::security_profile::ProfileType::Localhost) => localhost
            .map(Some)
            .ok_or_else(|| PolicyError::Invalid(format!("seccomp profile {:?} was not loaded", profile.localhost_ref))),
        Err(_) => Err(PolicyError::Invalid(format!("unknown seccomp profile type {}", profile.profile_type))),
    }
}

fn apply_apparmor(
    process: &mut Process,
    profile: Option<&cri::SecurityProfile>,
    privileged: bool,
    node: &NodeFacts,
    warnings: &mut Vec<String>,
) -> Result<(), PolicyError> {
    use cri::security_profile::ProfileType;
    let Some(profile) = profile else {
        return Ok(());
    };
    match ProfileType::try_from(profile.profile_type) {
        Ok(ProfileType::Unconfined) => Ok(()),
        Ok(ProfileType::Localhost) if node.apparmor_enabled => {
            let name = profile.localhost_ref.strip_prefix("localhost/").unwrap_or(&profile.localhost_ref);
            process.set_apparmor_profile(Some(name.to_string()));
            Ok(())
        }
        Ok(ProfileType::Localhost) => Err(PolicyError::Unsupported(format!(
            "AppArmor profile {:?} requested but AppArmor is not enabled on this node",
            profile.localhost_ref
        ))),
        Ok(ProfileType::RuntimeDefault) if privileged => Ok(()),
        Ok(ProfileType::RuntimeDefault) if node.apparmor_enabled => Err(PolicyError::Unsupported(
            "swapcri has no default AppArmor profile; use a Localhost profile or Unconfined".into(),
        )),
        Ok(ProfileType::RuntimeDefault) => {
            warnings.push(
                "AppArmor RuntimeDefault requested: AppArmor is not enabled on this node, nothing applied".into(),
            );
            Ok(())
        }
        Err(_) => Err(PolicyError::Invalid(format!("unknown AppArmor profile type {}", profile.profile_type))),
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
