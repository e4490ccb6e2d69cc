//! A pod's namespaces: how its request asks for them, and the files that pin them (kept by
//! the sandbox; read again by its containers, its stop and recovery).

use crate::cri;
use crate::model::ids::SandboxId;
use crate::model::userns::PodUserns;
use crate::policy::userns;
use crate::sandbox::{NsRequest, UserNsRequest};
use crate::service::pod_service::PodService;

/// How a sandbox's namespaces were asked for.
pub(in crate::service) struct NsModes {
    pub host_network: bool,
    pub host_ipc: bool,
    pub shared_pid: bool,
    /// The pod's own user namespace (checked when the pod was created).
    pub userns: Option<PodUserns>,
}

/// The namespace options of a pod's request (all defaults when it gives none).
pub(in crate::service) fn ns_options(config: &cri::PodSandboxConfig) -> cri::NamespaceOption {
    config
        .linux
        .as_ref()
        .and_then(|l| l.security_context.as_ref())
        .and_then(|s| s.namespace_options.clone())
        .unwrap_or_default()
}

/// How the request asks for the pod's namespaces.
pub(in crate::service) fn ns_modes(config: &cri::PodSandboxConfig) -> NsModes {
    let options = ns_options(config);
    NsModes {
        host_network: options.network == cri::NamespaceMode::Node as i32,
        host_ipc: options.ipc == cri::NamespaceMode::Node as i32,
        shared_pid: options.pid == cri::NamespaceMode::Pod as i32,
        userns: userns::for_pod(options.userns_options.as_ref()).ok().flatten(),
    }
}

impl PodService {
    /// The namespace files a sandbox pins (none for host namespaces).
    pub(in crate::service) fn ns_request(&self, id: &SandboxId, config: &cri::PodSandboxConfig) -> NsRequest {
        let dir = self.registry.sandbox_run_dir(id).join("ns");
        let modes = ns_modes(config);
        NsRequest {
            user: modes.userns.map(|map| UserNsRequest { path: dir.join("user"), map }),
            net: (!modes.host_network).then(|| dir.join("net")),
            ipc: (!modes.host_ipc).then(|| dir.join("ipc")),
            uts: (!modes.host_network).then(|| dir.join("uts")),
            hostname: Some(config.hostname.clone()).filter(|h| !h.is_empty()),
            pid_holder: modes.shared_pid,
        }
    }
}
