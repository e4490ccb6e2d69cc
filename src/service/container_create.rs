use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_cri::v1 as cri;
use oci_spec::image::ImageConfiguration;

use crate::error::Error;
use crate::image::ImageLookup;
use crate::model::container::{ContainerMeta, ContainerStatus};
use crate::model::ids::ContainerId;
use crate::model::image::ImageRecord;
use crate::monitor::{self, MonitorConfig};
use crate::policy::spec::{self, ContainerInput, Device, ImageDefaults, PodContext};
use crate::policy::user::{self, UserDb};
use crate::sandbox;

use super::pods::{now_nanos, Container, PodService, Sandbox};
use super::rollback::Rollback;
use super::sandbox_run::ns_modes;

impl PodService {
    pub async fn create_container(
        &self,
        sandbox_id: &str,
        config: cri::ContainerConfig,
        sandbox_config: Option<cri::PodSandboxConfig>,
    ) -> Result<ContainerId, Error> {
        let _ = sandbox_config; // the stored sandbox config is authoritative
        let metadata =
            config.metadata.clone().ok_or_else(|| Error::InvalidArgument("container metadata is required".into()))?;
        if metadata.name.is_empty() {
            return Err(Error::InvalidArgument("container metadata needs a name".into()));
        }
        let image_name = config.image.as_ref().map(|i| i.image.clone()).unwrap_or_default();
        if image_name.is_empty() {
            return Err(Error::InvalidArgument("container image is required".into()));
        }
        let sandbox = self.find_sandbox(sandbox_id)?;
        if !sandbox.status.state.can_start_containers() {
            return Err(Error::FailedPrecondition(format!("pod sandbox {} is not ready", sandbox.meta.id)));
        }
        let name = format!("{}_{}", metadata.name, metadata.attempt);
        let _guard = self.locks.lock(&format!("container-name/{}/{name}", sandbox.meta.id)).await;
        if let Some(existing) =
            self.read().containers.values().find(|c| c.meta.sandbox_id == sandbox.meta.id && c.meta.name == name)
        {
            // kubelet retrying after a timeout gets the container it already created.
            if existing.status.state == crate::model::container::ContainerState::Created {
                return Ok(existing.meta.id.clone());
            }
            return Err(Error::AlreadyExists(format!("container name {name:?} is taken by {}", existing.meta.id)));
        }
        let resources = config.linux.as_ref().and_then(|l| l.resources.clone()).unwrap_or_default();
        let memory_plan = self.memory_plan(&sandbox, &config, &resources)?;
        let lookup = ImageLookup::parse(&image_name)?;
        let store = self.images.clone();
        let image = tokio::task::spawn_blocking(move || store.find(&lookup))
            .await??
            .ok_or_else(|| Error::NotFound(format!("image {image_name:?} not found: pull it first")))?;

        let id = ContainerId::generate();
        let run_dir = self.container_run_dir(&id);
        let state_dir = self.container_records.dir(id.as_str());
        let mut rollback = Rollback::new();
        for dir in [&run_dir, &state_dir] {
            let d = dir.clone();
            std::fs::create_dir_all(&d).map_err(|e| Error::Internal(format!("{}: {e}", d.display())))?;
            rollback.push("remove directory", move || {
                let _ = std::fs::remove_dir_all(d);
            });
        }
        let rootfs = run_dir.join("rootfs");
        self.mount_rootfs(&image, &rootfs, &state_dir)?;
        let unmount_path = rootfs.clone();
        rollback.push("unmount rootfs", move || {
            let _ = sandbox::unmount(&unmount_path);
        });

        let defaults = self.image_defaults(&image)?;
        let security = config.linux.as_ref().and_then(|l| l.security_context.clone());
        let user = user::resolve(security.as_ref(), &defaults.user, &read_user_db(&rootfs))?;
        let devices = resolve_devices(&config.devices, security.as_ref().is_some_and(|s| s.privileged))?;
        let localhost_seccomp = load_localhost_seccomp(security.as_ref())?;
        let target_pid_ns = self.target_pid_ns(security.as_ref())?;
        let pod = self.pod_context(&sandbox);
        let built = spec::build(
            &ContainerInput {
                id: id.as_str(),
                config: &config,
                pod: &pod,
                image: &defaults,
                user,
                rootfs: rootfs.clone(),
                devices,
                localhost_seccomp,
                target_pid_ns,
                memory_unified: memory_plan.unified(),
            },
            &self.node,
        )?;
        for warning in &built.warnings {
            tracing::warn!(container = %id, "{warning}");
        }
        let bundle = run_dir.join("bundle");
        std::fs::create_dir_all(&bundle).map_err(|e| Error::Internal(e.to_string()))?;
        built
            .spec
            .save(bundle.join("config.json"))
            .map_err(|e| Error::Internal(format!("writing the OCI spec: {e}")))?;

        self.apply_pod_reservations(&sandbox, Some(&memory_plan))?;
        let log_path = log_path(&sandbox, &config);
        let handler = self.runtimes.get(&sandbox.meta.runtime_handler)?;
        let monitor_config = MonitorConfig {
            id: id.to_string(),
            bundle,
            runtime: handler.spec.clone(),
            log_path: (!log_path.is_empty()).then(|| PathBuf::from(&log_path)),
            max_log_line: self.config.runtime.max_log_line_bytes,
            exit_file: self.exit_file(&id),
            ctl_socket: self.socket_path(&id, "ctl"),
            console_socket: self.socket_path(&id, "console"),
            work_dir: run_dir.join("monitor"),
            tty: config.tty,
            stdin: config.stdin,
            stdin_once: config.stdin_once,
            attach_socket: Some(self.socket_path(&id, "attach")),
            cgroup: Some(self.config.runtime.monitor_cgroup.clone()),
        };
        std::fs::create_dir_all(self.config.run_root.join("sock")).map_err(|e| Error::Internal(e.to_string()))?;
        let monitor_path = run_dir.join("monitor.json");
        std::fs::write(&monitor_path, serde_json::to_vec(&monitor_config).map_err(|e| Error::Internal(e.to_string()))?)
            .map_err(|e| Error::Internal(e.to_string()))?;
        let (monitor, pid) =
            monitor::spawn(&monitor_path, &run_dir.join("monitor.log"), Duration::from_secs(120)).await?;
        let (runtime, cid) = (handler.runtime.clone(), id.to_string());
        rollback.push("delete the created container", move || {
            if let Err(e) = runtime.delete_blocking(&cid) {
                tracing::warn!(container = %cid, error = %e, "rollback");
            }
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(monitor.pid), nix::sys::signal::Signal::SIGKILL);
        });

        let meta = ContainerMeta {
            id: id.clone(),
            sandbox_id: sandbox.meta.id.clone(),
            name,
            image_ref: config.image.as_ref().map(|i| i.image.clone()).unwrap_or_default(),
            image_id: image.id.clone(),
            log_path,
            created_at: now_nanos(),
            stop_signal: if defaults.stop_signal.is_empty() { "SIGTERM".into() } else { defaults.stop_signal.clone() },
            warnings: built.warnings,
            config: config.clone(),
        };
        let mut status =
            ContainerStatus::created(monitor, pid, config.linux.as_ref().and_then(|l| l.resources.clone()));
        status.cgroup = crate::cgroup::cgroup_of(pid, &self.hierarchies);
        status.memory_plan = Some(memory_plan);
        self.container_records.write_meta(id.as_str(), &meta)?;
        self.container_records.write_status(id.as_str(), &status)?;
        self.write().containers.insert(id.clone(), Container { meta: Arc::new(meta), status });
        rollback.commit();
        tracing::info!(container = %id, sandbox = %sandbox.meta.id, "container created");
        Ok(id)
    }

    /// overlayfs over the image's layers with the container's own upper directory.
    fn mount_rootfs(&self, image: &ImageRecord, rootfs: &Path, state_dir: &Path) -> Result<(), Error> {
        let upper = state_dir.join("upper");
        let work = state_dir.join("work");
        for d in [&upper, &work, &rootfs.to_path_buf()] {
            std::fs::create_dir_all(d).map_err(|e| Error::Internal(format!("{}: {e}", d.display())))?;
        }
        let mut lower: Vec<String> =
            image.layers.iter().rev().map(|l| self.images.layer_path(l).display().to_string()).collect();
        if lower.is_empty() {
            let empty = state_dir.join("empty");
            std::fs::create_dir_all(&empty).map_err(|e| Error::Internal(e.to_string()))?;
            lower.push(empty.display().to_string());
        }
        let data = format!("lowerdir={},upperdir={},workdir={}", lower.join(":"), upper.display(), work.display());
        nix::mount::mount(Some("overlay"), rootfs, Some("overlay"), nix::mount::MsFlags::empty(), Some(data.as_str()))
            .map_err(|e| Error::Internal(format!("mounting the root filesystem ({} layers): {e}", image.layers.len())))
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
        let target = self.find_container(&options.target_id)?;
        match target.status.pid {
            Some(pid) if target.status.state == crate::model::container::ContainerState::Running => {
                Ok(Some(PathBuf::from(format!("/proc/{pid}/ns/pid"))))
            }
            _ => Err(Error::FailedPrecondition(format!("target container {} is not running", options.target_id))),
        }
    }

    pub(super) fn pod_context(&self, sandbox: &Sandbox) -> PodContext {
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
            sysctls: sandbox.meta.config.linux.as_ref().map(|l| l.sysctls.clone()).unwrap_or_default(),
        }
    }
}

fn log_path(sandbox: &Sandbox, config: &cri::ContainerConfig) -> String {
    let dir = &sandbox.meta.config.log_directory;
    match (dir.is_empty(), config.log_path.is_empty()) {
        (_, true) => String::new(),
        (true, false) => config.log_path.clone(),
        (false, false) => Path::new(dir).join(&config.log_path).display().to_string(),
    }
}

/// The image's /etc/passwd and /etc/group, read without following symlinks out of it.
fn read_user_db(rootfs: &Path) -> UserDb {
    let read = |rel: &str| {
        let path = rootfs.join(rel);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => std::fs::read_to_string(&path).unwrap_or_default(),
            _ => String::new(),
        }
    };
    UserDb { passwd: read("etc/passwd"), group: read("etc/group") }
}

fn resolve_devices(requested: &[cri::Device], privileged: bool) -> Result<Vec<Device>, Error> {
    let mut devices = Vec::new();
    for d in requested {
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

fn load_localhost_seccomp(
    security: Option<&cri::LinuxContainerSecurityContext>,
) -> Result<Option<oci_spec::runtime::LinuxSeccomp>, Error> {
    let Some(profile) = security.and_then(|s| s.seccomp.as_ref()) else { return Ok(None) };
    if profile.profile_type != cri::security_profile::ProfileType::Localhost as i32 {
        return Ok(None);
    }
    let path = profile.localhost_ref.strip_prefix("localhost/").unwrap_or(&profile.localhost_ref);
    let bytes = std::fs::read(path).map_err(|e| Error::InvalidArgument(format!("seccomp profile {path:?}: {e}")))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| Error::InvalidArgument(format!("seccomp profile {path:?}: {e}")))
}
