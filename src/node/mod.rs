//! Node facts, probed once at start-up.

use std::path::Path;

use crate::model::node::NodeFacts;
use crate::policy::caps::{mask_from_status, names_in_mask, CAP_SYS_RESOURCE};

pub mod apparmor;
pub mod block;
pub mod hugepages;
pub mod memory;
pub mod noswap;
pub mod system;
pub mod userns;

pub fn probe(config: &crate::config::Config) -> NodeFacts {
    let cgroup_root = config.cgroup_root.as_path();
    let allocatable_override = config.memory_qos.node_allocatable_bytes;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let bounding = mask_from_status(&status, "CapBnd").unwrap_or(0);
    let effective = mask_from_status(&status, "CapEff").unwrap_or(0);
    let min_oom_score_adj = if effective & (1 << CAP_SYS_RESOURCE) != 0 {
        -1000
    } else {
        // Without CAP_SYS_RESOURCE nothing may go below the daemon's own value.
        std::fs::read_to_string("/proc/self/oom_score_adj").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    };
    let apparmor_enabled = apparmor::enabled();
    let apparmor_default = apparmor::probe_default(apparmor_enabled);
    let cgroup_mode = crate::cgroup::probe_mode(cgroup_root);
    let page_size = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096) as u64;
    let memory = memory::probe(Path::new("/proc"), cgroup_root, cgroup_mode, page_size, allocatable_override);
    let noswap = noswap::probe(config.runtime.tmpfs_noswap, &memory.kernel_release, &config.run_root);
    let kernel = memory.kernel;
    let facts = NodeFacts {
        cgroup_mode,
        memory,
        noswap,
        system_protection: Some(system::apply(&config.system, cgroup_root, cgroup_mode, &block::Roots::host())),
        held_capabilities: names_in_mask(bounding),
        min_oom_score_adj,
        apparmor_enabled,
        apparmor_default,
        hugepage_sizes: hugepages::probe(Path::new("/sys")),
        hugetlb_limits: hugepages::controller(cgroup_mode, cgroup_root, &crate::cgroup::hierarchies()),
        userns: userns::probe(kernel, &config.image_root().join("layers"), &config.run_root),
    };
    if facts.min_oom_score_adj > -1000 {
        tracing::warn!(
            min = facts.min_oom_score_adj,
            "the daemon lacks CAP_SYS_RESOURCE: container oom_score_adj values below {} are raised to it",
            facts.min_oom_score_adj
        );
    }
    let m = &facts.memory;
    tracing::info!(
        mem_total = m.mem_total,
        swap_total = m.swap_total,
        swap_accounting = m.swap_accounting,
        kernel = %m.kernel_release,
        allocatable = m.allocatable,
        "node memory"
    );
    tracing::info!(cgroup_mode = ?facts.cgroup_mode, capabilities = facts.held_capabilities.len(), apparmor = facts.apparmor_enabled,
        hugetlb_limits = facts.hugetlb_limits, userns = facts.userns.supported, userns_detail = %facts.userns.detail, "node facts");
    facts
}
