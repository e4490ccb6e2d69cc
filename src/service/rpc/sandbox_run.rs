use crate::cri;
use tracing::Instrument;

use crate::error::Error;
use crate::model::ids::SandboxId;
use crate::model::sandbox::{sandbox_name, SandboxMeta, SandboxState, SandboxStatus};
use crate::policy::mounts::tmpfs_options;
use crate::policy::userns;
use crate::sandbox::{self, NsRequest};
use crate::service::steps::pod_namespaces::{ns_modes, ns_options, NsModes};

use crate::service::adapters::nri_domain;
use crate::service::owners::objects::now_nanos;
use crate::service::pod_service::PodService;
use crate::service::steps::rollback::Rollback;
use crate::service::steps::span;

impl PodService {
    /// The pod's run directory and namespaces (pinned, with a PID-namespace holder when the
    /// pod shares one), each undone by `rollback` when a later step fails.
    async fn create_namespaces(
        &self,
        id: &SandboxId,
        config: &cri::PodSandboxConfig,
        rollback: &mut Rollback,
    ) -> Result<(std::path::PathBuf, NsRequest, Option<crate::model::sandbox::ProcessRef>), Error> {
        let dir = self.registry.sandbox_run_dir(id);
        crate::blocking::run(|| crate::store::private::create_dir_all(&dir.join("ns")))
            .map_err(Error::io(dir.display()))?;
        let cleanup_dir = dir.clone();
        rollback.push("remove run directory", move || {
            let _ = std::fs::remove_dir_all(cleanup_dir);
        });
        let request = self.ns_request(id, config);
        let (req, work, host) = (request.clone(), dir.clone(), self.host.clone());
        let holder =
            crate::blocking::spawn(move || span::step("namespaces").in_scope(|| host.create_namespaces(&req, &work)))
                .await?
                .map_err(|e| Error::Internal(format!("creating the pod's namespaces: {e}")))?;
        if let Some(holder) = holder {
            self.adopt_into_monitor_cgroup(vec![holder]);
        }
        let (released, host) = (request.clone(), self.host.clone());
        rollback.push("release namespaces", move || host.release_namespaces(&released, holder));
        crate::crash::point("sandbox-after-namespaces");
        Ok((dir, request, holder))
    }

    pub async fn run_sandbox(&self, config: cri::PodSandboxConfig, runtime_handler: &str) -> Result<SandboxId, Error> {
        let (name, handler, modes) = self.check_run_request(&config, runtime_handler)?;
        let _guard = self.registry.lock(&format!("sandbox-name/{name}")).await;
        if let Some(existing) = self.registry.read().sandboxes.values().find(|s| s.meta.name == name) {
            if existing.status.state == SandboxState::Ready {
                return Ok(existing.meta.id.clone());
            }
            return Err(Error::AlreadyExists(format!("sandbox name {name:?} is taken by {}", existing.meta.id)));
        }
        let id = SandboxId::generate();
        let mut rollback = Rollback::new();
        let (dir, request, holder) = self.create_namespaces(&id, &config, &mut rollback).await?;
        crate::blocking::run(|| self.prepare_pod_dir(&dir, &config, &modes, &mut rollback))?;

        // Networking last: its failure path and a crash after it are covered by its own record.
        let addresses = if modes.host_network {
            None
        } else {
            let netns = request.net.clone().unwrap_or_default();
            Some(self.network.setup(network_request(&id, netns, &config)).instrument(span::step("cni add")).await?)
        };
        crate::crash::point("sandbox-after-network");
        let (parent, owns) = self.cgroup_parent_of(&id, &config);
        let slice = self.start_pod_slice(&id, &parent, owns).await;
        let placement = (parent.clone(), owns);
        // NRI plugins see the pod before it is recorded, so it is listed only once they are
        // done; one that fails it fails the run. The gate keeps a plugin's synchronisation
        // from missing it.
        let gate = self.nri.gate().await;
        let told = match slice {
            Ok(()) => {
                let pod = nri_domain::nri_pod(&id, &config, &handler, &parent, addresses.as_ref());
                self.nri.run_pod_sandbox(&pod).instrument(span::step("nri")).await.map_err(Error::from)
            }
            Err(e) => Err(e),
        };
        let recorded = told.and_then(|()| {
            span::step("record")
                .in_scope(|| self.record_sandbox(id.clone(), name, config, handler, dir, holder, addresses, placement))
        });
        drop(gate);
        match recorded {
            Ok(()) => {
                rollback.commit();
                if holder.is_some() {
                    self.holder_wake.changed();
                }
                tracing::info!(sandbox = %id, "pod sandbox ready");
                Ok(id)
            }
            Err(e) => {
                if let Err(del) = self.network.teardown(id.as_str()).await {
                    tracing::warn!(sandbox = %id, error = %del, "releasing the network of a failed sandbox");
                }
                self.stop_pod_slice(&id, &parent, owns).await;
                Err(e)
            }
        }
    }

    /// The pod's `/dev/shm` tmpfs (unless it shares the host's IPC) and its hostname, hosts
    /// and resolv.conf files.
    fn prepare_pod_dir(
        &self,
        dir: &std::path::Path,
        config: &cri::PodSandboxConfig,
        modes: &NsModes,
        rollback: &mut Rollback,
    ) -> Result<(), Error> {
        if !modes.host_ipc {
            let shm = dir.join("shm");
            let mut options =
                tmpfs_options(0o1777, Some(self.config.runtime.shm_size_bytes), self.node.noswap.supported());
            if let Some(userns) = &modes.userns {
                let (uid, gid) = userns.root();
                options.extend([format!("uid={uid}"), format!("gid={gid}")]);
            }
            span::step("shm")
                .in_scope(|| self.host.mount_tmpfs(&shm, &options))
                .map_err(Error::io(format!("mounting {}", shm.display())))?;
            let host = self.host.clone();
            rollback.push("unmount shm", move || {
                let _ = host.unmount(&shm);
            });
        }
        let hostname = if modes.host_network || config.hostname.is_empty() {
            nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default()
        } else {
            config.hostname.clone()
        };
        span::step("pod files")
            .in_scope(|| {
                sandbox::write_pod_files(&dir, &hostname, config.dns_config.as_ref(), modes.userns.map(|u| u.root()))
            })
            .map_err(Error::io("writing pod files"))?;
        Ok(())
    }

    /// A pod's own user namespace must be well formed, fit its other namespaces, and have a
    /// handler and node that can run it.
    fn check_userns(&self, config: &cri::PodSandboxConfig, handler: &str) -> Result<(), Error> {
        let options = ns_options(config);
        if userns::for_pod(options.userns_options.as_ref())?.is_none() {
            return Ok(());
        }
        let node = cri::NamespaceMode::Node as i32;
        if options.ipc == node || options.pid == node {
            return Err(Error::InvalidArgument(
                "a pod with its own user namespace cannot share the host's IPC or PID namespace".into(),
            ));
        }
        let capabilities = self.runtimes.get(handler)?.capabilities(&self.node);
        if !capabilities.user_namespaces {
            return Err(Error::FailedPrecondition(format!(
                "runtime handler {handler:?} cannot run pods in user namespaces here: {}",
                self.runtimes.get(handler)?.userns_unsupported_reason(&self.node)
            )));
        }
        if options.network == node && !capabilities.user_namespaces_host_network {
            return Err(Error::FailedPrecondition(format!(
                "runtime handler {handler:?} cannot run a pod in a user namespace on the host's network"
            )));
        }
        Ok(())
    }

    /// Bad input is refused before anything is made: returns the sandbox's name, its
    /// runtime handler and how its namespaces are asked for.
    fn check_run_request(
        &self,
        config: &cri::PodSandboxConfig,
        runtime_handler: &str,
    ) -> Result<(String, String, NsModes), Error> {
        let metadata =
            config.metadata.as_ref().ok_or_else(|| Error::InvalidArgument("sandbox metadata is required".into()))?;
        if metadata.name.is_empty() || metadata.namespace.is_empty() || metadata.uid.is_empty() {
            return Err(Error::InvalidArgument("sandbox metadata needs name, namespace and uid".into()));
        }
        let handler = self.runtimes.resolve(runtime_handler)?;
        if !config.log_directory.is_empty() && !std::path::Path::new(&config.log_directory).is_absolute() {
            return Err(Error::InvalidArgument(format!("log_directory {:?} is not absolute", config.log_directory)));
        }
        crate::policy::dns::check_hostname(&config.hostname)?;
        if let Some(dns) = &config.dns_config {
            crate::policy::dns::check(dns)?;
        }
        self.check_userns(config, &handler)?;
        if let Some(parent) = config.linux.as_ref().map(|l| l.cgroup_parent.as_str()).filter(|p| !p.is_empty()) {
            self.layout().check_parent(parent).map_err(Error::InvalidArgument)?;
        }
        let modes = ns_modes(config);
        let sysctls = config.linux.as_ref().map(|l| l.sysctls.clone()).unwrap_or_default();
        crate::policy::sysctls::check(&sysctls, modes.host_network, modes.host_ipc)?;
        Ok((sandbox_name(metadata), handler, modes))
    }

    /// Writes the sandbox's records and makes it visible.
    #[allow(clippy::too_many_arguments)]
    fn record_sandbox(
        &self,
        id: SandboxId,
        name: String,
        config: cri::PodSandboxConfig,
        handler: String,
        dir: std::path::PathBuf,
        holder: Option<crate::model::sandbox::ProcessRef>,
        addresses: Option<crate::network::PodAddresses>,
        (cgroup_parent, owns): (String, bool),
    ) -> Result<(), Error> {
        let meta = SandboxMeta {
            id: id.clone(),
            name,
            config,
            runtime_handler: handler,
            cgroup_parent,
            owns_cgroup_parent: owns,
            cgroup_driver: self.config.runtime.cgroup_driver,
            created_at: now_nanos(),
            dir,
        };
        let status = SandboxStatus { state: SandboxState::Ready, holder, addresses, resized: None, reason: None };
        self.registry.add_sandbox(meta, status)
    }
}

/// The CNI request of a pod: its identity, its pinned network namespace, host ports, DNS.
fn network_request(
    id: &SandboxId,
    netns: std::path::PathBuf,
    config: &cri::PodSandboxConfig,
) -> crate::network::PodRequest {
    let metadata = config.metadata.clone().unwrap_or_default();
    let port_mappings = config
        .port_mappings
        .iter()
        .filter(|p| p.host_port > 0)
        .map(|p| {
            let protocol = match cri::Protocol::try_from(p.protocol) {
                Ok(cri::Protocol::Udp) => "udp",
                Ok(cri::Protocol::Sctp) => "sctp",
                _ => "tcp",
            };
            serde_json::json!({
                "hostPort": p.host_port,
                "containerPort": p.container_port,
                "protocol": protocol,
                "hostIP": p.host_ip,
            })
        })
        .collect();
    let dns = config
        .dns_config
        .as_ref()
        .map(|d| serde_json::json!({ "servers": d.servers, "searches": d.searches, "options": d.options }));
    crate::network::PodRequest {
        sandbox_id: id.to_string(),
        netns,
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        port_mappings,
        dns,
    }
}
