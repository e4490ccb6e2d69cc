//! The resources step, shared by CreateContainer and UpdateContainerResources: CPU, memory
//! limit, hugepages, and the cgroup v2 `unified` map in which the memory plan's files
//! replace kubelet's values for them (they were the plan's inputs).

use std::collections::{BTreeMap, HashMap};

use crate::cri;
use oci_spec::runtime::{LinuxCpu, LinuxHugepageLimit, LinuxMemory, LinuxResources};

use crate::model::memory::PLAN_FILES;
use crate::policy::NodeFacts;

/// OCI LinuxResources for the request's resources and the memory plan's files (devices are
/// the devices step's).
pub fn linux_resources(
    r: &cri::LinuxContainerResources,
    plan_files: &BTreeMap<String, String>,
    node: &NodeFacts,
    warnings: &mut Vec<String>,
) -> LinuxResources {
    let positive = |v: i64| (v > 0).then_some(v);
    let mut cpu = LinuxCpu::default();
    cpu.set_shares(positive(r.cpu_shares).map(|v| v as u64));
    cpu.set_quota(positive(r.cpu_quota));
    cpu.set_period(positive(r.cpu_period).map(|v| v as u64));
    cpu.set_cpus((!r.cpuset_cpus.is_empty()).then(|| r.cpuset_cpus.clone()));
    cpu.set_mems((!r.cpuset_mems.is_empty()).then(|| r.cpuset_mems.clone()));
    let mut resources = LinuxResources::default();
    resources.set_cpu(Some(cpu));
    if let Some(limit) = positive(r.memory_limit_in_bytes) {
        let mut memory = LinuxMemory::default();
        memory.set_limit(Some(limit));
        resources.set_memory(Some(memory));
    }
    if !r.hugepage_limits.is_empty() && !node.hugetlb_limits {
        // kubelet names every size the node has (0 for none); only a real ask is worth a word.
        if r.hugepage_limits.iter().any(|h| h.limit > 0) {
            warnings.push("hugepage limits dropped: this node has no hugetlb cgroup controller".into());
        }
    } else if !r.hugepage_limits.is_empty() {
        let limits = r
            .hugepage_limits
            .iter()
            .map(|h| {
                let mut l = LinuxHugepageLimit::default();
                l.set_page_size(h.page_size.clone());
                l.set_limit(h.limit as i64);
                l
            })
            .collect();
        resources.set_hugepage_limits(Some(limits));
    }
    if node.cgroup_v2() {
        let mut unified: HashMap<String, String> = r
            .unified
            .iter()
            .filter(|(k, _)| !PLAN_FILES.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        unified.extend(plan_files.iter().map(|(k, v)| (k.clone(), v.clone())));
        if !unified.is_empty() {
            resources.set_unified(Some(unified));
        }
    } else if !r.unified.is_empty() {
        let mut keys: Vec<&String> = r.unified.keys().collect();
        keys.sort();
        warnings.push(format!("cgroup v2 values {keys:?} dropped: this node's cgroups are not unified v2"));
    }
    resources
}

/// The document an OCI runtime's `update --resources` reads: the same resources as at
/// create, with absent values left out (a runtime keeps the current value for a missing key,
/// not for a null).
pub fn update_document(resources: &LinuxResources) -> serde_json::Value {
    without_nulls(serde_json::to_value(resources).unwrap_or_default())
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
    use crate::model::node::CgroupMode;
    use serde_json::json;

    fn node(mode: CgroupMode) -> NodeFacts {
        NodeFacts { min_oom_score_adj: 0, ..NodeFacts::fixture(mode) }
    }

    #[test]
    fn nulls_are_dropped_at_every_level() {
        let doc = without_nulls(json!({"cpu": {"shares": 2, "quota": null}, "memory": {"limit": null}, "x": null}));
        assert_eq!(doc, json!({"cpu": {"shares": 2}, "memory": {}}));
    }

    #[test]
    fn hugepage_limits_only_where_the_controller_is() {
        let limits = |two_mb: u64| cri::LinuxContainerResources {
            hugepage_limits: vec![
                cri::HugepageLimit { page_size: "2MB".into(), limit: two_mb },
                cri::HugepageLimit { page_size: "1GB".into(), limit: 0 },
            ],
            ..Default::default()
        };
        let with = node(CgroupMode::Hybrid);
        let without = NodeFacts { hugetlb_limits: false, ..node(CgroupMode::Hybrid) };
        for (node, two_mb, want, warned) in [
            (
                &with,
                4 << 20,
                Some(json!([{"pageSize": "2MB", "limit": 4194304}, {"pageSize": "1GB", "limit": 0}])),
                false,
            ),
            (&without, 0, None, false),
            (&without, 4 << 20, None, true),
        ] {
            let mut warnings = Vec::new();
            let doc = update_document(&linux_resources(&limits(two_mb), &BTreeMap::new(), node, &mut warnings));
            assert_eq!(doc.get("hugepageLimits").cloned(), want, "controller {} limit {two_mb}", node.hugetlb_limits);
            assert_eq!(!warnings.is_empty(), warned, "{warnings:?}");
        }
    }

    #[test]
    fn the_plan_replaces_kubelets_memory_files_and_keeps_the_rest() {
        let r = cri::LinuxContainerResources {
            cpu_shares: 512,
            memory_limit_in_bytes: 1 << 30,
            unified: [("memory.swap.max", "123"), ("memory.oom.group", "1")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
            ..Default::default()
        };
        let plan = BTreeMap::from([("memory.swap.max".to_string(), "4096".to_string())]);
        let mut warnings = Vec::new();
        let doc = update_document(&linux_resources(&r, &plan, &node(CgroupMode::Unified), &mut warnings));
        assert_eq!(
            doc,
            json!({"cpu": {"shares": 512}, "memory": {"limit": 1073741824},
                   "unified": {"memory.swap.max": "4096", "memory.oom.group": "1"}})
        );
        assert!(warnings.is_empty());
        let v1 = update_document(&linux_resources(&r, &plan, &node(CgroupMode::Hybrid), &mut warnings));
        assert!(v1.get("unified").is_none());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }
}
