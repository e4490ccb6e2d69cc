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
pub const CGROUP_PROCS: &str = "cgroup.procs";
