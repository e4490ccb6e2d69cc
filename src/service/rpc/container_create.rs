//! CreateContainer.

use std::path::{Path, PathBuf};

use std::time::Duration;
use tracing::Instrument;

use crate::cri;

use crate::error::Error;
use crate::model::container::{ContainerMeta, ContainerState, ContainerStatus};
use crate::model::ids::ContainerId;
use crate::model::sandbox::ProcessRef;
use crate::monitor::MonitorConfig;
use crate::oci::RestoreFrom;

use crate::model::image::ImageRecord;
use crate::model::memory::MemoryPlan;
use crate::nri::api;
use crate::service::adapters::nri_domain::{from_spec, nri_sandbox, resources_of};
use crate::service::owners::objects::{now_nanos, Sandbox};
use crate::service::pod_service::PodService;
use crate::service::steps::bundle::Bundle;
use crate::service::steps::image_volumes::{record_image_refs, ImageVolume};
use crate::service::steps::restore::Source;
use crate::service::steps::rollback::Rollback;
use crate::service::steps::span;

impl PodService {
    /// CreateContainer: under the pod's lock, checks the name, prepares the bundle, has a
    /// monitor create the container through the pod's runtime handler, then records it. A
    /// failure undoes every step already taken, in reverse.
    pub async fn create_container(&self, sandbox_id: &str, config: cri::ContainerConfig) -> Result<ContainerId, Error> {
        let (name, image_name) = name_and_image(&config)?;
        let sandbox = self.registry.find_sandbox(sandbox_id)?;
        // The pod's lock, taken before any container's (the one order every pod call keeps):
        // a StopPodSandbox or RemovePodSandbox either waits for this create to end and then
        // stops what it made, or has ended and this create sees a pod that is not ready.
        let _pod = self.registry.lock(sandbox.meta.id.as_str()).await;
        let sandbox = self.registry.find_sandbox(sandbox.meta.id.as_str())?;
        if !sandbox.status.state.can_start_containers() {
            return Err(Error::FailedPrecondition(format!("pod sandbox {} is not ready", sandbox.meta.id)));
        }
        if let Some(id) = self.created_with_name(&sandbox, &name)? {
            return Ok(id);
        }
        // An image that names a checkpoint: the checkpointed container is recreated on its
        // image, and its start restores the processes.
        let source = self.open_image(&image_name, &sandbox).instrument(span::step("find image")).await?;
        let (config, image_name, image, restoring) = match source {
            Source::Image(image) => (config, image_name, image, None),
            Source::Checkpoint(r) => {
                let image = self.find_image(&r.image).instrument(span::step("find image")).await?;
                (r.request(&config), r.image.clone(), image, Some(*r))
            }
        };
        let resources = config.linux.as_ref().and_then(|l| l.resources.clone()).unwrap_or_default();
        let memory_plan = self.memory.plan(&sandbox, &config, &resources)?;
        let volumes = self.find_image_volumes(&config).await?;
        let log_path = crate::blocking::run(|| log_path(&sandbox, &config))?;
        let id = ContainerId::generate();
        let mut rollback = Rollback::new();
        let mut bundle = span::step("bundle").in_scope(|| {
            crate::blocking::run(|| {
                self.prepare_bundle(&id, &sandbox, &config, &image, &volumes, &memory_plan, &mut rollback)
            })
        })?;
        let restore = match restoring {
            Some(r) => Some(crate::blocking::run(|| self.apply_checkpoint(r, &id, &sandbox, &mut bundle))?),
            None => None,
        };
        let gate = self.nri.gate().await; // until the container is recorded (see Nri::gate)
        let (memory_plan, told) =
            self.nri_create(&id, &sandbox, &config, &mut bundle, memory_plan).instrument(span::step("nri")).await?;
        span::step("spec").in_scope(|| crate::blocking::run(|| bundle.write_spec()))?;
        let reserved = self.registry.owned_pod_reservations();
        self.memory
            .apply_pod_reservations(&sandbox, &reserved, Some(&memory_plan))
            .instrument(span::step("pod reservations"))
            .await?;
        let made = Made {
            id: &id,
            sandbox: &sandbox,
            name,
            config: &config,
            image: &image,
            image_name: &image_name,
            volumes: &volumes,
            log_path,
            bundle,
            restore,
            memory_plan,
            nri_owners: told.as_ref().map(|t| t.created.adjustment.owners.clone()).unwrap_or_default(),
        };
        let launched = self.launch_and_record(made, &mut rollback).await;
        if let Err(e) = launched {
            drop(rollback);
            self.take_back_reservations(&sandbox).await;
            return Err(e);
        }
        rollback.commit();
        drop(gate);
        tracing::info!(container = %id, sandbox = %sandbox.meta.id, "container created");
        if let Some(told) = told {
            self.nri.post_create_container(&told.pod, &told.container).await;
            self.nri.created(told.created).await;
        }
        Ok(id)
    }

    /// Has the monitor create the container (a restored one's processes come back at its
    /// start instead), then records it.
    async fn launch_and_record(&self, made: Made<'_>, rollback: &mut Rollback) -> Result<(), Error> {
        let (id, sandbox, config) = (made.id, made.sandbox, made.config);
        let launched = match made.restore {
            Some(_) => None,
            None => Some(
                self.start_monitor(id, sandbox, config, &made.bundle.run_dir, &made.log_path, None, rollback)
                    .instrument(span::step("monitor and runtime create"))
                    .await?,
            ),
        };
        crate::crash::point("container-after-runtime-create");
        let bundle = made.bundle;
        let meta = ContainerMeta {
            id: id.clone(),
            sandbox_id: sandbox.meta.id.clone(),
            name: made.name,
            image_ref: made.image.status_name(made.image_name),
            image_id: made.image.id.clone(),
            log_path: made.log_path,
            created_at: now_nanos(),
            stop_signal: stop_signal(config, &bundle.defaults.stop_signal),
            user: Some(bundle.user),
            shared_binds: bundle.shared_binds,
            warnings: bundle.warnings,
            restore: made.restore,
            config: {
                let mut recorded = config.clone();
                record_image_refs(&mut recorded, made.volumes);
                recorded
            },
        };
        let requested = config.linux.as_ref().and_then(|l| l.resources.clone());
        let mut status = match launched {
            Some((monitor, pid)) => ContainerStatus::created(monitor, pid, requested),
            None => ContainerStatus::awaiting_restore(requested),
        };
        status.cgroup = status.pid.and_then(|pid| self.cgroups.cgroup_of(pid));
        status.memory_plan = Some(made.memory_plan);
        status.nri_owners = made.nri_owners;
        span::step("record").in_scope(|| self.registry.add_container(meta, status))?;
        self.exit_wake.changed();
        Ok(())
    }

    /// After a failed create: the pod's reservations go back to what its live containers hold.
    async fn take_back_reservations(&self, sandbox: &Sandbox) {
        let live = self.registry.owned_pod_reservations();
        if let Err(undo) = self.memory.apply_pod_reservations(sandbox, &live, None).await {
            tracing::warn!(sandbox = %sandbox.meta.id, error = %undo, "cannot take back the memory reservation of a failed create");
        }
    }

    /// A container of that name in the pod: kubelet retrying after a timeout gets the one it
    /// already created; any other state means the name is taken.
    fn created_with_name(&self, sandbox: &Sandbox, name: &str) -> Result<Option<ContainerId>, Error> {
        let state = self.registry.read();
        let existing = state.containers.values().find(|c| c.meta.sandbox_id == sandbox.meta.id && c.meta.name == name);
        match existing {
            None => Ok(None),
            Some(c) if c.status.state == ContainerState::Created => Ok(Some(c.meta.id.clone())),
            Some(c) => Err(Error::AlreadyExists(format!("container name {name:?} is taken by {}", c.meta.id))),
        }
    }

    /// Starts the container's monitor, which creates the container through the runtime (or
    /// restores it from `restore`'s images) and reports its init pid.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::service) async fn start_monitor(
        &self,
        id: &ContainerId,
        sandbox: &Sandbox,
        config: &cri::ContainerConfig,
        run_dir: &Path,
        log_path: &str,
        restore: Option<RestoreFrom>,
        rollback: &mut Rollback,
    ) -> Result<(ProcessRef, i32), Error> {
        let handler = self.runtimes.get(&sandbox.meta.runtime_handler)?;
        let monitor_config = MonitorConfig {
            id: id.to_string(),
            bundle: run_dir.join("bundle"),
            runtime: handler.spec.clone(),
            log_path: (!log_path.is_empty()).then(|| PathBuf::from(log_path)),
            log_directory: (!log_path.is_empty()).then(|| PathBuf::from(&sandbox.meta.config.log_directory)),
            max_log_line: self.config.runtime.max_log_line_bytes,
            exit_file: self.registry.exit_file(id),
            ctl_socket: self.registry.socket_path(id, "ctl"),
            console_socket: self.registry.socket_path(id, "console"),
            work_dir: run_dir.join("monitor"),
            tty: config.tty,
            stdin: config.stdin,
            stdin_once: config.stdin_once,
            attach_socket: Some(self.registry.socket_path(id, "attach")),
            restore,
        };
        let internal = |e| Error::io("preparing the monitor")(e);
        let monitor_path = run_dir.join("monitor.json");
        let json = serde_json::to_vec(&monitor_config).map_err(|e| Error::Internal(e.to_string()))?;
        crate::blocking::run(|| {
            crate::store::private::create_dir_all(&self.config.run_root.join("sock"))?;
            crate::store::private::write_file(&monitor_path, &json)
        })
        .map_err(internal)?;
        let log = run_dir.join("monitor.log");
        let (monitor, pid) = self.host.spawn_monitor(&monitor_path, &log, Duration::from_secs(120)).await?;
        self.adopt_into_monitor_cgroup(vec![monitor]);
        let (runtime, cid) = (handler.runtime.clone(), id.to_string());
        rollback.push("delete the created container", move || {
            if let Err(e) = runtime.delete_blocking(&cid) {
                tracing::warn!(container = %cid, error = %e, "rollback");
            }
            monitor.signal(nix::sys::signal::Signal::SIGKILL);
        });
        Ok((monitor, pid))
    }
}

/// What a create has made of its container, ready to launch and record.
struct Made<'a> {
    id: &'a ContainerId,
    sandbox: &'a Sandbox,
    name: String,
    config: &'a cri::ContainerConfig,
    image: &'a ImageRecord,
    image_name: &'a str,
    volumes: &'a [ImageVolume],
    log_path: String,
    bundle: Bundle,
    /// A restored container's CRIU images.
    restore: Option<PathBuf>,
    memory_plan: MemoryPlan,
    nri_owners: std::collections::BTreeMap<String, String>,
}

/// The container's name within the pod (`<name>_<attempt>`) and its image, both required.
fn name_and_image(config: &cri::ContainerConfig) -> Result<(String, String), Error> {
    let metadata =
        config.metadata.as_ref().ok_or_else(|| Error::InvalidArgument("container metadata is required".into()))?;
    if metadata.name.is_empty() {
        return Err(Error::InvalidArgument("container metadata needs a name".into()));
    }
    let image = config.image.as_ref().map(|i| i.image.clone()).unwrap_or_default();
    if image.is_empty() {
        return Err(Error::InvalidArgument("container image is required".into()));
    }
    Ok((format!("{}_{}", metadata.name, metadata.attempt), image))
}

/// The log file under the pod's log directory, as kubelet names it ("" for none). A path
/// that would leave the directory, by name or through a symbolic link, is refused.
fn log_path(sandbox: &Sandbox, config: &cri::ContainerConfig) -> Result<String, Error> {
    crate::blocking::check("checking a log path");
    let dir = &sandbox.meta.config.log_directory;
    let Some(path) = crate::policy::paths::container_log(dir, &config.log_path)? else { return Ok(String::new()) };
    let escapes = || Error::InvalidArgument(format!("log_path {:?} leads outside {dir:?}", config.log_path));
    if path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(escapes());
    }
    // What exists of the way there must resolve inside the directory (the rest is made
    // by the monitor, as plain directories).
    if let Ok(base) = Path::new(dir).canonicalize() {
        if let Some(existing) = path.ancestors().skip(1).find(|a| a.exists()) {
            let resolved = existing.canonicalize().map_err(|e| Error::InvalidArgument(format!("{dir}: {e}")))?;
            if !resolved.starts_with(&base) {
                return Err(escapes());
            }
        }
    }
    Ok(path.display().to_string())
}

/// The request's stop signal wins over the image's `StopSignal`; SIGTERM when neither names one.
fn stop_signal(config: &cri::ContainerConfig, image: &str) -> String {
    match cri::Signal::try_from(config.stop_signal) {
        Ok(cri::Signal::RuntimeDefault) | Err(_) if !image.is_empty() => image.to_string(),
        Ok(cri::Signal::RuntimeDefault) | Err(_) => "SIGTERM".into(),
        Ok(signal) => crate::model::container::signal_name(signal),
    }
}

/// What the plugins were told of a new container and what they made of it.
pub(in crate::service) struct Told {
    pub pod: api::PodSandbox,
    pub container: api::Container,
    pub created: crate::nri::Created,
}

impl PodService {
    /// CreateContainer's NRI step: the plugins see the container as it will run and adjust
    /// its spec; their memory and swap values pass through the swap policy into the plan.
    pub(in crate::service) async fn nri_create(
        &self,
        id: &ContainerId,
        sandbox: &Sandbox,
        config: &cri::ContainerConfig,
        bundle: &mut Bundle,
        plan: crate::model::memory::MemoryPlan,
    ) -> Result<(crate::model::memory::MemoryPlan, Option<Told>), crate::error::Error> {
        if !self.nri.enabled() {
            return Ok((plan, None));
        }
        let pod = nri_sandbox(sandbox);
        let mut container = api::Container {
            id: id.to_string(),
            pod_sandbox_id: sandbox.meta.id.to_string(),
            name: config.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default(),
            state: api::ContainerState::ContainerUnknown as i32,
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            linux: Some(api::LinuxContainer {
                resources: config.linux.as_ref().and_then(|l| l.resources.as_ref()).map(resources_of),
                ..Default::default()
            }),
            ..Default::default()
        };
        from_spec(&mut container, &bundle.spec);
        let created = self.nri.create_container(&pod, &container).await?;
        let mut plan = plan;
        if !created.adjustment.is_empty() {
            plan = self.review_plan(&plan, &created.adjustment)?;
            let (adjustment, files, dirs) = (&created.adjustment, plan.unified(), self.nri.cdi_spec_dirs());
            let spec = &mut bundle.spec;
            let warnings =
                crate::blocking::run(|| crate::nri::apply_to_spec(spec, adjustment, &files, &self.node, dirs))
                    .map_err(|e| crate::error::Error::FailedPrecondition(format!("NRI adjustment: {e}")))?;
            for warning in warnings {
                tracing::warn!(container = %id, "{warning}");
            }
            tracing::info!(container = %id, owners = ?created.adjustment.owners, "container adjusted by NRI plugins");
        }
        Ok((plan, Some(Told { pod, container, created })))
    }
}
