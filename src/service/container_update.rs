use k8s_cri::v1 as cri;
use serde_json::json;

use crate::error::Error;
use crate::policy::memory::{MemoryPlan, PLAN_FILES};

use super::pods::PodService;

impl PodService {
    /// Applies new resources to a running or created container (in-place resize).
    pub async fn update_container(
        &self,
        id: &str,
        resources: Option<cri::LinuxContainerResources>,
    ) -> Result<(), Error> {
        let Some(resources) = resources else { return Ok(()) };
        let container = self.find_container(id)?;
        let _guard = self.locks.lock(container.meta.id.as_str()).await;
        let container = self.find_container(container.meta.id.as_str())?;
        if !container.status.state.needs_stop()
            && container.status.state != crate::model::container::ContainerState::Created
        {
            return Err(Error::FailedPrecondition(format!("container {} is not running", container.meta.id)));
        }
        let sandbox = self.find_sandbox(container.meta.sandbox_id.as_str())?;
        // Requests and limits change in place: the plan follows them.
        let plan = self.memory_plan(&sandbox, &container.meta.config, &resources)?;
        let document = self.resources_document(&resources, &plan);
        let runtime = self.handler(&sandbox.meta.runtime_handler)?.runtime.clone();
        runtime.update(container.meta.id.as_str(), document.to_string().as_bytes()).await?;
        let mut status = container.status.clone();
        status.resources = Some(resources);
        if status.state == crate::model::container::ContainerState::Running {
            status.memory_mismatches = self.check_memory(&sandbox, &container.meta.id, &plan);
        }
        status.memory_plan = Some(plan);
        self.save_container_status(&container.meta.id, status)?;
        tracing::info!(container = %container.meta.id, "container resources updated");
        Ok(())
    }

    /// OCI LinuxResources as `runc update --resources` reads it. Absent values are left
    /// out, not null: runc keeps the current value for a missing key but not for a null.
    fn resources_document(&self, r: &cri::LinuxContainerResources, plan: &MemoryPlan) -> serde_json::Value {
        let positive = |v: i64| (v > 0).then_some(v);
        let mut doc = json!({
            "cpu": {
                "shares": positive(r.cpu_shares),
                "quota": positive(r.cpu_quota),
                "period": positive(r.cpu_period),
                "cpus": (!r.cpuset_cpus.is_empty()).then(|| r.cpuset_cpus.clone()),
                "mems": (!r.cpuset_mems.is_empty()).then(|| r.cpuset_mems.clone()),
            },
            "memory": { "limit": positive(r.memory_limit_in_bytes) },
        });
        if self.node.cgroup_mode.has_unified_memory() {
            // As at create: the plan's files replace kubelet's values for them.
            let mut unified: std::collections::BTreeMap<String, String> = r
                .unified
                .iter()
                .filter(|(k, _)| !PLAN_FILES.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            unified.extend(plan.unified());
            if !unified.is_empty() {
                doc["unified"] = json!(unified);
            }
        }
        without_nulls(doc)
    }
}

fn without_nulls(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_are_dropped_at_every_level() {
        let doc = without_nulls(json!({"cpu": {"shares": 2, "quota": null}, "memory": {"limit": null}, "x": null}));
        assert_eq!(doc, json!({"cpu": {"shares": 2}, "memory": {}}));
    }
}
