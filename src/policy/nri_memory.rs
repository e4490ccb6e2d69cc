//! The swap policy over NRI plugins: a plugin's memory and swap values pass through the
//! same plan as kubelet's. A plugin may lower swap; raising `memory.swap.max` above the
//! policy's value, or giving swap to a container the policy keeps off it (Guaranteed,
//! critical, NoSwap), is refused unless the operator allows it. Protection (`memory.min`,
//! `memory.low`) may not exceed the request, and `memory.high` may not go below it.

use std::collections::BTreeMap;

use crate::model::memory::{CgroupValue, Decision, MemoryPlan, QosClass};

/// What the operator lets plugins do beyond the policy (`[nri]`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Allowances {
    pub raise: bool,
    pub protected: bool,
}

/// A plugin's memory values: the OCI fields and the plan's files among `unified`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryAsk {
    pub limit: Option<i64>,
    /// OCI's memory+swap limit (-1: unlimited).
    pub swap: Option<i64>,
    /// memory.swap.max, memory.high, memory.min, memory.low.
    pub files: BTreeMap<String, String>,
    /// Field -> plugin, for the decisions' reasons.
    pub owners: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct Refusal {
    pub field: String,
    pub reason: String,
}

fn refuse(field: &str, reason: String) -> Refusal {
    Refusal { field: field.into(), reason }
}

/// The plan with the plugins' values in it, or the first one the policy refuses. Where the
/// memory controller is not on cgroup v2 (`cgroup_v2` false) the plan writes no file, and a
/// plugin's file values are checked and noted, not applied.
pub fn review(plan: &MemoryPlan, ask: &MemoryAsk, allow: Allowances, cgroup_v2: bool) -> Result<MemoryPlan, Refusal> {
    let mut out = plan.clone();
    let owner = |field: &str| ask.owners.get(field).cloned().unwrap_or_else(|| "an NRI plugin".into());
    if let Some(limit) = ask.limit {
        if limit == 0 || limit < -1 {
            return Err(refuse("memory.limit", format!("{limit} is not a limit")));
        }
        out.limit = u64::try_from(limit).unwrap_or(0);
        out.notes.push(format!("memory limit {} set by NRI plugin {}", limit, owner("memory.limit")));
    }
    if let Some(swap) = swap_asked(ask, out.limit)? {
        let field = if ask.files.contains_key("memory.swap.max") { "unified:memory.swap.max" } else { "memory.swap" };
        check_swap(plan, swap, allow)?;
        if !cgroup_v2 || plan.swap_max.value.is_none() {
            // Where the policy writes no swap file (cgroup v1, no swap accounting), nor
            // does a plugin.
            let why =
                if cgroup_v2 { plan.swap_max.reason.clone() } else { "the memory controller is on cgroup v1".into() };
            out.notes.push(format!("swap {} from NRI plugin {} not applied: {why}", swap.render(), owner(field)));
            return review_files(out, ask, &owner, cgroup_v2);
        }
        let policy = plan.swap_max.value.map(|v| v.render()).unwrap_or_else(|| "unset".into());
        out.swap_max = Decision::set(swap, format!("set by NRI plugin {} (policy: {policy})", owner(field)));
    }
    review_files(out, ask, &owner, cgroup_v2)
}

/// memory.high, memory.min and memory.low.
fn review_files(
    mut out: MemoryPlan,
    ask: &MemoryAsk,
    owner: &dyn Fn(&str) -> String,
    cgroup_v2: bool,
) -> Result<MemoryPlan, Refusal> {
    let request = out.request.map(|r| (r.low, r.high));
    for (file, slot) in [("memory.high", 0), ("memory.min", 1), ("memory.low", 2)] {
        let Some(text) = ask.files.get(file) else { continue };
        let value = CgroupValue::parse(text).ok_or_else(|| refuse(file, format!("{text:?} is not bytes or max")))?;
        check_protection(file, value, request)?;
        if !cgroup_v2 {
            let who = owner(&format!("unified:{file}"));
            out.notes.push(format!("{file} {} from NRI plugin {who} not applied: cgroup v1", value.render()));
            continue;
        }
        let decision = Decision::set(value, format!("set by NRI plugin {}", owner(&format!("unified:{file}"))));
        match slot {
            0 => out.high = decision,
            1 => out.min = decision,
            _ => out.low = decision,
        }
    }
    Ok(out)
}

/// The swap a plugin asks for as memory.swap.max, from `unified` or from OCI's
/// memory+swap (which needs a limit to subtract).
fn swap_asked(ask: &MemoryAsk, limit: u64) -> Result<Option<CgroupValue>, Refusal> {
    if let Some(text) = ask.files.get("memory.swap.max") {
        let value = CgroupValue::parse(text)
            .ok_or_else(|| refuse("memory.swap.max", format!("{text:?} is not bytes or max")))?;
        return Ok(Some(value));
    }
    match ask.swap {
        None => Ok(None),
        Some(-1) => Ok(Some(CgroupValue::Max)),
        Some(total) if total < 0 => Err(refuse("memory.swap", format!("{total} is not a limit"))),
        Some(_) if limit == 0 => Err(refuse("memory.swap", "memory+swap needs a memory limit to subtract".into())),
        Some(total) if (total as u64) < limit => {
            Err(refuse("memory.swap", format!("memory+swap {total} is below the memory limit {limit}")))
        }
        Some(total) => Ok(Some(CgroupValue::Bytes(total as u64 - limit))),
    }
}

fn check_swap(plan: &MemoryPlan, swap: CgroupValue, allow: Allowances) -> Result<(), Refusal> {
    let wants_swap = swap != CgroupValue::Bytes(0);
    let protected = match (&plan.critical, plan.qos_class, plan.swap_max.value) {
        (Some(why), _, _) => Some(format!("a critical pod ({why})")),
        (None, QosClass::Guaranteed, _) => Some("a Guaranteed pod".to_string()),
        (None, _, Some(CgroupValue::Bytes(0))) => Some("a container the swap policy keeps off swap".to_string()),
        _ => None,
    };
    if let Some(who) = protected.as_ref().filter(|_| wants_swap && !allow.protected) {
        return Err(refuse("memory.swap.max", format!("no swap for {who} (nri.allow_swap_for_protected is off)")));
    }
    let above = match (plan.swap_max.value, swap) {
        (Some(CgroupValue::Bytes(policy)), CgroupValue::Bytes(asked)) => asked > policy,
        (Some(CgroupValue::Bytes(_)), CgroupValue::Max) => true,
        _ => false,
    };
    if above && !allow.raise && (protected.is_none() || !allow.protected) {
        let policy = plan.swap_max.value.map(|v| v.render()).unwrap_or_default();
        return Err(refuse(
            "memory.swap.max",
            format!("{} is above the swap policy's {policy} (nri.allow_swap_raise is off)", swap.render()),
        ));
    }
    Ok(())
}

/// Protection up to the request; memory.high from the request up.
fn check_protection(file: &str, value: CgroupValue, request: Option<(u64, u64)>) -> Result<(), Refusal> {
    let Some((low, high)) = request else { return Ok(()) };
    match (file, value) {
        ("memory.high", CgroupValue::Bytes(v)) if v < low => Err(refuse(
            file,
            format!("{v} is below the memory request {low}: the container would be throttled short of it"),
        )),
        ("memory.min" | "memory.low", CgroupValue::Max) => Err(refuse(file, "unbounded protection".into())),
        ("memory.min" | "memory.low", CgroupValue::Bytes(v)) if high != u64::MAX && v > high => {
            Err(refuse(file, format!("{v} protects more than the memory request {high}")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
