use serde_json::json;

use crate::error::Error;

use super::pods::{PodService, Sandbox};

impl PodService {
    /// The sandbox and, when verbose, its details as JSON.
    pub fn sandbox_status(&self, id: &str, verbose: bool) -> Result<(Sandbox, Option<String>), Error> {
        let sandbox = self.find_sandbox(id)?;
        let info = verbose.then(|| {
            json!({
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
