//! A cgroup's figures as the kernel reported them (cgroup::stats, swap, pressure and detail
//! read them): CPU, memory, swap and zswap, pressure stalls, and the detail behind the
//! cadvisor-named metrics. A figure the node does not have is None, never zero.

use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryStats {
    pub usage_bytes: u64,
    /// usage − inactive_file (what kubelet evicts on).
    pub working_set_bytes: u64,
    pub rss_bytes: u64,
    pub page_faults: u64,
    pub major_page_faults: u64,
    /// The memory limit, when there is one.
    pub limit_bytes: Option<u64>,
}

impl MemoryStats {
    /// limit − working set, when limited.
    pub fn available_bytes(&self) -> Option<u64> {
        self.limit_bytes.map(|l| l.saturating_sub(self.working_set_bytes))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CgroupStats {
    pub cpu_usage_ns: Option<u64>,
    pub memory: Option<MemoryStats>,
    /// None on cgroup v1 or without swap accounting.
    pub swap: Option<SwapStats>,
    /// Pressure stall information; all None on cgroup v1 or without PSI.
    pub pressure: PressureSet,
}

/// The `memory.swap.events` counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SwapEvents {
    pub high: u64,
    pub max: u64,
    pub fail: u64,
}

/// zswap: the compressed pool in front of the swap device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ZswapStats {
    /// Compressed size in the pool (`memory.zswap.current`).
    pub compressed_bytes: Option<u64>,
    /// What those pages held before compression (`memory.stat` zswapped).
    pub original_bytes: u64,
    /// Pages brought back from and moved into the pool (`zswpin`, `zswpout`).
    pub pages_in: u64,
    pub pages_out: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SwapStats {
    pub usage_bytes: u64,
    /// `memory.swap.max`; None when `max`.
    pub limit_bytes: Option<u64>,
    /// The most swap the group has held (`memory.swap.peak`, Linux 6.5+).
    pub peak_bytes: Option<u64>,
    pub events: Option<SwapEvents>,
    /// Anonymous pages faulted back in after they were swapped out (`memory.stat`
    /// `workingset_refault_anon`): the swap-ins a workload waits on.
    pub anon_refaults: Option<u64>,
    /// Pages read from and written to the swap device (`pswpin`, `pswpout`, on kernels
    /// that count them per group).
    pub pages_in: Option<u64>,
    pub pages_out: Option<u64>,
    pub zswap: Option<ZswapStats>,
}

impl SwapStats {
    /// limit − usage; None when unlimited.
    pub fn available_bytes(&self) -> Option<u64> {
        self.limit_bytes.map(|l| l.saturating_sub(self.usage_bytes))
    }
}

/// One line of a pressure file. `total_ns` is the kernel's microseconds × 1000.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PsiLine {
    pub total_ns: u64,
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
}

/// `some` (at least one task stalled) and `full` (all non-idle tasks stalled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Pressure {
    pub some: PsiLine,
    pub full: PsiLine,
}

/// The three resources' pressure of one cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PressureSet {
    pub cpu: Option<Pressure>,
    pub memory: Option<Pressure>,
    pub io: Option<Pressure>,
}

/// Bytes and operations read and written on one block device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceIo {
    pub major: u64,
    pub minor: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detail {
    pub cpu_user_ns: Option<u64>,
    pub cpu_system_ns: Option<u64>,
    pub cfs_periods: Option<u64>,
    pub cfs_throttled_periods: Option<u64>,
    pub cfs_throttled_ns: Option<u64>,
    /// CFS period in microseconds; quota in microseconds (None when unlimited).
    pub cpu_period_us: Option<u64>,
    pub cpu_quota_us: Option<u64>,
    /// cgroup v1 shares, or v2 weight converted back to shares.
    pub cpu_shares: Option<u64>,
    pub memory_cache: Option<u64>,
    pub memory_mapped_file: Option<u64>,
    pub memory_kernel: Option<u64>,
    pub memory_max_usage: Option<u64>,
    /// Times usage hit the limit (v1 memory.failcnt, v2 memory.events `max`).
    pub memory_failcnt: Option<u64>,
    /// Page faults and major faults: of this cgroup and of its whole subtree.
    pub pgfault: Option<(u64, u64)>,
    pub pgmajfault: Option<(u64, u64)>,
    pub oom_kills: Option<u64>,
    pub processes: Option<u64>,
    pub threads: Option<u64>,
    /// pids.max; 0 when unlimited.
    pub threads_max: Option<u64>,
    /// Open file descriptors of the cgroup's processes, and how many are sockets.
    pub file_descriptors: Option<u64>,
    pub sockets: Option<u64>,
    pub io: Vec<DeviceIo>,
    /// cgroup v1 with swap accounting: swap in use (memsw − memory) and the swap limit
    /// (memsw limit − memory limit; None when either is unlimited).
    pub v1_swap: Option<(u64, Option<u64>)>,
}
