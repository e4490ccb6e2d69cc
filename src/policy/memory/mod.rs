//! The swap and memory QoS policy: from what a CRI request carries and the
//! node's facts to a `MemoryPlan` — every value with its reason — rendered into the OCI
//! spec's `linux.resources.unified`. Pure: no I/O.

mod decide;
mod inputs;
mod kubelet_math;
mod quantity;
#[cfg(test)]
mod tests;

pub use decide::{plan, PlanSettings};
pub use inputs::{gather, KubeletMemory, MemoryInputs, PodMemoryContext};
pub use quantity::parse_bytes as parse_quantity;

pub use crate::model::memory::{
    CgroupValue, Decision, MemoryPlan, QosClass, RequestEstimate, Source, SwapDisagreement, PLAN_FILES,
};
pub use crate::model::node::{AllocatableSource, KernelVersion, MemoryFacts};
