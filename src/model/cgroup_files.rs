//! The cgroup v2 interface files the swap supervisor reads and writes, named once: the
//! cgroup functions open them by these names, and a throttle's record names what it changed
//! by them.

pub const MEMORY_CURRENT: &str = "memory.current";
pub const MEMORY_SWAP_CURRENT: &str = "memory.swap.current";
pub const MEMORY_SWAP_MAX: &str = "memory.swap.max";
pub const MEMORY_SWAP_HIGH: &str = "memory.swap.high";
pub const MEMORY_PRESSURE: &str = "memory.pressure";
pub const MEMORY_STAT: &str = "memory.stat";
pub const MEMORY_RECLAIM: &str = "memory.reclaim";
pub const IO_WEIGHT: &str = "io.weight";
pub const IO_MAX: &str = "io.max";
pub const CPU_WEIGHT: &str = "cpu.weight";
pub const CPU_MAX: &str = "cpu.max";
/// The period `cpu.max` has when its text names none, µs.
pub const CPU_PERIOD_DEFAULT_US: u64 = 100_000;
pub const CPU_STAT: &str = "cpu.stat";
pub const CGROUP_PROCS: &str = "cgroup.procs";

/// A `cpu.max` text's quota (None: "max") and period (None: not given), µs.
pub fn cpu_max(text: &str) -> (Option<u64>, Option<u64>) {
    let mut words = text.split_whitespace();
    let quota = words.next().and_then(|q| q.parse().ok());
    (quota, words.next().and_then(|p| p.parse().ok()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_max_texts() {
        for (text, want) in [
            ("max 100000\n", (None, Some(100_000))),
            ("20000 50000", (Some(20_000), Some(50_000))),
            ("max", (None, None)),
            ("", (None, None)),
        ] {
            assert_eq!(super::cpu_max(text), want, "{text:?}");
        }
    }
}
