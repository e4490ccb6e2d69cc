//! What building a container's spec takes: the request, the pod, the image and what the caller
//! resolved (user, devices, rootfs), and what it gives back.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use oci_spec::runtime::{LinuxSeccomp, Spec};

use crate::cri;
use crate::model::user::ResolvedUser;
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
    pub cgroup_layout: crate::model::cgroup_layout::Layout,
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
