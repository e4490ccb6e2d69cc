//! kubelet's memory arithmetic, reproduced to the byte so that swapcri's values and
//! kubelet's can be compared.

/// kubelet's LimitedSwap arithmetic, to the byte:
/// `int64(float64(request) / float64(memoryCapacity) * float64(swapCapacity))`.
pub fn kubelet_limited_swap(request: u64, mem_total: u64, swap_total: u64) -> u64 {
    (request as f64 / mem_total as f64 * swap_total as f64) as u64
}

/// kubelet's memory.high: `floor((request + factor × (limit − request)) / page) × page`.
pub fn throttle_high(request: u64, limit: u64, factor: f64, page_size: u64) -> u64 {
    let high = (request as f64 + (limit as f64 - request as f64) * factor).floor() as u64;
    high / page_size * page_size
}
