use serde_json::json;

use crate::error::Error;

use crate::service::owners::objects::{now_nanos, Container, Sandbox};
use crate::service::pod_service::PodService;

/// What PodSandboxStatus answers: the sandbox, its containers, the verbose details, and when
/// the status was read.
pub struct SandboxStatusView {
    pub sandbox: Sandbox,
    pub containers: Vec<Container>,
    pub info: Option<String>,
    /// Nanoseconds since the epoch.
    pub timestamp: i64,
}

impl PodService {
    /// The sandbox and, when verbose, its details as JSON, including the plugins' latest
    /// verdict on its network (from ADD or a CHECK at most a few seconds old; a stale one
    /// starts a CHECK in the background, so no call here waits on a plugin).
    pub async fn sandbox_status(&self, id: &str, verbose: bool) -> Result<SandboxStatusView, Error> {
        let sandbox = self.registry.find_sandbox(id)?;
        let check =
            (verbose && sandbox.status.addresses.is_some()).then(|| self.network.health(sandbox.meta.id.as_str()));
        let info = verbose.then(|| {
            json!({
                "network": { "addresses": sandbox.status.addresses, "check": check },
                "id": sandbox.meta.id,
                "runtimeHandler": sandbox.meta.runtime_handler,
                "cgroupParent": sandbox.meta.cgroup_parent,
                "ownsCgroupParent": sandbox.meta.owns_cgroup_parent,
                "pidNamespaceHolder": sandbox.status.holder,
                "runDir": sandbox.meta.dir,
                "config": sandbox.meta.config,
                "resized": sandbox.status.resized,
                "notReadyReason": sandbox.status.reason,
                "usage": sandbox.status.state.can_start_containers().then(|| self.cgroups.stats(&sandbox.meta.cgroup_path())),
            })
            .to_string()
        });
        let containers = self.registry.containers_in(&sandbox.meta.id);
        Ok(SandboxStatusView { sandbox, containers, info, timestamp: now_nanos() })
    }
}
