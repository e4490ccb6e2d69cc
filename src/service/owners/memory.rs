//! The memory plan in the container's life: decided at create and on resource updates,
//! read back from the kernel after start, and summed into pod cgroups swapcri owns.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::cri;

use std::path::PathBuf;

use crate::cgroup::memory_files;
use crate::config::{MemoryQosConfig, Reservation, SwapConfig};
use crate::error::Error;
use crate::model::ids::{ContainerId, SandboxId};
use crate::model::node::NodeFacts;
use crate::model::sandbox::ProcessRef;
use crate::policy::memory::{self, MemoryPlan, PlanSettings, PodMemoryContext};

use crate::service::owners::objects::Sandbox;

/// Counts the operator must see (verbose status, metrics).
#[derive(Debug, Default)]
pub struct MemoryCounters {
    /// Containers whose kubelet swap value differed from swapcri's own.
    pub swap_disagreements: AtomicU64,
    /// Plan values found different in the kernel after start or update.
    pub readback_mismatches: AtomicU64,
}

/// The memory and swap policy of the node's containers: owns the settings, the node's facts
/// and the counters; reads and writes only cgroup memory files.
pub struct MemoryQos {
    swap: SwapConfig,
    qos: MemoryQosConfig,
    node: NodeFacts,
    cgroup_root: PathBuf,
    /// The common parent of the pods swapcri owns (crictl pods): a path, or a slice name
    /// under the systemd driver.
    default_parent: String,
    /// systemd's manager, under the systemd driver.
    systemd: Option<std::sync::Arc<crate::cgroup::systemd::Systemd>>,
    counters: MemoryCounters,
}

impl MemoryQos {
    pub fn new(
        config: &crate::config::Config,
        node: NodeFacts,
        systemd: Option<std::sync::Arc<crate::cgroup::systemd::Systemd>>,
    ) -> Self {
        let default_parent = match systemd {
            Some(_) => config.runtime.parent_slice.clone(),
            None => config.runtime.default_cgroup_parent.clone(),
        };
        MemoryQos {
            systemd,
            swap: config.swap.clone(),
            qos: config.memory_qos.clone(),
            node,
            cgroup_root: config.cgroup_root.clone(),
            default_parent,
            counters: MemoryCounters::default(),
        }
    }

    fn plan_settings(&self, sandbox: &Sandbox) -> PlanSettings {
        PlanSettings {
            behavior: self.swap.behavior,
            authority: self.swap.authority,
            reserved_for_system: self.swap.reserved_for_system_bytes,
            reservation: self.qos.reservation,
            throttling_factor: self.qos.throttling_factor,
            cgroup_v2: self.node.cgroup_v2(),
            owns_pod_parent: sandbox.meta.owns_cgroup_parent,
        }
    }

    /// Decides the container's memory plan; logs and counts a swap disagreement.
    pub fn plan(
        &self,
        sandbox: &Sandbox,
        container: &cri::ContainerConfig,
        resources: &cri::LinuxContainerResources,
    ) -> Result<MemoryPlan, Error> {
        crate::policy::limits::check(resources, &self.node.hugepage_sizes)?;
        let pod_config = &sandbox.meta.config;
        let pod = PodMemoryContext {
            requested_cgroup_parent: pod_config.linux.as_ref().map(|l| l.cgroup_parent.as_str()).unwrap_or(""),
            annotations: Some(&pod_config.annotations),
            labels: Some(&pod_config.labels),
        };
        let inputs = memory::gather(&pod, container, resources, &self.node.memory)?;
        let plan = memory::plan(&inputs, &self.node.memory, &self.plan_settings(sandbox))?;
        if let Some(d) = &plan.swap_disagreement {
            self.counters.swap_disagreements.fetch_add(1, Ordering::Relaxed);
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
    pub fn counter_values(&self) -> (u64, u64) {
        (
            self.counters.swap_disagreements.load(Ordering::Relaxed),
            self.counters.readback_mismatches.load(Ordering::Relaxed),
        )
    }

    /// Adds the swap and memory QoS summary to the verbose runtime status document.
    pub fn add_status(&self, doc: &mut serde_json::Value) {
        let m = &self.node.memory;
        let swap_applies = self.node.swap_limits_apply();
        let reserved = self.swap.reserved_for_system_bytes;
        doc["swap"] = serde_json::json!({
            "behavior": self.swap.behavior,
            "authority": self.swap.authority,
            "machineSwapBytes": m.swap_total,
            "reservedForSystemBytes": reserved,
            "availableToPodsBytes": m.swap_total.saturating_sub(reserved),
            "limitsApplied": swap_applies,
            "whyNot": (!swap_applies).then(|| if !self.node.cgroup_v2() {
                "cgroup v1: swap limits do not apply"
            } else if !m.swap_accounting {
                "no memory.swap.max on this node (swap accounting off)"
            } else {
                "the node has no swap"
            }),
            "disagreements": self.counters.swap_disagreements.load(Ordering::Relaxed),
            "readBackMismatches": self.counters.readback_mismatches.load(Ordering::Relaxed),
        });
        doc["memoryQos"] = serde_json::json!(self.qos);
    }

    /// Reads the plan's files back from the container's cgroup (cgroup v2 only). A cgroup
    /// that is gone once the container's init has exited is no mismatch: the kernel keeps a
    /// cgroup while a process is in it, and systemd removes a scope as soon as it empties.
    /// An exiting init has left its cgroup before it turns zombie: only an init that runs
    /// and is not in its exit makes a missing cgroup a mismatch.
    pub fn check(&self, cgroup: &str, id: &ContainerId, plan: &MemoryPlan, init: Option<ProcessRef>) -> Vec<String> {
        if !self.node.cgroup_v2() {
            return Vec::new();
        }
        let dir = self.cgroup_root.join(cgroup.trim_start_matches('/'));
        let mismatches = match memory_files::compare(&dir, &plan.files(), self.node.memory.page_size) {
            memory_files::ReadBack::Compared(m) => m.iter().map(ToString::to_string).collect(),
            memory_files::ReadBack::Missing if !init.is_some_and(|p| p.is_alive() && !p.is_exiting()) => {
                tracing::info!(container = %id, cgroup = %dir.display(), "memory plan not read back: the container exited and its cgroup is gone");
                return Vec::new();
            }
            memory_files::ReadBack::Missing => {
                vec!["the container's cgroup is missing while its init runs".to_string()]
            }
        };
        for m in &mismatches {
            self.counters.readback_mismatches.fetch_add(1, Ordering::Relaxed);
            tracing::error!(container = %id, cgroup = %dir.display(), "memory plan not applied: {m}");
        }
        mismatches
    }

    /// With a reservation design of our own, a pod cgroup swapcri owns carries the sum of its
    /// live containers' memory.min / memory.low (`live`: per container of an owned pod, its
    /// pod and reservation; plus `new`, the one being created), and the common parent of all
    /// such pods carries the sum over them: the kernel caps a child's protection by its
    /// ancestors'. Only that pod and the common parent are written: as files (cgroupfs), or
    /// as unit properties of the slices (systemd), which systemd keeps across reloads.
    pub async fn apply_pod_reservations(
        &self,
        sandbox: &Sandbox,
        live: &[(SandboxId, (u64, u64))],
        new: Option<&MemoryPlan>,
    ) -> Result<(), Error> {
        if !matches!(self.qos.reservation, Reservation::Min | Reservation::Tiered)
            || !self.node.cgroup_v2()
            || !sandbox.meta.owns_cgroup_parent
        {
            return Ok(());
        }
        let (mut pod, mut total) = ((0, 0), (0, 0));
        for (owner, (min, low)) in live.iter().chain(new.map(|p| (sandbox.meta.id.clone(), p.reserved())).iter()) {
            total = (total.0 + min, total.1 + low);
            if *owner == sandbox.meta.id {
                pod = (pod.0 + min, pod.1 + low);
            }
        }
        // Parent first: a child's protection never exceeds its parent's.
        let targets = [(self.default_parent.as_str(), total), (sandbox.meta.cgroup_parent.as_str(), pod)];
        match (&self.systemd, sandbox.meta.cgroup_driver) {
            (Some(systemd), crate::config::CgroupDriver::Systemd) => {
                for (slice, (min, low)) in targets {
                    use crate::cgroup::systemd::Property;
                    systemd
                        .set_properties(slice, &[Property::MemoryMin(min), Property::MemoryLow(low)])
                        .await
                        .map_err(|e| Error::Internal(format!("setting pod memory reservations: {e}")))?;
                }
            }
            _ => {
                let io = |e| Error::io("writing pod memory reservations")(e);
                for (cgroup, (min, low)) in targets {
                    memory_files::ensure_memory_path(&self.cgroup_root, cgroup).map_err(io)?;
                    crate::cgroup::pod::write_reservation(&self.cgroup_root, cgroup, min, low).map_err(io)?;
                }
            }
        }
        tracing::debug!(pod = %sandbox.meta.id, min = pod.0, low = pod.1, "pod memory reservations written");
        Ok(())
    }
}
