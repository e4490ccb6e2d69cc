//! The swap guard's decisions (pure): which containers it may act on, what a throttle
//! writes, what restoring puts back, and which thrasher it ends first.
//!
//! A throttle only ever lowers: `memory.swap.high` below the swap the container already
//! uses (the kernel then delays each page it charges, see `swap_high_target`), its
//! `io.weight` / `cpu.weight` down to the configured weights, its `io.max` read and write
//! IOPS on each disk under the node's swap down to the configured cap, and its `cpu.max`
//! down to the configured share of a CPU (its swap-in faults and its own reclaim are CPU
//! work). The weights rank the container only against the other containers of its pod (the
//! kernel weighs the pod's group against other pods). The IOPS cap holds the container's file
//! I/O; its swap I/O is charged to the cap but issued at once (the block throttle does not
//! hold swap bios), so what slows its swapping is `memory.swap.high` (and `cpu.max` where
//! the CPU bounds its faults). A value already at or below the target is left as it is, so
//! nothing kubelet set is ever raised.

use serde::{Deserialize, Serialize};

use crate::config::GuardConfig;
use crate::model::cgroup_files::{
    cpu_max, CPU_MAX, CPU_PERIOD_DEFAULT_US, CPU_WEIGHT, IO_MAX, IO_WEIGHT, MEMORY_SWAP_HIGH,
};
use crate::model::memory::{MemoryPlan, QosClass};

/// The pod annotation a priority is read from (kubelet sends none through the CRI).
pub const PRIORITY_ANNOTATION: &str = "swapcri.io/priority";
/// The highest priority a user PriorityClass may have.
pub const USER_PRIORITY_MAX: i32 = 1_000_000_000;

const PAGE: u64 = 4096;

/// Why the guard leaves a container alone, if it does: Guaranteed and critical pods are
/// never acted on, nor a container whose class is unknown.
pub fn exemption(plan: Option<&MemoryPlan>) -> Option<String> {
    let Some(plan) = plan else { return Some("no memory plan".into()) };
    if let Some(why) = &plan.critical {
        return Some(format!("critical pod ({why})"));
    }
    (plan.qos_class == QosClass::Guaranteed).then(|| "Guaranteed".into())
}

/// A pod's priority for the kill order. kubelet does not send it through the CRI: it comes
/// from the pod annotation `swapcri.io/priority` where one is set (for instance by an
/// admission policy copying `spec.priority`), clamped to the user range so that no
/// annotation makes a pod critical; 0 otherwise.
pub fn priority(annotation: Option<&str>) -> i32 {
    annotation
        .and_then(|v| v.trim().parse::<i64>().ok())
        .map_or(0, |p| p.clamp(i32::MIN as i64, USER_PRIORITY_MAX as i64) as i32)
}

/// The throttle's targets (`[guard]` settings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThrottleTargets {
    /// `io.weight` default while throttled (1–10000).
    pub io_weight: u64,
    /// `cpu.weight` while throttled (1–10000).
    pub cpu_weight: u64,
    /// `io.max` riops and wiops on each swap disk while throttled (0: none).
    pub swap_iops: u64,
    /// `cpu.max` while throttled, percent of one CPU (0: none).
    pub cpu_percent: u64,
}

impl ThrottleTargets {
    pub fn of(config: &GuardConfig) -> Self {
        ThrottleTargets {
            io_weight: config.throttle_io_weight,
            cpu_weight: config.throttle_cpu_weight,
            swap_iops: config.throttle_swap_iops,
            cpu_percent: config.throttle_cpu_percent,
        }
    }
}

/// What the container's files hold now (None: the file is absent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Current {
    pub swap_current: Option<u64>,
    pub swap_high: Option<String>,
    pub io_weight: Option<String>,
    pub cpu_weight: Option<String>,
    pub io_max: Option<String>,
    pub cpu_max: Option<String>,
}

/// One file the guard changed: what it held before and what the guard wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    pub file: String,
    pub before: String,
    pub written: String,
}

/// A pod's group and what the guard wrote there (the pod's part of a throttle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodWrites {
    pub dir: std::path::PathBuf,
    pub writes: Vec<Write>,
}

/// The `default N` weight of an `io.weight` file.
fn io_default(text: &str) -> Option<u64> {
    text.lines().find_map(|l| l.trim().strip_prefix("default ")).and_then(|v| v.trim().parse().ok())
}

/// A device's `riops` and `wiops` in an `io.max` text (None: "max", or no line for it).
fn iops(text: &str, dev: &str) -> (Option<u64>, Option<u64>) {
    let Some(line) = text.lines().find(|l| l.split_whitespace().next() == Some(dev)) else { return (None, None) };
    let key = |k: &str| line.split_whitespace().find_map(|w| w.strip_prefix(k)).and_then(|v| v.parse().ok());
    (key("riops="), key("wiops="))
}

/// `memory.swap.high` while throttled, bytes (whole pages, at least one). At the swap the
/// container uses, its swap may not grow; but a thrasher that swaps the same pages in and out
/// keeps their slots (the kernel frees a slot on swap-in only once swap is half full), never
/// passes it and is never slowed. Below its use, the kernel delays each charge on the way back
/// to user space by about (overage / high)² × 64 s per 64 pages (at most 2 s a time), so an
/// overage of 1/√R holds it near R pages a second: R is `swap_iops`, the rate the IOPS cap
/// asks of its file I/O. With `swap_iops` 0 the value is its use.
fn swap_high_target(used: u64, swap_iops: u64) -> u64 {
    let used_pages = used.div_ceil(PAGE);
    let pages = if swap_iops == 0 {
        used_pages
    } else {
        let root = (swap_iops as f64).sqrt();
        (used_pages as f64 * root / (root + 1.0)).floor() as u64
    };
    pages.max(1) * PAGE
}

/// The least `cpu.max` quota the kernel takes, µs.
const CPU_QUOTA_MIN_US: u64 = 1_000;

/// The writes that throttle a thrasher, lowering only; `swap_disks` are the disks under the
/// node's swap ("MAJ:MIN").
pub fn throttle(current: &Current, targets: ThrottleTargets, swap_disks: &[String]) -> Vec<Write> {
    let mut out = Vec::new();
    let mut lower = |file: &str, before: &str, now: Option<u64>, target: u64, written: String| {
        // "max" and anything unreadable count as above any target.
        if now.is_none_or(|v| v > target) {
            out.push(Write { file: file.into(), before: before.trim().into(), written });
        }
    };
    if let (Some(used), Some(high)) = (current.swap_current, &current.swap_high) {
        let target = swap_high_target(used, targets.swap_iops);
        lower(MEMORY_SWAP_HIGH, high, high.trim().parse().ok(), target, target.to_string());
    }
    if let Some(io) = &current.io_weight {
        let target = targets.io_weight;
        lower(
            IO_WEIGHT,
            &format!("default {}", io_default(io).unwrap_or(100)),
            io_default(io),
            target,
            format!("default {target}"),
        );
    }
    if let Some(cpu) = &current.cpu_weight {
        let target = targets.cpu_weight;
        lower(CPU_WEIGHT, cpu, cpu.trim().parse().ok(), target, target.to_string());
    }
    if let (Some(text), true) = (&current.cpu_max, targets.cpu_percent > 0) {
        let (quota, period) = cpu_max(text);
        let period = period.unwrap_or(CPU_PERIOD_DEFAULT_US);
        let target = (targets.cpu_percent * period / 100).max(CPU_QUOTA_MIN_US);
        lower(CPU_MAX, text, quota, target, format!("{target} {period}"));
    }
    if let (Some(io_max), true) = (&current.io_max, targets.swap_iops > 0) {
        let target = targets.swap_iops;
        for dev in swap_disks {
            let (r, w) = iops(io_max, dev);
            let show = |v: Option<u64>| v.map_or("max".to_string(), |v| v.to_string());
            // The higher of the two (unlimited counts as above anything) decides.
            let now = r.zip(w).map(|(r, w)| r.max(w));
            let before = format!("{dev} riops={} wiops={}", show(r), show(w));
            lower(IO_MAX, &before, now, target, format!("{dev} riops={target} wiops={target}"));
        }
    }
    out
}

/// Whether the file still holds what the guard wrote: only then is it put back (a value
/// kubelet or anyone else wrote since is theirs to keep).
pub fn still_ours(write: &Write, now: &str) -> bool {
    if write.file == IO_MAX {
        let dev = write.written.split_whitespace().next().unwrap_or_default();
        // What the guard writes is two numbers, never "max": equal means both are still there.
        return iops(now, dev) == iops(&write.written, dev);
    }
    if write.file == IO_WEIGHT {
        return io_default(now).is_some() && io_default(now) == io_default(&write.written);
    }
    // The kernel stores memory byte values in whole pages.
    let pages = |v: &str| v.trim().parse::<u64>().map(|b| b / PAGE * PAGE).ok();
    let bytes = write.file.starts_with("memory.");
    now.trim() == write.written || (bytes && pages(now).is_some() && pages(now) == pages(&write.written))
}

/// A thrasher the guard may end.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<K> {
    pub key: K,
    pub priority: i32,
    /// Memory and swap in use beyond the memory request, bytes.
    pub beyond_request: u64,
    pub swapins_per_second: f64,
}

/// The next container to end, in kubelet's eviction order: lowest priority first, then the
/// most memory and swap beyond its request, then the highest swap-in rate.
pub fn victim<K: Ord>(candidates: &[Candidate<K>]) -> Option<&Candidate<K>> {
    candidates.iter().min_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then(b.beyond_request.cmp(&a.beyond_request))
            .then(b.swapins_per_second.total_cmp(&a.swapins_per_second))
            .then(a.key.cmp(&b.key))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: ThrottleTargets = ThrottleTargets { io_weight: 10, cpu_weight: 10, swap_iops: 100, cpu_percent: 0 };

    fn plan(qos: QosClass, critical: Option<&str>) -> MemoryPlan {
        MemoryPlan::of_class(qos, critical)
    }

    #[test]
    fn guaranteed_and_critical_pods_are_exempt() {
        let table = [
            (Some(plan(QosClass::Burstable, None)), None),
            (Some(plan(QosClass::BestEffort, None)), None),
            (Some(plan(QosClass::Guaranteed, None)), Some("Guaranteed")),
            (Some(plan(QosClass::Burstable, Some("static pod"))), Some("critical pod (static pod)")),
            (None, Some("no memory plan")),
        ];
        for (p, want) in table {
            assert_eq!(exemption(p.as_ref()).as_deref(), want, "{p:?}");
        }
    }

    #[test]
    fn priority_comes_from_the_annotation_within_the_user_range() {
        let table = [
            (None, 0),
            (Some("1000"), 1000),
            (Some(" -5 "), -5),
            (Some("2000001000"), USER_PRIORITY_MAX),
            (Some("-99999999999"), i32::MIN),
            (Some("high"), 0),
        ];
        for (annotation, want) in table {
            assert_eq!(priority(annotation), want, "{annotation:?}");
        }
    }

    fn current(swap: u64, high: &str, io: &str, cpu: &str) -> Current {
        let file = |v: &str| (!v.is_empty()).then(|| v.to_string());
        Current {
            swap_current: Some(swap),
            swap_high: file(high),
            io_weight: file(io),
            cpu_weight: file(cpu),
            io_max: None,
            cpu_max: None,
        }
    }

    fn w(file: &str, before: &str, written: &str) -> Write {
        Write { file: file.into(), before: before.into(), written: written.into() }
    }

    #[test]
    fn a_throttle_only_lowers() {
        let table = [
            (
                current(10_000, "max", "default 100\n", "100\n"),
                vec![
                    w("memory.swap.high", "max", "8192"),
                    w("io.weight", "default 100", "default 10"),
                    w("cpu.weight", "100", "10"),
                ],
            ),
            // Already lower than the targets: nothing to write.
            (current(10_000, "8192", "default 5\n8:16 1000\n", "2\n"), vec![]),
            // No swap in use: swap.high goes to one page, so none may be added.
            (current(0, "max", "", ""), vec![w("memory.swap.high", "max", "4096")]),
            // A file the kernel lacks is not written.
            (current(40_960, "", "", "1000"), vec![w("cpu.weight", "1000", "10")]),
            // No default line: the kernel's default is 100.
            (
                current(40_960, "81920", "8:16 50\n", ""),
                vec![w("memory.swap.high", "81920", "36864"), w("io.weight", "default 100", "default 10")],
            ),
        ];
        for (now, want) in table {
            assert_eq!(throttle(&now, T, &[]), want, "{now:?}");
        }
    }

    #[test]
    fn swap_high_goes_below_the_use_by_one_over_the_root_of_the_rate() {
        let mib = 1 << 20;
        let table = [
            // 100 pages a second: an overage of 1/10, high = use × 10/11.
            (110 * mib, 100, 100 * mib),
            (11 * PAGE, 100, 10 * PAGE),
            // 400: 1/20; 10,000: 1/100.
            (21 * PAGE, 400, 20 * PAGE),
            (101 * PAGE, 10_000, 100 * PAGE),
            // Part of a page in use counts as a page; never below one page.
            (PAGE + 1, 100, PAGE),
            (0, 100, PAGE),
            // No rate: at its use.
            (10_000, 0, 3 * PAGE),
            (0, 0, PAGE),
        ];
        for (used, iops, want) in table {
            assert_eq!(swap_high_target(used, iops), want, "{used} bytes at {iops}/s");
        }
    }

    #[test]
    fn swap_disks_get_an_iops_cap_never_above_one_set_before() {
        let with_io_max = |text: &str| Current { io_max: Some(text.into()), ..Current::default() };
        let disks = ["254:16".to_string(), "8:0".to_string()];
        let table = [
            // No line: unlimited on both.
            (
                "",
                vec![
                    w("io.max", "254:16 riops=max wiops=max", "254:16 riops=100 wiops=100"),
                    w("io.max", "8:0 riops=max wiops=max", "8:0 riops=100 wiops=100"),
                ],
            ),
            // A cap already at or below the target stays; one above it, or half unlimited, is lowered.
            (
                "254:16 rbps=max wbps=max riops=50 wiops=80\n8:0 rbps=1000 wbps=max riops=500 wiops=max\n",
                vec![w("io.max", "8:0 riops=500 wiops=max", "8:0 riops=100 wiops=100")],
            ),
        ];
        for (text, want) in table {
            assert_eq!(throttle(&with_io_max(text), T, &disks), want, "{text:?}");
        }
        assert_eq!(throttle(&with_io_max(""), ThrottleTargets { swap_iops: 0, ..T }, &disks), vec![], "0: no cap");
        assert_eq!(throttle(&Current::default(), T, &disks), vec![], "no io.max file: no io controller here");
    }

    #[test]
    fn cpu_max_is_capped_at_a_share_of_a_cpu_never_raised() {
        let with = |text: &str| Current { cpu_max: Some(text.into()), ..Current::default() };
        let t = ThrottleTargets { cpu_percent: 10, ..T };
        let table = [
            ("max 100000\n", vec![w("cpu.max", "max 100000", "10000 100000")]),
            ("200000 100000\n", vec![w("cpu.max", "200000 100000", "10000 100000")]),
            // The period kubelet chose stays.
            ("max 50000\n", vec![w("cpu.max", "max 50000", "5000 50000")]),
            // A limit already under the share stays.
            ("5000 100000\n", vec![]),
            // Never under the kernel's least quota.
            ("max 5000\n", vec![w("cpu.max", "max 5000", "1000 5000")]),
        ];
        for (text, want) in table {
            assert_eq!(throttle(&with(text), t, &[]), want, "{text:?}");
        }
        assert_eq!(throttle(&with("max 100000"), T, &[]), vec![], "0: no cap");
    }

    #[test]
    fn only_values_still_ours_are_put_back() {
        let table = [
            (w("memory.swap.high", "max", "12288"), "12288\n", true),
            (w("memory.swap.high", "max", "12289"), "12288\n", true),
            (w("memory.swap.high", "max", "12288"), "max\n", false),
            (w("io.weight", "default 100", "default 10"), "default 10\n8:16 1000\n", true),
            (w("io.weight", "default 100", "default 10"), "default 50\n", false),
            (w("cpu.weight", "100", "10"), "10\n", true),
            (w("cpu.weight", "100", "10"), "39\n", false),
            (w("cpu.max", "max 100000", "10000 100000"), "10000 100000\n", true),
            (w("cpu.max", "max 100000", "10000 100000"), "20000 100000\n", false),
            (
                w("io.max", "8:0 riops=max wiops=max", "8:0 riops=100 wiops=100"),
                "8:0 rbps=max wbps=max riops=100 wiops=100\n",
                true,
            ),
            (
                w("io.max", "8:0 riops=max wiops=max", "8:0 riops=100 wiops=100"),
                "8:0 rbps=max wbps=max riops=20 wiops=100\n",
                false,
            ),
            (
                w("io.max", "8:0 riops=max wiops=max", "8:0 riops=100 wiops=100"),
                "254:16 rbps=max wbps=max riops=100 wiops=100\n",
                false,
            ),
        ];
        for (write, now, want) in table {
            assert_eq!(still_ours(&write, now), want, "{write:?} {now:?}");
        }
    }

    #[test]
    fn victims_in_kubelets_eviction_order() {
        let c = |key: &'static str, priority, beyond_request, swapins_per_second| Candidate {
            key,
            priority,
            beyond_request,
            swapins_per_second,
        };
        let table = [
            (vec![], None),
            (vec![c("a", 0, 10, 1.0)], Some("a")),
            // Lowest priority first, whatever the usage.
            (vec![c("high", 1000, 900, 9.0), c("low", -10, 1, 1.0)], Some("low")),
            // Same priority: most beyond the request.
            (vec![c("small", 0, 10, 9.0), c("big", 0, 900, 1.0)], Some("big")),
            // Then the swap-in rate, then the key for a stable choice.
            (vec![c("slow", 0, 10, 1.0), c("fast", 0, 10, 9.0)], Some("fast")),
            (vec![c("b", 0, 10, 1.0), c("a", 0, 10, 1.0)], Some("a")),
        ];
        for (candidates, want) in table {
            assert_eq!(victim(&candidates).map(|c| c.key), want, "{candidates:?}");
        }
    }
}
