//! From inputs to a plan: the Kubernetes swap rules and the MemoryQoS designs.

use super::inputs::{KubeletValue, MemoryInputs};
use super::kubelet_math::{kubelet_limited_swap, throttle_high};
use crate::config::{Reservation, SwapAuthority, SwapBehavior};
use crate::model::memory::{CgroupValue, Decision, MemoryPlan, QosClass, SwapDisagreement};
use crate::model::node::MemoryFacts;
use crate::policy::PolicyError;

/// The configuration the plan depends on, and the pod's cgroup situation.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSettings {
    pub behavior: SwapBehavior,
    pub authority: SwapAuthority,
    pub reserved_for_system: u64,
    pub reservation: Reservation,
    pub throttling_factor: Option<f64>,
    /// cgroup v2 memory files exist on this node.
    pub cgroup_v2: bool,
    /// swapcri owns the pod's parent cgroup (no kubelet parent).
    pub owns_pod_parent: bool,
}

/// The swap value swapcri's own rules give (NoSwap or LimitedSwap).
fn own_swap(inputs: &MemoryInputs, facts: &MemoryFacts, settings: &PlanSettings) -> (u64, String) {
    if settings.behavior == SwapBehavior::NoSwap {
        return (0, "NoSwap: no container swaps".into());
    }
    if inputs.qos_class != QosClass::Burstable {
        return (0, format!("LimitedSwap: {:?} pods do not swap", inputs.qos_class));
    }
    if let Some(why) = &inputs.critical {
        return (0, format!("LimitedSwap: critical pod ({why}) does not swap"));
    }
    let Some(request) = inputs.request else {
        return (0, "LimitedSwap: no memory request known".into());
    };
    if inputs.limit > 0 && request.may_equal(inputs.limit) {
        return (0, "LimitedSwap: memory request equals the limit (opt-out)".into());
    }
    if request.low > facts.mem_total {
        return (0, "LimitedSwap: memory request exceeds node memory".into());
    }
    let available = facts.swap_total.saturating_sub(settings.reserved_for_system);
    if available == 0 {
        return (0, "LimitedSwap: all swap is reserved for the system".into());
    }
    let swap = kubelet_limited_swap(request.low, facts.mem_total, available);
    let reason = format!(
        "LimitedSwap: request {} / MemTotal {} × pod swap {} (SwapTotal {} − reserved {})",
        request.low, facts.mem_total, available, facts.swap_total, settings.reserved_for_system
    );
    (swap, reason)
}

fn swap_decision(
    inputs: &MemoryInputs,
    facts: &MemoryFacts,
    settings: &PlanSettings,
) -> (Decision, Option<SwapDisagreement>) {
    if !settings.cgroup_v2 {
        return (Decision::skip("cgroup v1: swap limits do not apply"), None);
    }
    if !facts.swap_accounting {
        return (Decision::skip("no memory.swap.max on this node (swap accounting off)"), None);
    }
    if facts.swap_total == 0 {
        return (Decision::skip("the node has no swap"), None);
    }
    let kubelet = inputs.kubelet.swap_max;
    if settings.behavior == SwapBehavior::FollowKubelet {
        return match kubelet {
            Some(v) => (Decision::set(v, "sent by kubelet"), None),
            None => (Decision::set(CgroupValue::Bytes(0), "kubelet sent none: no swap (follow-kubelet)"), None),
        };
    }
    let (ours, reason) = own_swap(inputs, facts, settings);
    let ours = CgroupValue::Bytes(ours);
    match kubelet {
        Some(theirs) if theirs != ours => {
            let applied = match settings.authority {
                SwapAuthority::Kubelet => "kubelet",
                SwapAuthority::Runtime => "runtime",
            };
            let disagreement = SwapDisagreement { kubelet: theirs, runtime: ours, applied: applied.into() };
            let decision = match settings.authority {
                SwapAuthority::Kubelet => {
                    Decision::set(theirs, format!("sent by kubelet (swapcri's own: {}; {reason})", ours.render()))
                }
                SwapAuthority::Runtime => {
                    Decision::set(ours, format!("{reason} (kubelet sent {}; authority runtime)", theirs.render()))
                }
            };
            (decision, Some(disagreement))
        }
        Some(_) => (Decision::set(ours, format!("{reason}; kubelet sent the same")), None),
        None => (Decision::set(ours, reason), None),
    }
}

/// memory.min / memory.low: kubelet's (follow-kubelet) or our reservation design.
fn reservation(inputs: &MemoryInputs, settings: &PlanSettings) -> (Decision, Decision) {
    let kubelet = |v: Option<KubeletValue>, file: &str| match v {
        Some(KubeletValue::Set(v)) => Decision::set(v, "sent by kubelet"),
        Some(KubeletValue::Reset) => Decision::set(CgroupValue::Bytes(0), "reset by kubelet"),
        None => Decision::skip(format!("kubelet sent no {file}")),
    };
    let request = inputs.request.map(|r| r.low).filter(|r| *r > 0);
    let ours = |file: &str, design: &str| match request {
        Some(r) => Decision::set(CgroupValue::Bytes(r), format!("{design}: {file} = memory request")),
        None => Decision::skip(format!("{design}: no memory request known")),
    };
    match settings.reservation {
        Reservation::FollowKubelet => {
            (kubelet(inputs.kubelet.min, "memory.min"), kubelet(inputs.kubelet.low, "memory.low"))
        }
        Reservation::None => (Decision::skip("reservation none"), Decision::skip("reservation none")),
        Reservation::Min => (ours("memory.min", "reservation min"), Decision::skip("reservation min uses memory.min")),
        Reservation::Tiered => match inputs.qos_class {
            QosClass::Guaranteed => {
                (ours("memory.min", "tiered, Guaranteed"), Decision::skip("tiered: Guaranteed uses memory.min"))
            }
            QosClass::Burstable => {
                (Decision::skip("tiered: Burstable uses memory.low"), ours("memory.low", "tiered, Burstable"))
            }
            QosClass::BestEffort => (
                Decision::skip("tiered: BestEffort has no request"),
                Decision::skip("tiered: BestEffort has no request"),
            ),
        },
    }
}

fn high_decision(inputs: &MemoryInputs, facts: &MemoryFacts, settings: &PlanSettings) -> Decision {
    match inputs.kubelet.high {
        Some(KubeletValue::Set(v)) => return Decision::set(v, "sent by kubelet"),
        Some(KubeletValue::Reset) => return Decision::set(CgroupValue::Max, "reset by kubelet"),
        None => {}
    }
    let Some(factor) = settings.throttling_factor else {
        return Decision::skip("no throttling factor configured");
    };
    let request = inputs.request.map(|r| r.low).unwrap_or(0);
    let (limit, limit_name) =
        if inputs.limit > 0 { (inputs.limit, "limit") } else { (facts.allocatable, "node allocatable") };
    if inputs.limit > 0 && inputs.request.is_some_and(|r| r.may_equal(inputs.limit)) {
        return Decision::skip("memory request equals the limit");
    }
    let high = throttle_high(request, limit, factor, facts.page_size);
    if high <= request {
        return Decision::skip(format!("computed memory.high {high} is not above the request {request}"));
    }
    Decision::set(
        CgroupValue::Bytes(high),
        format!("request {request} + {factor} × ({limit_name} {limit} − request), page-aligned"),
    )
}

pub fn plan(inputs: &MemoryInputs, facts: &MemoryFacts, settings: &PlanSettings) -> Result<MemoryPlan, PolicyError> {
    let mut notes = inputs.notes.clone();
    if matches!(settings.reservation, Reservation::Min | Reservation::Tiered) && !settings.owns_pod_parent {
        return Err(PolicyError::Unsupported(
            "memory_qos.reservation \"min\"/\"tiered\" needs a pod cgroup swapcri owns; this pod's cgroup parent \
             belongs to kubelet, whose parents would cap the protection (use \"follow-kubelet\" under kubelet)"
                .into(),
        ));
    }
    let (swap_max, swap_disagreement) = swap_decision(inputs, facts, settings);
    let (mut min, mut low, high) = if settings.cgroup_v2 {
        let (min, low) = reservation(inputs, settings);
        (min, low, high_decision(inputs, facts, settings))
    } else {
        let skip = || Decision::skip("cgroup v1: no memory.min/low/high");
        (skip(), skip(), skip())
    };
    for d in [&mut min, &mut low] {
        if let Some(CgroupValue::Bytes(b)) = d.value {
            if b > facts.mem_total && facts.mem_total > 0 {
                d.reason.push_str(" (larger than node memory)");
            }
        }
    }
    if high.value.is_some() && facts.kernel.is_some_and(|k| !k.at_least(5, 9)) {
        notes.push(format!("memory.high on kernel {} (< 5.9) can livelock under pressure", facts.kernel_release));
    }
    if let Some(d) = &swap_disagreement {
        notes.push(format!(
            "swap disagreement: kubelet sent {}, swapcri computes {}; {} applied",
            d.kubelet.render(),
            d.runtime.render(),
            d.applied
        ));
    }
    Ok(MemoryPlan {
        qos_class: inputs.qos_class,
        qos_source: inputs.qos_source,
        request: inputs.request,
        limit: inputs.limit,
        critical: inputs.critical.clone(),
        swap_max,
        min,
        low,
        high,
        swap_disagreement,
        notes,
    })
}
