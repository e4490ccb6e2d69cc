//! The NRI review of a memory plan: the memory and swap values plugins ask for, as the swap
//! policy allows them (at create and on updates).

use crate::error::Error;
use crate::nri::Adjustment;
use crate::service::pod_service::PodService;

impl PodService {
    /// The plan with the plugins' memory and swap values, as the swap policy allows them.
    pub(in crate::service) fn review_plan(
        &self,
        plan: &crate::model::memory::MemoryPlan,
        adjustment: &Adjustment,
    ) -> Result<crate::model::memory::MemoryPlan, Error> {
        let r = &adjustment.resources;
        let files = r
            .unified
            .iter()
            .filter(|(k, _)| crate::model::memory::PLAN_FILES.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let ask = crate::policy::nri_memory::MemoryAsk {
            limit: r.memory_limit,
            swap: r.memory_swap,
            files,
            owners: adjustment.owners.clone(),
        };
        crate::policy::nri_memory::review(plan, &ask, self.nri.swap_allowances(), self.node.cgroup_v2()).map_err(
            |refusal| {
                let plugin = adjustment
                    .owners
                    .iter()
                    .find(|(field, _)| field.ends_with(refusal.field.as_str()))
                    .map(|(_, p)| p.clone())
                    .unwrap_or_else(|| "a plugin".into());
                Error::from(crate::nri::NriError::Refused { plugin, field: refusal.field, reason: refusal.reason })
            },
        )
    }
}
