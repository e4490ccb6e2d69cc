//! The memory plan in the container's life: decided at create and on resource updates,
//! read back from the kernel after start, and summed into pod cgroups swapcri owns.

use std::sync::atomic::{AtomicU64, Ordering};

use k8s_cri::v1 as cri;

use crate::cgroup::memory_files;
use crate::cgroup::CgroupMode;
use crate::config::Reservation;
use crate::error::Error;
use crate::model::container::ContainerState;
use crate::model::ids::ContainerId;
use crate::policy::memory::{self, MemoryPlan, PlanSettings, PodMemoryContext};

use super::pods::{PodService, Sandbox};

/// Counts the operator must see (verbose status, metrics).
#[derive(Debug, Default)]
pub struct MemoryCounters {
    /// Containers whose kubelet swap value differed from swapcri's own.
    pub swap_disagreements: AtomicU64,
    /// Plan values found different in the kernel after start or update.
    pub readback_mismatches: AtomicU64,
}

impl PodService {
    fn plan_settings(&self, sandbox: &Sandbox) -> PlanSettings {
        PlanSettings {
            behavior: self.config.swap.behavior,
            authority: self.config.swap.authority,
            reserved_for_system: self.config.swap.reserved_for_system_bytes,
            reservation: self.config.memory_qos.reservation,
            throttling_factor: self.config.memory_qos.throttling_factor,
            cgroup_v2: self.node.cgroup_mode == CgroupMode::Unified,
            owns_pod_parent: sandbox.meta.owns_cgroup_parent,
        }
    }

    /// Decides the container's memory plan; logs and counts a swap disagreement.
    pub(super) fn memory_plan(
        &self,
        sandbox: &Sandbox,
        container: &cri::ContainerConfig,
        resources: &cri::LinuxContainerResources,
    ) -> Result<MemoryPlan, Error> {
        let pod_config = &sandbox.meta.config;
        let pod = PodMemoryContext {
            requested_cgroup_parent: pod_config.linux.as_ref().map(|l| l.cgroup_parent.as_str()).unwrap_or(""),
            annotations: Some(&pod_config.annotations),
            labels: Some(&pod_config.labels),
        };
        let inputs = memory::gather(&pod, container, resources, &self.node.memory)?;
        let plan = memory::plan(&inputs, &self.node.memory, &self.plan_settings(sandbox))?;
        if let Some(d) = &plan.swap_disagreement {
            self.memory_counters.swap_disagreements.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                sandbox = %sandbox.meta.id,
                container = container.metadata.as_ref().map(|m| m.name.as_str()).unwrap_or(""),
                kubelet = %d.kubelet.render(),
                swapcri = %d.runtime.render(),
                applied = %d.applied,
                "memory.swap.max: kubelet's value differs from swapcri's"
            );
        }
        for note in &plan.notes {
            tracing::warn!(sandbox = %sandbox.meta.id, "{note}");
        }
        Ok(plan)
    }

    /// (swap disagreements, read-back mismatches) so far.
    pub fn memory_counter_values(&self) -> (u64, u64) {
        (
            self.memory_counters.swap_disagreements.load(Ordering::Relaxed),
            self.memory_counters.readback_mismatches.load(Ordering::Relaxed),
        )
    }

    /// Adds the swap and memory QoS summary to the verbose runtime status document.
    pub fn add_memory_status(&self, info: &str) -> String {
        let mut doc: serde_json::Value = serde_json::from_str(info).unwrap_or_else(|_| serde_json::json!({}));
        let m = &self.node.memory;
        let swap_applies = self.node.cgroup_mode == CgroupMode::Unified && m.swap_accounting && m.swap_total > 0;
        let reserved = self.config.swap.reserved_for_system_bytes;
        doc["swap"] = serde_json::json!({
            "behavior": self.config.swap.behavior,
            "authority": self.config.swap.authority,
            "machineSwapBytes": m.swap_total,
            "reservedForSystemBytes": reserved,
            "availableToPodsBytes": m.swap_total.saturating_sub(reserved),
            "limitsApplied": swap_applies,
            "whyNot": (!swap_applies).then(|| if self.node.cgroup_mode != CgroupMode::Unified {
                "cgroup v1: swap limits do not apply"
            } else if !m.swap_accounting {
                "no memory.swap.max on this node (swap accounting off)"
            } else {
                "the node has no swap"
            }),
            "disagreements": self.memory_counters.swap_disagreements.load(Ordering::Relaxed),
            "readBackMismatches": self.memory_counters.readback_mismatches.load(Ordering::Relaxed),
        });
        doc["memoryQos"] = serde_json::json!(self.config.memory_qos);
        doc.to_string()
    }

    /// Current memory and swap use of a running container (cgroup v2), for verbose status.
    pub(super) fn memory_usage(&self, container: &super::pods::Container) -> serde_json::Value {
        let sandbox = self.find_sandbox(container.meta.sandbox_id.as_str()).ok();
        let (Some(sandbox), CgroupMode::Unified) = (sandbox, self.node.cgroup_mode) else {
            return serde_json::Value::Null;
        };
        let dir = self.container_cgroup_dir(&sandbox, &container.meta.id);
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok().map(|s| s.trim().to_string());
        serde_json::json!({
            "memory.current": read("memory.current"),
            "memory.swap.current": read("memory.swap.current"),
            "memory.swap.max": read("memory.swap.max"),
        })
    }

    fn container_cgroup_dir(&self, sandbox: &Sandbox, id: &ContainerId) -> std::path::PathBuf {
        self.config.cgroup_root.join(sandbox.meta.cgroup_parent.trim_start_matches('/')).join(id.as_str())
    }

    /// Reads the plan's files back from the container's cgroup (cgroup v2 only).
    pub(super) fn check_memory(&self, sandbox: &Sandbox, id: &ContainerId, plan: &MemoryPlan) -> Vec<String> {
        if self.node.cgroup_mode != CgroupMode::Unified {
            return Vec::new();
        }
        let dir = self.container_cgroup_dir(sandbox, id);
        let mismatches = memory_files::compare(&dir, &plan.files(), self.node.memory.page_size);
        for m in &mismatches {
            self.memory_counters.readback_mismatches.fetch_add(1, Ordering::Relaxed);
            tracing::error!(container = %id, cgroup = %dir.display(), "memory plan not applied: {m}");
        }
        mismatches.iter().map(ToString::to_string).collect()
    }

    /// With a reservation design of our own, a pod cgroup swapcri owns carries the sum of its
    /// containers' memory.min / memory.low, and so does the common parent of all such pods:
    /// the kernel caps a child's protection by its ancestors'.
    pub(super) fn apply_pod_reservations(&self, extra: Option<(&Sandbox, &MemoryPlan)>) -> Result<(), Error> {
        if !matches!(self.config.memory_qos.reservation, Reservation::Min | Reservation::Tiered)
            || self.node.cgroup_mode != CgroupMode::Unified
        {
            return Ok(());
        }
        let root = &self.config.cgroup_root;
        let state = self.read();
        let mut pods: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        for sandbox in state.sandboxes.values().filter(|s| s.meta.owns_cgroup_parent) {
            pods.entry(sandbox.meta.cgroup_parent.clone()).or_default();
        }
        let live = |s: ContainerState| matches!(s, ContainerState::Created | ContainerState::Running);
        let mut add = |parent: &str, plan: &MemoryPlan| {
            let (min, low) = plan.reserved();
            let entry = pods.entry(parent.to_string()).or_default();
            entry.0 += min;
            entry.1 += low;
        };
        for c in state.containers.values().filter(|c| live(c.status.state)) {
            if let (Some(sandbox), Some(plan)) = (state.sandboxes.get(&c.meta.sandbox_id), &c.status.memory_plan) {
                if sandbox.meta.owns_cgroup_parent {
                    add(&sandbox.meta.cgroup_parent, plan);
                }
            }
        }
        if let Some((sandbox, plan)) = extra {
            add(&sandbox.meta.cgroup_parent, plan);
        }
        drop(state);
        let io = |e: std::io::Error| Error::Internal(format!("writing pod memory reservations: {e}"));
        let (mut total_min, mut total_low) = (0, 0);
        for (parent, (min, low)) in &pods {
            memory_files::ensure_memory_path(root, parent).map_err(io)?;
            memory_files::write_reservation(&root.join(parent.trim_start_matches('/')), *min, *low).map_err(io)?;
            total_min += min;
            total_low += low;
        }
        let common = self.config.runtime.default_cgroup_parent.trim_start_matches('/');
        memory_files::ensure_memory_path(root, common).map_err(io)?;
        memory_files::write_reservation(&root.join(common), total_min, total_low).map_err(io)?;
        tracing::debug!(pods = pods.len(), min = total_min, low = total_low, "pod memory reservations written");
        Ok(())
    }
}
