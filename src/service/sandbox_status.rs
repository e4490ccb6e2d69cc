use serde_json::json;

use crate::error::Error;

use super::pods::{PodService, Sandbox};

impl PodService {
    /// The sandbox and, when verbose, its details as JSON, including a CNI CHECK of its
    /// network (the plugins' own view of whether the attachment is still intact).
    pub async fn sandbox_status(&self, id: &str, verbose: bool) -> Result<(Sandbox, Option<String>), Error> {
        let sandbox = self.find_sandbox(id)?;
        let check = if verbose && sandbox.status.addresses.is_some() {
            Some(match self.network.check(sandbox.meta.id.as_str()).await {
                Ok(()) => json!({ "ok": true }),
                Err(e) => json!({ "ok": false, "error": e.to_string() }),
            })
        } else {
            None
        };
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
            })
            .to_string()
        });
        Ok((sandbox, info))
    }
}
