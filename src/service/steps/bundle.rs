//! A new container's bundle: its root filesystem (overlayfs over the image's layers), and the
//! OCI spec built from the request, the pod, the image and the node.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::cri;
use oci_spec::image::ImageConfiguration;

use crate::error::Error;
use crate::model::ids::ContainerId;
use crate::model::image::ImageRecord;
use crate::model::memory::MemoryPlan;
use crate::policy::spec::{self, ContainerInput, Device, ImageDefaults, PodContext};
use crate::policy::user::{self, UserDb};
use crate::sandbox;

use crate::service::owners::host;
use crate::service::owners::objects::Sandbox;
use crate::service::pod_service::PodService;
use crate::service::steps::image_volumes::{unmount_container, ImageVolume};
use crate::service::steps::layers::MappedLayers;
use crate::service::steps::pod_namespaces::ns_modes;
use crate::service::steps::rollback::Rollback;

/// A bundle ready for the runtime.
pub(in crate::service) struct Bundle {
    pub run_dir: PathBuf,
    pub dir: PathBuf,
    pub defaults: ImageDefaults,
    pub warnings: Vec<String>,
    pub user: crate::model::user::ResolvedUser,
    /// Bind mounts made to share volume sources (see `share_propagating_sources`).
    pub shared_binds: Vec<PathBuf>,
    /// The OCI spec, written by `write_spec` once NRI plugins have adjusted it.
    pub spec: oci_spec::runtime::Spec,
}

impl Bundle {
    /// Writes the spec where the runtime reads it. It holds the container's environment,
    /// its secrets: 0600.
    pub fn write_spec(&self) -> Result<(), Error> {
        crate::blocking::check("writing an OCI spec");
        let json = serde_json::to_vec(&self.spec).map_err(|e| Error::Internal(format!("writing the OCI spec: {e}")))?;
        crate::store::private::write_file(&self.dir.join("config.json"), &json)
            .map_err(Error::io("writing the OCI spec"))
    }
}

impl PodService {
    /// Creates the container's directories, mounts its root filesystem and builds its OCI
    /// spec; each step's undo goes on `rollback`.
    pub(in crate::service) fn prepare_bundle(
        &self,
        id: &ContainerId,
        sandbox: &Sandbox,
        config: &cri::ContainerConfig,
        image: &ImageRecord,
        volumes: &[ImageVolume],
        plan: &MemoryPlan,
        rollback: &mut Rollback,
    ) -> Result<Bundle, Error> {
        crate::blocking::check("preparing a bundle");
        let run_dir = self.registry.container_run_dir(id);
        let state_dir = self.registry.container_state_dir(id);
        for dir in [&run_dir, &state_dir] {
            let d = dir.clone();
            crate::store::private::create_dir_all(&d).map_err(Error::io(d.display()))?;
            rollback.push("remove directory", move || {
                let _ = std::fs::remove_dir_all(d);
            });
        }
        let rootfs = run_dir.join("rootfs");
        let (unmount_dir, host) = (run_dir.clone(), self.host.clone());
        rollback.push("unmount rootfs and image volumes", move || {
            let _ = unmount_container(&*host, &unmount_dir);
        });
        let mapped = self.mapped_layers(sandbox, &run_dir)?;
        if let Some(mapped) = &mapped {
            open_to_pod_root(&run_dir, mapped.map.root().1)?;
        }
        self.mount_rootfs(image, &rootfs, &state_dir, mapped.as_ref())?;
        let config = &self.mount_image_volumes(config, volumes, &run_dir, mapped.as_ref())?;
        let defaults = self.image_defaults(image)?;
        let built = self.build_spec(id, sandbox, config, &defaults, rootfs, plan)?;
        // Only once the request has passed every check does the host change.
        let shared_binds = share_propagating_sources(&self.host, id, &config.mounts, rollback)?;
        for warning in &built.warnings {
            tracing::warn!(container = %id, "{warning}");
        }
        let dir = run_dir.join("bundle");
        crate::store::private::create_dir_all(&dir).map_err(Error::io(dir.display()))?;
        Ok(Bundle {
            run_dir,
            dir,
            defaults,
            warnings: built.warnings,
            user: built.user,
            shared_binds,
            spec: built.spec,
        })
    }

    /// The OCI spec: what the policy makes of the request, with what only I/O can tell
    /// (the image's users, devices, a Localhost seccomp profile, a target PID namespace).
    fn build_spec(
        &self,
        id: &ContainerId,
        sandbox: &Sandbox,
        config: &cri::ContainerConfig,
        defaults: &ImageDefaults,
        rootfs: PathBuf,
        plan: &MemoryPlan,
    ) -> Result<spec::BuiltSpec, Error> {
        let security = config.linux.as_ref().and_then(|l| l.security_context.clone());
        let user = user::resolve(security.as_ref(), &defaults.user, &read_user_db(&rootfs))?;
        let devices = resolve_devices(&config.devices, security.as_ref().is_some_and(|s| s.privileged))?;
        let localhost_seccomp = load_localhost_seccomp(security.as_ref())?;
        check_apparmor_loaded(security.as_ref(), &self.node)?;
        let target_pid_ns = self.target_pid_ns(security.as_ref())?;
        let pod = self.pod_context(sandbox);
        let handler = self.runtimes.get(&sandbox.meta.runtime_handler)?;
        let input = ContainerInput {
            id: id.as_str(),
            config,
            pod: &pod,
            image: defaults,
            user,
            rootfs,
            devices,
            localhost_seccomp,
            target_pid_ns,
            memory_unified: plan.unified(),
            recursive_read_only: handler.capabilities(&self.node).recursive_read_only,
            idmap_mounts: handler.features().idmap_mounts,
            allowed_annotations: &handler.spec.allowed_annotations,
        };
        Ok(spec::build(&input, &self.node)?)
    }

    /// overlayfs over the image's layers with the container's own upper directory. In a pod
    /// with its own user namespace the layers are id-mapped through it and the upper
    /// directory belongs to the container's root, so the image's files keep their owners.
    fn mount_rootfs(
        &self,
        image: &ImageRecord,
        rootfs: &Path,
        state_dir: &Path,
        userns: Option<&MappedLayers>,
    ) -> Result<(), Error> {
        // upper's own mode is that of the container's `/` (0755 as images have it); the
        // state directory around it is 0700.
        let upper = state_dir.join("upper");
        let work = state_dir.join("work");
        for d in [&upper, &work, &rootfs.to_path_buf()] {
            std::fs::create_dir_all(d).map_err(Error::io(d.display()))?;
        }
        let mut lower = self.lower_dirs(image, userns, "rootfs")?;
        if lower.is_empty() {
            let empty = state_dir.join("empty");
            std::fs::create_dir_all(&empty).map_err(|e| Error::Internal(e.to_string()))?;
            lower.push(empty);
        }
        if let Some(mapped) = userns {
            let (uid, gid) = mapped.map.root();
            std::os::unix::fs::chown(&upper, Some(uid), Some(gid)).map_err(Error::io(upper.display()))?;
        }
        let lower: Vec<String> = lower.iter().map(|p| p.display().to_string()).collect();
        let data = format!("lowerdir={},upperdir={},workdir={}", lower.join(":"), upper.display(), work.display());
        self.host
            .mount_overlay(rootfs, &data, false)
            .map_err(Error::io(format!("mounting the root filesystem ({} layers)", image.layers.len())))
    }

    fn image_defaults(&self, image: &ImageRecord) -> Result<ImageDefaults, Error> {
        let bytes = self.images.read_blob(&image.id.digest())?;
        let parsed: ImageConfiguration = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Internal(format!("image config of {}: {e}", image.id)))?;
        let config = parsed.config().clone().unwrap_or_default();
        Ok(ImageDefaults {
            env: config.env().clone().unwrap_or_default(),
            entrypoint: config.entrypoint().clone().unwrap_or_default(),
            cmd: config.cmd().clone().unwrap_or_default(),
            working_dir: config.working_dir().clone().unwrap_or_default(),
            user: config.user().clone().unwrap_or_default(),
            stop_signal: config.stop_signal().clone().unwrap_or_default(),
        })
    }

    fn target_pid_ns(&self, security: Option<&cri::LinuxContainerSecurityContext>) -> Result<Option<PathBuf>, Error> {
        let Some(options) = security.and_then(|s| s.namespace_options.as_ref()) else { return Ok(None) };
        if options.pid != cri::NamespaceMode::Target as i32 {
            return Ok(None);
        }
        let target = self.registry.find_container(&options.target_id)?;
        match target.status.pid {
            Some(pid) if target.status.state == crate::model::container::ContainerState::Running => {
                Ok(Some(PathBuf::from(format!("/proc/{pid}/ns/pid"))))
            }
            _ => Err(Error::FailedPrecondition(format!("target container {} is not running", options.target_id))),
        }
    }

    pub(in crate::service) fn pod_context(&self, sandbox: &Sandbox) -> PodContext {
        let request = self.ns_request(&sandbox.meta.id, &sandbox.meta.config);
        let modes = ns_modes(&sandbox.meta.config);
        let dir = &sandbox.meta.dir;
        PodContext {
            hostname: std::fs::read_to_string(dir.join("hostname")).unwrap_or_default().trim().to_string(),
            net_ns: request.net,
            ipc_ns: request.ipc,
            uts_ns: request.uts,
            pid_ns: sandbox.status.holder.map(|h| PathBuf::from(format!("/proc/{}/ns/pid", h.pid))),
            shm: (!modes.host_ipc).then(|| dir.join("shm")),
            hostname_file: dir.join("hostname"),
            hosts_file: dir.join("hosts"),
            resolv_file: dir.join("resolv.conf"),
            cgroup_parent: sandbox.meta.cgroup_parent.clone(),
            cgroup_layout: sandbox.meta.cgroup_layout(),
            sysctls: sandbox.meta.config.linux.as_ref().map(|l| l.sysctls.clone()).unwrap_or_default(),
            userns: request.user.map(|u| (u.path, u.map)),
        }
    }
}

/// The image's /etc/passwd and /etc/group, read without following symlinks out of it.
/// Largest /etc/passwd or /etc/group read from an image.
const MAX_USER_DB: u64 = 16 << 20;
/// Largest Localhost seccomp profile.
const MAX_SECCOMP_PROFILE: u64 = 4 << 20;

/// The image's /etc/passwd and /etc/group, resolved inside the container's root (a link out
/// of it reads nothing of the node's). One that is missing, not a regular file or too large
/// counts as empty: names in it then do not resolve and the request is refused for that.
fn read_user_db(rootfs: &Path) -> UserDb {
    let read = |rel: &str| match crate::store::confined::read_in_root(rootfs, rel, MAX_USER_DB) {
        Ok(bytes) => String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned(),
        Err(e) => {
            tracing::warn!(error = %e, "the image's /{rel} is not used");
            String::new()
        }
    };
    UserDb { passwd: read("etc/passwd"), group: read("etc/group") }
}

fn resolve_devices(requested: &[cri::Device], privileged: bool) -> Result<Vec<Device>, Error> {
    let mut devices = Vec::new();
    for d in requested {
        // Device plugins name host devices by absolute path; a relative one would be
        // resolved against the daemon's working directory.
        for (field, path) in [("host_path", &d.host_path), ("container_path", &d.container_path)] {
            if !path.starts_with('/') {
                return Err(Error::InvalidArgument(format!("device {field} {path:?} is not absolute")));
            }
        }
        let meta = std::fs::metadata(&d.host_path)
            .map_err(|e| Error::InvalidArgument(format!("device {}: {e}", d.host_path)))?;
        let kind = meta.file_type();
        if !kind.is_char_device() && !kind.is_block_device() {
            return Err(Error::InvalidArgument(format!("{} is not a device", d.host_path)));
        }
        devices.push(device(&d.container_path, &meta, if d.permissions.is_empty() { "rwm" } else { &d.permissions }));
    }
    if privileged {
        for entry in walkdir::WalkDir::new("/dev").follow_links(false).into_iter().flatten() {
            let path = entry.path();
            if path.starts_with("/dev/pts") || path.starts_with("/dev/shm") || path.starts_with("/dev/mqueue") {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let kind = meta.file_type();
            if (kind.is_char_device() || kind.is_block_device())
                && !devices.iter().any(|d: &Device| Path::new(&d.container_path) == path)
            {
                devices.push(device(&path.display().to_string(), &meta, "rwm"));
            }
        }
    }
    Ok(devices)
}

fn device(container_path: &str, meta: &std::fs::Metadata, permissions: &str) -> Device {
    let rdev = meta.rdev();
    Device {
        container_path: container_path.to_string(),
        char: meta.file_type().is_char_device(),
        major: nix::sys::stat::major(rdev) as i64,
        minor: nix::sys::stat::minor(rdev) as i64,
        mode: meta.mode(),
        permissions: permissions.to_string(),
    }
}

/// A Localhost AppArmor profile must be loaded: runc would only fail later, at start.
fn check_apparmor_loaded(
    security: Option<&cri::LinuxContainerSecurityContext>,
    node: &crate::model::node::NodeFacts,
) -> Result<(), Error> {
    use cri::security_profile::ProfileType;
    let Some(profile) = security.and_then(crate::policy::spec::apparmor_request) else { return Ok(()) };
    if !node.apparmor_enabled || profile.profile_type != ProfileType::Localhost as i32 {
        return Ok(());
    }
    let name = profile.localhost_ref.strip_prefix("localhost/").unwrap_or(&profile.localhost_ref);
    match crate::node::apparmor::is_loaded(name) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::InvalidArgument(format!("AppArmor profile {name:?} is not loaded on this node"))),
        Err(e) => Err(Error::FailedPrecondition(format!("cannot read the loaded AppArmor profiles: {e}"))),
    }
}

fn load_localhost_seccomp(
    security: Option<&cri::LinuxContainerSecurityContext>,
) -> Result<Option<oci_spec::runtime::LinuxSeccomp>, Error> {
    let Some(profile) = security.and_then(|s| s.seccomp.as_ref()) else { return Ok(None) };
    if profile.profile_type != cri::security_profile::ProfileType::Localhost as i32 {
        return Ok(None);
    }
    let path = profile.localhost_ref.strip_prefix("localhost/").unwrap_or(&profile.localhost_ref);
    // kubelet sends an absolute path under its seccomp directory.
    if !path.starts_with('/') {
        return Err(Error::InvalidArgument(format!("seccomp profile {path:?} is not an absolute path")));
    }
    let bytes = crate::store::confined::read_host_file(Path::new(path), MAX_SECCOMP_PROFILE)
        .map_err(|e| Error::InvalidArgument(format!("seccomp profile: {e}")))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::InvalidArgument(format!("seccomp profile {path:?}: {e}")))
}

/// Host paths mounted with propagation must sit on shared mounts (see
/// `sandbox::ensure_shared`). Returns the bind mounts made for that, which the container
/// owns; a failed creation takes them back.
fn share_propagating_sources(
    host: &std::sync::Arc<dyn host::Host>,
    id: &ContainerId,
    mounts: &[cri::Mount],
    rollback: &mut Rollback,
) -> Result<Vec<PathBuf>, Error> {
    let propagating = |m: &&cri::Mount| {
        m.propagation == cri::MountPropagation::PropagationBidirectional as i32
            || m.propagation == cri::MountPropagation::PropagationHostToContainer as i32
    };
    let mut bound = Vec::new();
    for m in mounts.iter().filter(propagating).filter(|m| !m.host_path.is_empty()) {
        match host.ensure_shared(Path::new(&m.host_path)) {
            Ok(sandbox::Shared::Already) => {}
            Ok(done) => {
                tracing::info!(container = %id, source = %m.host_path, "volume source made a shared mount");
                if let sandbox::Shared::Bound(path) = done {
                    let (undo, host) = (path.clone(), host.clone());
                    rollback.push("unmount a shared volume source", move || {
                        let _ = host.unmount(&undo);
                    });
                    bound.push(path);
                }
            }
            Err(e) => {
                return Err(Error::FailedPrecondition(format!(
                    "volume {}: cannot make its source {} a shared mount: {e}",
                    m.container_path, m.host_path
                )))
            }
        }
    }
    Ok(bound)
}

/// A user-namespaced container's runtime reaches its root filesystem as the pod's root, an
/// unprivileged user on the node: the run directory lets that group (alone) pass, 0710.
fn open_to_pod_root(run_dir: &Path, gid: u32) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    std::os::unix::fs::chown(run_dir, None, Some(gid))
        .and_then(|()| std::fs::set_permissions(run_dir, std::fs::Permissions::from_mode(0o710)))
        .map_err(Error::io(run_dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_paths_are_absolute_and_real_devices() {
        let dev = |host: &str, container: &str| cri::Device {
            host_path: host.into(),
            container_path: container.into(),
            permissions: "rw".into(),
        };
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"").unwrap();
        let plain = plain.display().to_string();
        for (d, want) in [
            (dev("/dev/null", "/dev/x"), Ok(())),
            (dev("dev/null", "/dev/x"), Err("host_path \"dev/null\" is not absolute")),
            (dev("/dev/null", "x"), Err("container_path \"x\" is not absolute")),
            (dev("/dev/no-such-device", "/dev/x"), Err("device /dev/no-such-device")),
            (dev(&plain, "/dev/x"), Err("is not a device")),
        ] {
            match (resolve_devices(std::slice::from_ref(&d), false), want) {
                (Ok(got), Ok(())) => assert_eq!(got[0].container_path, d.container_path),
                (Err(Error::InvalidArgument(e)), Err(part)) => assert!(e.contains(part), "{e}"),
                (got, want) => panic!("{d:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn localhost_seccomp_profiles_are_absolute_paths() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.json");
        std::fs::write(&file, r#"{"defaultAction":"SCMP_ACT_ALLOW"}"#).unwrap();
        let context = |r: &str| cri::LinuxContainerSecurityContext {
            seccomp: Some(cri::SecurityProfile {
                profile_type: cri::security_profile::ProfileType::Localhost as i32,
                localhost_ref: r.into(),
            }),
            ..Default::default()
        };
        let absolute = file.display().to_string();
        assert!(load_localhost_seccomp(Some(&context(&absolute))).unwrap().is_some());
        assert!(load_localhost_seccomp(Some(&context(&format!("localhost/{absolute}")))).unwrap().is_some());
        for relative in ["p.json", "localhost/p.json", "../p.json"] {
            match load_localhost_seccomp(Some(&context(relative))) {
                Err(Error::InvalidArgument(e)) => assert!(e.contains("not an absolute path"), "{e}"),
                other => panic!("{relative}: {other:?}"),
            }
        }
        let missing = dir.path().join("missing.json").display().to_string();
        assert!(matches!(load_localhost_seccomp(Some(&context(&missing))), Err(Error::InvalidArgument(_))));
    }
}
