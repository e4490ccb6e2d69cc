//! A container's memory and swap plan as decided by the policy and kept in its status:
//! plain values that policy, cgroup I/O and the store all share.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The cgroup v2 files the plan owns; kubelet's values for them are inputs, never passed
/// through unexamined.
pub const PLAN_FILES: [&str; 4] = ["memory.swap.max", "memory.min", "memory.low", "memory.high"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "guaranteed" => Some(QosClass::Guaranteed),
            "burstable" => Some(QosClass::Burstable),
            "besteffort" => Some(QosClass::BestEffort),
            _ => None,
        }
    }
}

/// Where an input came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// kubelet's `unified` memory.min / memory.low: the exact request.
    KubeletUnified,
    /// Inverted from kubelet's LimitedSwap `memory.swap.max`.
    KubeletSwapMax,
    /// kubelet's QoS cgroup in `cgroup_parent`.
    CgroupParent,
    /// `kubernetes.io/config.source` other than `api`.
    StaticPod,
    /// A `swapcri.io/` annotation (only without kubelet markers).
    Annotation,
    /// The resource fields: memory limit, CPU shares and quota.
    Resources,
    /// Bounded from kubelet's Burstable oom_score_adj formula.
    OomScoreAdj,
}

/// A value as written to a cgroup file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupValue {
    Bytes(u64),
    Max,
}

impl CgroupValue {
    pub fn render(self) -> String {
        match self {
            CgroupValue::Bytes(b) => b.to_string(),
            CgroupValue::Max => "max".to_string(),
        }
    }

    /// What the kernel stores: byte values rounded down to whole pages.
    pub fn page_rounded(self, page_size: u64) -> CgroupValue {
        match self {
            CgroupValue::Bytes(b) => CgroupValue::Bytes(b / page_size * page_size),
            CgroupValue::Max => CgroupValue::Max,
        }
    }

    pub fn parse(s: &str) -> Option<CgroupValue> {
        match s.trim() {
            "max" => Some(CgroupValue::Max),
            n => n.parse().ok().map(CgroupValue::Bytes),
        }
    }
}

impl Serialize for CgroupValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.render())
    }
}

impl<'de> Deserialize<'de> for CgroupValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CgroupValue::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not bytes or \"max\"")))
    }
}

/// One file's decision: the value to write (None: leave the file alone) and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub value: Option<CgroupValue>,
    pub reason: String,
}

impl Decision {
    pub fn set(value: CgroupValue, reason: impl Into<String>) -> Self {
        Decision { value: Some(value), reason: reason.into() }
    }

    pub fn skip(reason: impl Into<String>) -> Self {
        Decision { value: None, reason: reason.into() }
    }
}

/// The memory request as far as it can be known: exact (`low == high`) or a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestEstimate {
    pub low: u64,
    /// Inclusive upper bound (`u64::MAX`: unbounded).
    pub high: u64,
    pub source: Source,
}

impl RequestEstimate {
    pub fn exact(bytes: u64, source: Source) -> Self {
        RequestEstimate { low: bytes, high: bytes, source }
    }

    pub fn may_equal(&self, bytes: u64) -> bool {
        self.low <= bytes && bytes <= self.high
    }
}

/// A swap value kubelet sent and swapcri's own that differs from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwapDisagreement {
    pub kubelet: CgroupValue,
    pub runtime: CgroupValue,
    /// "kubelet" or "runtime".
    pub applied: String,
}

/// Everything decided about one container's memory and swap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPlan {
    pub qos_class: QosClass,
    pub qos_source: Source,
    pub request: Option<RequestEstimate>,
    /// Memory limit in bytes (0: none).
    pub limit: u64,
    /// Why the pod counts as critical, if it does.
    pub critical: Option<String>,
    pub swap_max: Decision,
    pub min: Decision,
    pub low: Decision,
    pub high: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_disagreement: Option<SwapDisagreement>,
    /// What the operator should know (inputs ignored, kernel caveats).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl MemoryPlan {
    /// The plan's files and values, as `linux.resources.unified` carries them.
    pub fn unified(&self) -> BTreeMap<String, String> {
        self.files().into_iter().map(|(file, value)| (file.to_string(), value.render())).collect()
    }

    /// The files the plan writes, with their values.
    pub fn files(&self) -> Vec<(&'static str, CgroupValue)> {
        [
            ("memory.swap.max", &self.swap_max),
            ("memory.min", &self.min),
            ("memory.low", &self.low),
            ("memory.high", &self.high),
        ]
        .into_iter()
        .filter_map(|(file, d)| d.value.map(|v| (file, v)))
        .collect()
    }

    /// A plan of this class that writes nothing, for tests.
    #[cfg(test)]
    pub fn of_class(qos_class: QosClass, critical: Option<&str>) -> MemoryPlan {
        MemoryPlan {
            qos_class,
            qos_source: Source::Resources,
            request: None,
            limit: 0,
            critical: critical.map(String::from),
            swap_max: Decision::skip(""),
            min: Decision::skip(""),
            low: Decision::skip(""),
            high: Decision::skip(""),
            swap_disagreement: None,
            notes: vec![],
        }
    }

    /// Bytes of `memory.min` / `memory.low` this container asks of its parents.
    pub fn reserved(&self) -> (u64, u64) {
        let bytes = |d: &Decision| match d.value {
            Some(CgroupValue::Bytes(b)) => b,
            _ => 0,
        };
        (bytes(&self.min), bytes(&self.low))
    }
}
