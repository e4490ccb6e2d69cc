//! A request's `LinuxContainerResources`, field by field against the ranges the kernel and
//! the runtime accept, so a value that cannot work is refused up front with its field named
//! rather than failing deep in the runtime.

use crate::cri;

use super::PolicyError;

/// The smallest memory limit a container starts under: the runtime's init needs a few MiB
/// before the container's process exists (Docker uses the same floor).
pub const MIN_MEMORY_LIMIT: i64 = 6 * 1024 * 1024;

/// `hugepage_sizes`: the sizes the node offers (`2MB`, `1GB`).
pub fn check(r: &cri::LinuxContainerResources, hugepage_sizes: &[String]) -> Result<(), PolicyError> {
    let invalid = |field: &str, value: &dyn std::fmt::Display, why: &str| {
        Err(PolicyError::Invalid(format!("{field} {value}: {why}")))
    };
    if r.memory_limit_in_bytes != 0 && r.memory_limit_in_bytes < MIN_MEMORY_LIMIT {
        return invalid(
            "memory_limit_in_bytes",
            &r.memory_limit_in_bytes,
            &format!("0 (unset) or at least {MIN_MEMORY_LIMIT} (6 MiB)"),
        );
    }
    if r.memory_swap_limit_in_bytes < -1 {
        return invalid("memory_swap_limit_in_bytes", &r.memory_swap_limit_in_bytes, "-1 (unlimited), 0 or bytes");
    }
    if !(-1000..=1000).contains(&r.oom_score_adj) {
        return invalid("oom_score_adj", &r.oom_score_adj, "between -1000 and 1000");
    }
    if r.cpu_shares != 0 && !(2..=262_144).contains(&r.cpu_shares) {
        return invalid("cpu_shares", &r.cpu_shares, "0 (unset) or 2 to 262144");
    }
    if r.cpu_period != 0 && !(1_000..=1_000_000).contains(&r.cpu_period) {
        return invalid("cpu_period", &r.cpu_period, "0 (unset) or 1000 to 1000000 µs");
    }
    if r.cpu_quota != 0 && r.cpu_quota != -1 && r.cpu_quota < 1_000 {
        return invalid("cpu_quota", &r.cpu_quota, "0 (unset), -1 (unlimited) or at least 1000 µs");
    }
    for (field, value) in [("cpuset_cpus", &r.cpuset_cpus), ("cpuset_mems", &r.cpuset_mems)] {
        if !value.is_empty() && !cpu_list(value) {
            return invalid(field, &format!("{value:?}"), "a list such as 0-3,8");
        }
    }
    for h in &r.hugepage_limits {
        if !hugepage_sizes.contains(&h.page_size) {
            let offered = if hugepage_sizes.is_empty() { "none".to_string() } else { hugepage_sizes.join(", ") };
            return invalid(
                "hugepage_limits page_size",
                &format!("{:?}", h.page_size),
                &format!("not a huge page size of this node (it has: {offered})"),
            );
        }
    }
    Ok(())
}

/// `0-3,8,10-11`: ranges of numbers, each low ≤ high.
fn cpu_list(s: &str) -> bool {
    s.split(',').all(|part| {
        let number = |n: &str| !n.is_empty() && n.len() <= 5 && n.bytes().all(|b| b.is_ascii_digit());
        match part.split_once('-') {
            Some((a, b)) => number(a) && number(b) && a.parse::<u32>().ok() <= b.parse::<u32>().ok(),
            None => number(part),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut cri::LinuxContainerResources)) -> cri::LinuxContainerResources {
        let mut r = cri::LinuxContainerResources::default();
        f(&mut r);
        r
    }

    #[test]
    fn ranges_field_by_field() {
        let cases: Vec<(cri::LinuxContainerResources, Option<&str>)> = vec![
            (with(|_| {}), None),
            (with(|r| r.memory_limit_in_bytes = 64 << 20), None),
            (with(|r| r.memory_limit_in_bytes = -5), Some("memory_limit_in_bytes -5")),
            (with(|r| r.memory_limit_in_bytes = 1), Some("memory_limit_in_bytes 1")),
            (with(|r| r.memory_swap_limit_in_bytes = -1), None),
            (with(|r| r.memory_swap_limit_in_bytes = -2), Some("memory_swap_limit_in_bytes")),
            (with(|r| r.oom_score_adj = -1000), None),
            (with(|r| r.oom_score_adj = 1001), Some("oom_score_adj")),
            (with(|r| r.cpu_shares = 1), Some("cpu_shares")),
            (with(|r| r.cpu_shares = 1024), None),
            (with(|r| r.cpu_period = 100_000), None),
            (with(|r| r.cpu_period = 10), Some("cpu_period")),
            (with(|r| r.cpu_quota = -1), None),
            (with(|r| r.cpu_quota = 5), Some("cpu_quota")),
            (with(|r| r.cpuset_cpus = "0-3,8".into()), None),
            (with(|r| r.cpuset_cpus = "3-1".into()), Some("cpuset_cpus")),
            (with(|r| r.cpuset_mems = "0,x".into()), Some("cpuset_mems")),
            (with(|r| r.hugepage_limits = vec![cri::HugepageLimit { page_size: "2MB".into(), limit: 0 }]), None),
            (
                with(|r| r.hugepage_limits = vec![cri::HugepageLimit { page_size: "16GB".into(), limit: 0 }]),
                Some("not a huge page size of this node (it has: 2MB, 1GB)"),
            ),
            (
                with(|r| r.hugepage_limits = vec![cri::HugepageLimit { page_size: "../x".into(), limit: 0 }]),
                Some("page_size"),
            ),
        ];
        for (r, want) in cases {
            match (check(&r, &["2MB".to_string(), "1GB".to_string()]), want) {
                (Ok(()), None) => {}
                (Err(e), Some(field)) => assert!(e.to_string().contains(field), "{e}"),
                (got, want) => panic!("{r:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
