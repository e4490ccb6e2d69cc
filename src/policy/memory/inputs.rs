//! Gathers the policy's inputs from a CRI request, each from the best source present.

use std::collections::HashMap;

use crate::cri;
use serde::Serialize;

use super::quantity::parse_bytes;
use crate::model::memory::{CgroupValue, QosClass, RequestEstimate, Source};
use crate::model::node::MemoryFacts;
use crate::policy::PolicyError;

pub const ANNOTATION_QOS: &str = "swapcri.io/qos-class";
pub const ANNOTATION_REQUEST: &str = "swapcri.io/memory-request";
pub const ANNOTATION_CRITICAL: &str = "swapcri.io/critical";
const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
/// kubelet's oom_score_adj for Guaranteed and node-critical pods, and for BestEffort.
const OOM_GUARANTEED: i64 = -997;
const OOM_BEST_EFFORT: i64 = 1000;

/// What the pod contributes: kubelet's parent cgroup as requested, annotations, labels.
#[derive(Debug, Clone, Default)]
pub struct PodMemoryContext<'a> {
    /// `cgroup_parent` as the request gave it (empty for crictl).
    pub requested_cgroup_parent: &'a str,
    pub annotations: Option<&'a HashMap<String, String>>,
    pub labels: Option<&'a HashMap<String, String>>,
}

/// kubelet's values for the plan's files. `"0"` for min/low/high is a reset, not a request.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KubeletMemory {
    pub swap_max: Option<CgroupValue>,
    pub min: Option<KubeletValue>,
    pub low: Option<KubeletValue>,
    pub high: Option<KubeletValue>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum KubeletValue {
    Set(CgroupValue),
    Reset,
}

impl KubeletValue {
    fn request_bytes(self) -> Option<u64> {
        match self {
            KubeletValue::Set(CgroupValue::Bytes(b)) if b > 0 => Some(b),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryInputs {
    /// kubelet markers present (its QoS cgroups, its labels): annotations are not read.
    pub kubelet_managed: bool,
    pub qos_class: QosClass,
    pub qos_source: Source,
    pub request: Option<RequestEstimate>,
    pub limit: u64,
    pub critical: Option<String>,
    pub kubelet: KubeletMemory,
    pub notes: Vec<String>,
}

/// The QoS class kubelet's cgroup parent names: `/kubepods/burstable/pod<uid>` (cgroupfs)
/// or `kubepods-burstable-pod<uid>.slice` (systemd); Guaranteed pods sit under kubepods. A
/// kubelet with a `cgroupRoot` (kind's `/kubelet`) puts it in front:
/// `/kubelet/kubepods/…`, `kubelet-kubepods-burstable-pod<uid>.slice`.
pub fn qos_from_cgroup_parent(parent: &str) -> Option<QosClass> {
    let classify = |next: Option<&str>| match next {
        Some("burstable") => QosClass::Burstable,
        Some("besteffort") => QosClass::BestEffort,
        _ => QosClass::Guaranteed,
    };
    let parts: Vec<&str> = parent.split('/').filter(|p| !p.is_empty()).collect();
    if let Some(i) = parts.iter().position(|p| *p == "kubepods") {
        return Some(classify(parts.get(i + 1).copied()));
    }
    // systemd: the deepest slice spells the whole path.
    let slice = parts.iter().rev().find_map(|p| p.strip_suffix(".slice"))?;
    let words: Vec<&str> = slice.split('-').collect();
    let i = words.iter().position(|w| *w == "kubepods")?;
    Some(classify(words.get(i + 1).copied()))
}

#[cfg(test)]
mod qos_parent_tests {
    use super::*;

    #[test]
    fn qos_from_parents_of_both_drivers_with_and_without_a_cgroup_root() {
        let cases: &[(&str, Option<QosClass>)] = &[
            ("/kubepods/burstable/pod1", Some(QosClass::Burstable)),
            ("/kubepods/besteffort/pod1", Some(QosClass::BestEffort)),
            ("/kubepods/pod1", Some(QosClass::Guaranteed)),
            ("/kubelet/kubepods/burstable/pod1", Some(QosClass::Burstable)),
            ("kubepods-burstable-pod1.slice", Some(QosClass::Burstable)),
            ("kubepods-besteffort-pod1.slice", Some(QosClass::BestEffort)),
            ("kubepods-pod1.slice", Some(QosClass::Guaranteed)),
            ("kubelet-kubepods-burstable-pod1.slice", Some(QosClass::Burstable)),
            ("kubelet-kubepods-besteffort-pod2_3.slice", Some(QosClass::BestEffort)),
            ("kubelet-kubepods-pod1.slice", Some(QosClass::Guaranteed)),
            ("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice", Some(QosClass::Burstable)),
            ("/swapcri/pod1", None),
            ("swapcri-pod1.slice", None),
            ("mykubepods-burstable.slice", None),
            ("", None),
        ];
        for (parent, want) in cases {
            assert_eq!(qos_from_cgroup_parent(parent), *want, "{parent}");
        }
    }
}

/// `memory_swap_limit_in_bytes` is memory + swap (the cgroup v1 `memsw` figure kubelets
/// before 1.28 send): −1 is unlimited swap, N is N − memory limit of swap. 0 is unset.
/// `unified["memory.swap.max"]`, when sent too, wins (the caller asks this only without it).
fn swap_from_combined(resources: &cri::LinuxContainerResources) -> Result<Option<CgroupValue>, PolicyError> {
    let (combined, limit) = (resources.memory_swap_limit_in_bytes, resources.memory_limit_in_bytes);
    match combined {
        0 => Ok(None),
        -1 => Ok(Some(CgroupValue::Max)),
        n if n < -1 => Err(PolicyError::Invalid(format!("memory_swap_limit_in_bytes {n} is negative"))),
        _ if limit <= 0 => {
            Err(PolicyError::Invalid("memory_swap_limit_in_bytes (memory + swap) needs memory_limit_in_bytes".into()))
        }
        n if n < limit => Err(PolicyError::Invalid(format!(
            "memory_swap_limit_in_bytes {n} (memory + swap) is below memory_limit_in_bytes {limit}"
        ))),
        n => Ok(Some(CgroupValue::Bytes((n - limit) as u64))),
    }
}

/// Controllers whose cgroup v2 files a request may set through `unified`.
const UNIFIED_CONTROLLERS: [&str; 8] = ["cpu", "cpuset", "io", "memory", "pids", "hugetlb", "rdma", "misc"];

/// A `unified` key names one file of an allowed controller (`memory.high`,
/// `hugetlb.2MB.max`): never a path.
fn unified_key(key: &str) -> Result<(), PolicyError> {
    let plain = |rest: &str| {
        !rest.is_empty()
            && !rest.starts_with('.')
            && rest.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    match key.split_once('.') {
        Some((controller, rest))
            if UNIFIED_CONTROLLERS.contains(&controller) && plain(rest) && !rest.contains("..") =>
        {
            Ok(())
        }
        _ => Err(PolicyError::Invalid(format!(
            "unified key {key:?} is not a cgroup v2 file of the {} controllers",
            UNIFIED_CONTROLLERS.join(", ")
        ))),
    }
}

fn parse_unified(resources: &cri::LinuxContainerResources) -> Result<KubeletMemory, PolicyError> {
    let unified = &resources.unified;
    for key in unified.keys() {
        unified_key(key)?;
    }
    let value = |key: &str| -> Result<Option<CgroupValue>, PolicyError> {
        unified
            .get(key)
            .map(|v| {
                CgroupValue::parse(v).ok_or_else(|| {
                    PolicyError::Invalid(format!("unified {key} = {v:?} is neither a byte count nor \"max\""))
                })
            })
            .transpose()
    };
    let reset_aware = |v: Option<CgroupValue>| {
        v.map(|v| if v == CgroupValue::Bytes(0) { KubeletValue::Reset } else { KubeletValue::Set(v) })
    };
    Ok(KubeletMemory {
        swap_max: value("memory.swap.max")?.map_or_else(|| swap_from_combined(resources), |v| Ok(Some(v)))?,
        min: reset_aware(value("memory.min")?),
        low: reset_aware(value("memory.low")?),
        high: reset_aware(value("memory.high")?),
    })
}

/// The smallest request whose kubelet LimitedSwap value is `swap`, and the largest.
fn request_from_swap(swap: u64, facts: &MemoryFacts) -> Option<RequestEstimate> {
    if swap == 0 || facts.swap_total == 0 || facts.mem_total == 0 {
        return None;
    }
    let f = |r: u64| super::kubelet_math::kubelet_limited_swap(r, facts.mem_total, facts.swap_total);
    // Integer estimate, then settle the float rounding the way kubelet computes it.
    let guess = ((swap as u128 * facts.mem_total as u128) / facts.swap_total as u128) as u64;
    let mut low = guess.saturating_sub(2);
    while f(low) < swap {
        low += 1;
    }
    while low > 0 && f(low - 1) >= swap {
        low -= 1;
    }
    if f(low) != swap {
        return None;
    }
    let next = ((swap as u128 + 1) * facts.mem_total as u128 / facts.swap_total as u128) as u64;
    let mut high = next.saturating_add(2);
    while f(high) > swap {
        high -= 1;
    }
    Some(RequestEstimate { low, high, source: Source::KubeletSwapMax })
}

/// kubelet's Burstable formula `1000 − 1000·request/capacity`, clamped to [3, 999], inverted.
fn request_from_oom_score_adj(adj: i64, mem_total: u64) -> Option<RequestEstimate> {
    if !(3..=999).contains(&adj) || mem_total == 0 {
        return None;
    }
    let cap = mem_total as u128;
    let bound = |k: i64| (k as u128 * cap).div_ceil(1000) as u64;
    let (low, high) = match adj {
        3 => (bound(997), u64::MAX),
        999 => (0, bound(2).saturating_sub(1)),
        a => (bound(1000 - a), bound(1001 - a).saturating_sub(1)),
    };
    (low > 0).then_some(RequestEstimate { low, high, source: Source::OomScoreAdj })
}

pub fn gather(
    pod: &PodMemoryContext,
    container: &cri::ContainerConfig,
    resources: &cri::LinuxContainerResources,
    facts: &MemoryFacts,
) -> Result<MemoryInputs, PolicyError> {
    let mut notes = Vec::new();
    let kubelet = parse_unified(resources)?;
    let parent_qos = qos_from_cgroup_parent(pod.requested_cgroup_parent);
    let has_label = |labels: Option<&HashMap<String, String>>, key: &str| labels.is_some_and(|l| l.contains_key(key));
    let kubelet_managed = parent_qos.is_some()
        || has_label(pod.labels, "io.kubernetes.pod.uid")
        || has_label(Some(&container.labels), "io.kubernetes.container.name");
    let annotations = Annotations { pod, container, kubelet_managed };
    if kubelet_managed
        && [ANNOTATION_QOS, ANNOTATION_REQUEST, ANNOTATION_CRITICAL].iter().any(|k| annotations.any(k).is_some())
    {
        notes.push("swapcri.io/ annotations ignored: the pod is managed by kubelet".into());
    }
    let limit = resources.memory_limit_in_bytes.max(0) as u64;
    let (qos_class, qos_source) = qos_of(parent_qos, &annotations, resources, limit)?;
    let critical = critical_of(pod, &annotations, resources.oom_score_adj, qos_class)?;
    let request = request_of(&kubelet, &annotations, qos_class, limit, resources.oom_score_adj, facts)?;
    Ok(MemoryInputs { kubelet_managed, qos_class, qos_source, request, limit, critical, kubelet, notes })
}

/// crictl annotations: the container's first, then the pod's.
struct Annotations<'a> {
    pod: &'a PodMemoryContext<'a>,
    container: &'a cri::ContainerConfig,
    kubelet_managed: bool,
}

impl Annotations<'_> {
    fn any(&self, key: &str) -> Option<&str> {
        let pod = self.pod.annotations.and_then(|a| a.get(key));
        self.container.annotations.get(key).or(pod).map(String::as_str)
    }

    /// A `swapcri.io/` annotation, heeded only without kubelet markers.
    fn ours(&self, key: &str) -> Option<&str> {
        self.any(key).filter(|_| !self.kubelet_managed)
    }
}

fn qos_of(
    parent_qos: Option<QosClass>,
    annotations: &Annotations,
    resources: &cri::LinuxContainerResources,
    limit: u64,
) -> Result<(QosClass, Source), PolicyError> {
    let adj = resources.oom_score_adj;
    Ok(if let Some(q) = parent_qos {
        (q, Source::CgroupParent)
    } else if let Some(v) = annotations.ours(ANNOTATION_QOS) {
        let q = QosClass::parse(v).ok_or_else(|| {
            PolicyError::Invalid(format!("{ANNOTATION_QOS} = {v:?}: expected Guaranteed, Burstable or BestEffort"))
        })?;
        (q, Source::Annotation)
    } else if adj == OOM_GUARANTEED {
        (QosClass::Guaranteed, Source::OomScoreAdj)
    } else if adj == OOM_BEST_EFFORT {
        (QosClass::BestEffort, Source::OomScoreAdj)
    } else if limit == 0 && resources.cpu_quota <= 0 && resources.cpu_shares <= 2 {
        (QosClass::BestEffort, Source::Resources)
    } else {
        (QosClass::Burstable, Source::Resources)
    })
}

/// Why the pod never swaps as a critical one, if it is.
fn critical_of(
    pod: &PodMemoryContext,
    annotations: &Annotations,
    adj: i64,
    qos_class: QosClass,
) -> Result<Option<String>, PolicyError> {
    Ok(if let Some(src) = pod.annotations.and_then(|a| a.get(CONFIG_SOURCE)).filter(|s| *s != "api") {
        Some(format!("static pod ({CONFIG_SOURCE} = {src})"))
    } else if adj == OOM_GUARANTEED && qos_class != QosClass::Guaranteed {
        Some(format!("node-critical: oom_score_adj {OOM_GUARANTEED} on a {qos_class:?} pod"))
    } else if let Some(v) = annotations.ours(ANNOTATION_CRITICAL) {
        match v {
            "true" => Some(format!("{ANNOTATION_CRITICAL} = true")),
            "false" => None,
            other => {
                return Err(PolicyError::Invalid(format!("{ANNOTATION_CRITICAL} = {other:?}: expected true or false")))
            }
        }
    } else {
        None
    })
}

/// The memory request from the best source present.
fn request_of(
    kubelet: &KubeletMemory,
    annotations: &Annotations,
    qos_class: QosClass,
    limit: u64,
    adj: i64,
    facts: &MemoryFacts,
) -> Result<Option<RequestEstimate>, PolicyError> {
    let from_annotation = match annotations.ours(ANNOTATION_REQUEST) {
        Some(v) => Some(parse_bytes(v).ok_or_else(|| {
            PolicyError::Invalid(format!("{ANNOTATION_REQUEST} = {v:?}: expected bytes or a quantity such as 512Mi"))
        })?),
        None => None,
    };
    Ok(kubelet
        .min
        .and_then(KubeletValue::request_bytes)
        .or_else(|| kubelet.low.and_then(KubeletValue::request_bytes))
        .map(|b| RequestEstimate::exact(b, Source::KubeletUnified))
        .or_else(|| match kubelet.swap_max {
            Some(CgroupValue::Bytes(s)) => request_from_swap(s, facts),
            _ => None,
        })
        .or_else(|| from_annotation.map(|b| RequestEstimate::exact(b, Source::Annotation)))
        .or_else(|| {
            (qos_class == QosClass::Guaranteed && limit > 0).then(|| RequestEstimate::exact(limit, Source::Resources))
        })
        .or_else(|| {
            (qos_class == QosClass::Burstable).then(|| request_from_oom_score_adj(adj, facts.mem_total)).flatten()
        }))
}

#[cfg(test)]
mod combined_swap_tests {
    use super::*;

    #[test]
    fn memory_plus_swap_table() {
        let r = |limit, combined, unified: Option<&str>| cri::LinuxContainerResources {
            memory_limit_in_bytes: limit,
            memory_swap_limit_in_bytes: combined,
            unified: unified.map(|v| [("memory.swap.max".to_string(), v.to_string())].into()).unwrap_or_default(),
            ..Default::default()
        };
        let cases: &[(cri::LinuxContainerResources, Result<Option<CgroupValue>, ()>)] = &[
            (r(0, 0, None), Ok(None)),
            (r(100, -1, None), Ok(Some(CgroupValue::Max))),
            (r(0, -1, None), Ok(Some(CgroupValue::Max))),
            (r(100, 150, None), Ok(Some(CgroupValue::Bytes(50)))),
            (r(100, 100, None), Ok(Some(CgroupValue::Bytes(0)))),
            (r(100, 50, None), Err(())),
            (r(0, 50, None), Err(())),
            (r(100, -2, None), Err(())),
            // unified wins when both are sent.
            (r(100, -1, Some("4096")), Ok(Some(CgroupValue::Bytes(4096)))),
            (r(100, 150, Some("max")), Ok(Some(CgroupValue::Max))),
        ];
        for (resources, want) in cases {
            let got = parse_unified(resources).map(|k| k.swap_max).map_err(|_| ());
            assert_eq!(&got, want, "{resources:?}");
        }
    }

    #[test]
    fn unified_keys_are_file_names() {
        for ok in ["memory.high", "memory.oom.group", "hugetlb.2MB.max", "cpu.weight", "io.latency", "pids.max"] {
            assert!(unified_key(ok).is_ok(), "{ok}");
        }
        for bad in ["../../../etc/passwd", "memory/../x", "memory.", "memory..high", "memory.a/b", "cgroup.procs", "x"]
        {
            assert!(unified_key(bad).unwrap_err().to_string().contains("not a cgroup v2 file"), "{bad}");
        }
        let hostile = cri::LinuxContainerResources {
            unified: [("../../../etc/passwd".to_string(), "x".to_string())].into(),
            ..Default::default()
        };
        assert!(parse_unified(&hostile).is_err());
    }
}
