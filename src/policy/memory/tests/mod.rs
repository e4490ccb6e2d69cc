//! The Kubernetes swap and memory QoS rules as tables: each case is a CRI request on a node under a configuration, and
//! the values the plan must hold.

use std::collections::HashMap;

use crate::cri;

use super::kubelet_math::{kubelet_limited_swap, throttle_high};
use super::*;
use crate::config::{Reservation, SwapAuthority, SwapBehavior};
use crate::policy::PolicyError;

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

#[derive(Clone)]
struct Case {
    name: &'static str,
    parent: &'static str,
    pod_annotations: Vec<(&'static str, &'static str)>,
    annotations: Vec<(&'static str, &'static str)>,
    unified: Vec<(&'static str, &'static str)>,
    oom: i64,
    limit: u64,
    cpu_shares: i64,
    mem: u64,
    swap: u64,
    v2: bool,
    accounting: bool,
    kernel: (u32, u32),
    behavior: SwapBehavior,
    authority: SwapAuthority,
    reserved: u64,
    reservation: Reservation,
    factor: Option<f64>,
}

/// A 16 GiB node with 8 GiB swap on cgroup v2, follow-kubelet, a crictl Burstable pod.
fn base(name: &'static str) -> Case {
    Case {
        name,
        parent: "",
        pod_annotations: vec![],
        annotations: vec![],
        unified: vec![],
        oom: 0,
        limit: 0,
        cpu_shares: 512,
        mem: 16 * GI,
        swap: 8 * GI,
        v2: true,
        accounting: true,
        kernel: (6, 1),
        behavior: SwapBehavior::FollowKubelet,
        authority: SwapAuthority::Kubelet,
        reserved: 0,
        reservation: Reservation::FollowKubelet,
        factor: None,
    }
}

fn limited(name: &'static str) -> Case {
    Case { behavior: SwapBehavior::LimitedSwap, ..base(name) }
}

/// kubelet's Burstable pod, as it sends one (cgroupfs parent, oom_score_adj for 1 GiB).
fn kubelet_burstable(name: &'static str) -> Case {
    Case { parent: "/kubepods/burstable/pod1234", oom: 938, limit: 2 * GI, ..base(name) }
}

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn run(case: &Case) -> Result<MemoryPlan, PolicyError> {
    let facts = MemoryFacts {
        mem_total: case.mem,
        swap_total: case.swap,
        page_size: 4096,
        kernel_release: format!("{}.{}.0", case.kernel.0, case.kernel.1),
        kernel: Some(KernelVersion { major: case.kernel.0, minor: case.kernel.1 }),
        swap_accounting: case.v2 && case.accounting,
        allocatable: case.mem - GI,
        allocatable_source: AllocatableSource::Config,
    };
    let pod_annotations = map(&case.pod_annotations);
    let labels = HashMap::new();
    let pod = PodMemoryContext {
        requested_cgroup_parent: case.parent,
        annotations: Some(&pod_annotations),
        labels: Some(&labels),
    };
    let container = cri::ContainerConfig { annotations: map(&case.annotations), ..Default::default() };
    let resources = cri::LinuxContainerResources {
        oom_score_adj: case.oom,
        memory_limit_in_bytes: case.limit as i64,
        cpu_shares: case.cpu_shares,
        unified: map(&case.unified),
        ..Default::default()
    };
    let inputs = gather(&pod, &container, &resources, &facts)?;
    let settings = PlanSettings {
        behavior: case.behavior,
        authority: case.authority,
        reserved_for_system: case.reserved,
        reservation: case.reservation,
        throttling_factor: case.factor,
        cgroup_v2: case.v2,
        owns_pod_parent: case.parent.is_empty(),
    };
    plan(&inputs, &facts, &settings)
}

fn bytes(b: u64) -> Option<CgroupValue> {
    Some(CgroupValue::Bytes(b))
}

/// (case, expected memory.swap.max, a word the reason must contain)
fn swap_cases() -> Vec<(Case, Option<CgroupValue>, &'static str)> {
    [follow_kubelet_cases(), limited_share_cases(), limited_qos_cases(), request_source_cases(), disagreement_cases()]
        .concat()
}

/// follow-kubelet: kubelet's value, else none.
fn follow_kubelet_cases() -> Vec<(Case, Option<CgroupValue>, &'static str)> {
    vec![
        (
            Case {
                unified: vec![("memory.swap.max", "536870912")],
                ..kubelet_burstable("kubelet LimitedSwap value applied")
            },
            bytes(536870912),
            "sent by kubelet",
        ),
        (kubelet_burstable("kubelet sent none: NoSwap"), bytes(0), "kubelet sent none"),
        (
            Case { unified: vec![("memory.swap.max", "0")], ..kubelet_burstable("kubelet NoSwap 0") },
            bytes(0),
            "sent by kubelet",
        ),
        (
            Case {
                parent: "/kubepods/besteffort/pod1",
                oom: 1000,
                limit: 0,
                ..base("BestEffort, nothing sent: 0, not unbounded")
            },
            bytes(0),
            "kubelet sent none",
        ),
        (Case { swap: 0, ..kubelet_burstable("node without swap: nothing written") }, None, "no swap"),
        (
            Case {
                v2: false,
                unified: vec![("memory.swap.max", "536870912")],
                ..kubelet_burstable("cgroup v1: nothing written")
            },
            None,
            "cgroup v1",
        ),
        (
            Case { accounting: false, ..kubelet_burstable("no swap accounting: nothing written") },
            None,
            "swap accounting",
        ),
    ]
}

/// LimitedSwap computed by swapcri: the share of a request, reserved swap, opt-outs.
fn limited_share_cases() -> Vec<(Case, Option<CgroupValue>, &'static str)> {
    let req_1g = ("swapcri.io/memory-request", "1Gi");
    vec![
        (
            Case { annotations: vec![req_1g], ..limited("crictl Burstable 1Gi of 16Gi, 8Gi swap") },
            bytes(536870912),
            "LimitedSwap: request 1073741824",
        ),
        (
            Case { annotations: vec![req_1g], limit: 2 * GI, ..limited("crictl request 1Gi limit 2Gi") },
            bytes(536870912),
            "LimitedSwap",
        ),
        (
            Case { annotations: vec![req_1g], limit: GI, ..limited("request == limit opts out") },
            bytes(0),
            "equals the limit",
        ),
        (Case { cpu_shares: 2, ..limited("crictl without request or limit: BestEffort") }, bytes(0), "BestEffort pods"),
        (limited("crictl Burstable, request unknown"), bytes(0), "no memory request"),
        (
            Case { annotations: vec![req_1g], reserved: 4 * GI, ..limited("4Gi reserved for the system") },
            bytes(268435456),
            "reserved 4294967296",
        ),
        (
            Case { annotations: vec![req_1g], reserved: 8 * GI, ..limited("all swap reserved") },
            bytes(0),
            "all swap is reserved",
        ),
        (
            Case { annotations: vec![("swapcri.io/memory-request", "17Gi")], ..limited("request above node memory") },
            bytes(0),
            "exceeds node memory",
        ),
    ]
}

/// LimitedSwap by QoS class and criticality: Guaranteed, BestEffort, critical and static pods.
fn limited_qos_cases() -> Vec<(Case, Option<CgroupValue>, &'static str)> {
    let req_1g = ("swapcri.io/memory-request", "1Gi");
    vec![
        (
            Case {
                parent: "/kubepods/pod1",
                oom: -997,
                limit: GI,
                behavior: SwapBehavior::LimitedSwap,
                ..base("Guaranteed")
            },
            bytes(0),
            "Guaranteed pods",
        ),
        (
            Case {
                parent: "/kubepods/besteffort/pod1",
                oom: 1000,
                behavior: SwapBehavior::LimitedSwap,
                ..base("BestEffort")
            },
            bytes(0),
            "BestEffort pods",
        ),
        (
            Case {
                oom: -997,
                behavior: SwapBehavior::LimitedSwap,
                ..kubelet_burstable("node-critical: -997 on a Burstable parent")
            },
            bytes(0),
            "node-critical",
        ),
        (
            Case {
                pod_annotations: vec![("kubernetes.io/config.source", "file")],
                behavior: SwapBehavior::LimitedSwap,
                ..kubelet_burstable("static pod")
            },
            bytes(0),
            "static pod",
        ),
        (
            Case {
                pod_annotations: vec![("kubernetes.io/config.source", "api")],
                unified: vec![("memory.min", "1073741824")],
                behavior: SwapBehavior::LimitedSwap,
                ..kubelet_burstable("api pod is not static")
            },
            bytes(536870912),
            "LimitedSwap",
        ),
        (
            Case {
                annotations: vec![req_1g, ("swapcri.io/critical", "true")],
                ..limited("crictl critical annotation")
            },
            bytes(0),
            "critical pod",
        ),
    ]
}

/// LimitedSwap with the request from kubelet's memory.min or memory.low, or kubelet agreeing.
fn request_source_cases() -> Vec<(Case, Option<CgroupValue>, &'static str)> {
    vec![
        (
            Case {
                unified: vec![("memory.min", "1073741824")],
                behavior: SwapBehavior::LimitedSwap,
                ..kubelet_burstable("request from kubelet memory.min")
            },
            bytes(536870912),
            "request 1073741824",
        ),
        (
            Case {
                parent: "kubepods-burstable-pod1234.slice",
                unified: vec![("memory.low", "1073741824")],
                behavior: SwapBehavior::LimitedSwap,
                ..kubelet_burstable("systemd parent, request from memory.low")
            },
            bytes(536870912),
            "LimitedSwap",
        ),
        (
            Case {
                unified: vec![("memory.swap.max", "536870912")],
                behavior: SwapBehavior::LimitedSwap,
                ..kubelet_burstable("kubelet agrees")
            },
            bytes(536870912),
            "kubelet sent the same",
        ),
    ]
}

/// kubelet's value and swapcri's disagree; nodes without swap.
fn disagreement_cases() -> Vec<(Case, Option<CgroupValue>, &'static str)> {
    let req_1g = ("swapcri.io/memory-request", "1Gi");
    vec![
        (
            Case {
                unified: vec![("memory.swap.max", "0"), ("memory.min", "1073741824")],
                behavior: SwapBehavior::LimitedSwap,
                ..kubelet_burstable("kubelet 0, swapcri LimitedSwap, authority kubelet")
            },
            bytes(0),
            "swapcri's own: 536870912",
        ),
        (
            Case {
                unified: vec![("memory.swap.max", "0"), ("memory.min", "1073741824")],
                behavior: SwapBehavior::LimitedSwap,
                authority: SwapAuthority::Runtime,
                ..kubelet_burstable("kubelet 0, swapcri LimitedSwap, authority runtime")
            },
            bytes(536870912),
            "authority runtime",
        ),
        (
            Case {
                unified: vec![("memory.swap.max", "536870912")],
                behavior: SwapBehavior::NoSwap,
                ..kubelet_burstable("NoSwap configured, kubelet LimitedSwap, authority kubelet")
            },
            bytes(536870912),
            "swapcri's own: 0",
        ),
        (
            Case {
                unified: vec![("memory.swap.max", "536870912")],
                behavior: SwapBehavior::NoSwap,
                authority: SwapAuthority::Runtime,
                ..kubelet_burstable("NoSwap configured, authority runtime")
            },
            bytes(0),
            "NoSwap",
        ),
        (
            Case { behavior: SwapBehavior::NoSwap, annotations: vec![req_1g], ..base("NoSwap, crictl Burstable") },
            bytes(0),
            "NoSwap",
        ),
        (Case { behavior: SwapBehavior::NoSwap, swap: 0, ..base("NoSwap on a node without swap") }, None, "no swap"),
    ]
}

#[test]
fn swap_limits_follow_the_rules() {
    for (case, expected, reason) in swap_cases() {
        let plan = run(&case).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(plan.swap_max.value, expected, "{}: {:?}", case.name, plan.swap_max);
        assert!(
            plan.swap_max.reason.contains(reason),
            "{}: reason {:?} lacks {reason:?}",
            case.name,
            plan.swap_max.reason
        );
        assert_eq!(plan.unified().get("memory.swap.max"), expected.map(|v| v.render()).as_ref(), "{}", case.name);
    }
}

#[test]
fn disagreements_are_recorded_with_both_values() {
    let cases = swap_cases();
    let find = |name: &str| cases.iter().find(|(c, _, _)| c.name.starts_with(name)).unwrap().0.clone();
    let plan = run(&find("kubelet 0, swapcri LimitedSwap, authority kubelet")).unwrap();
    let d = plan.swap_disagreement.expect("disagreement");
    assert_eq!(
        (d.kubelet, d.runtime, d.applied.as_str()),
        (CgroupValue::Bytes(0), CgroupValue::Bytes(536870912), "kubelet")
    );
    assert!(plan.notes.iter().any(|n| n.contains("swap disagreement")), "{:?}", plan.notes);
    assert!(run(&find("kubelet agrees")).unwrap().swap_disagreement.is_none());
    assert!(
        run(&find("kubelet LimitedSwap value applied")).unwrap().swap_disagreement.is_none(),
        "follow-kubelet never disagrees"
    );
}

mod plans;
