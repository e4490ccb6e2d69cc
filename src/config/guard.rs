//! `[guard]`: what the runtime does about a thrashing container (policy::guard).

use serde::{Deserialize, Serialize};

use super::range::{within, Invalid};

/// What the guard does about a thrashing container (`action`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardMode {
    /// Detect and report only.
    #[default]
    Observe,
    /// Throttle the thrasher while it thrashes.
    Throttle,
    /// Throttle, then end a container still thrashing after the grace period.
    Kill,
}

impl GuardMode {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardMode::Observe => "observe",
            GuardMode::Throttle => "throttle",
            GuardMode::Kill => "kill",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardConfig {
    /// observe (report only), throttle, or kill (throttle, then end a container that keeps
    /// thrashing). Guaranteed and critical pods are never acted on.
    pub action: GuardMode,
    /// `io.weight` (default weight) of a throttled container.
    pub throttle_io_weight: u64,
    /// `cpu.weight` of a throttled container.
    pub throttle_cpu_weight: u64,
    /// The I/O a throttled container is held near, a second: `io.max` read and write IOPS on
    /// each disk under the node's swap, and its swap pages through `memory.swap.high` (0: no
    /// IOPS cap, `memory.swap.high` at its swap use).
    pub throttle_swap_iops: u64,
    /// `cpu.max` of a throttled container, in percent of one CPU (0: no cap).
    pub throttle_cpu_percent: u64,
    /// With `kill`: how long a throttled container may stay thrashing or pressured.
    pub kill_after_seconds: u64,
    /// With `kill`: the pause after a kill before the next victim is chosen, so that the
    /// node's figures can show what the kill relieved.
    pub kill_interval_seconds: u64,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            action: GuardMode::Observe,
            throttle_io_weight: 10,
            throttle_cpu_weight: 10,
            throttle_swap_iops: 100,
            throttle_cpu_percent: 10,
            kill_after_seconds: 30,
            kill_interval_seconds: 10,
        }
    }
}

impl GuardConfig {
    /// The first value out of its range.
    pub fn check(&self) -> Result<(), Invalid> {
        within("guard.throttle_io_weight", self.throttle_io_weight, 1..=10_000)?;
        within("guard.throttle_cpu_weight", self.throttle_cpu_weight, 1..=10_000)?;
        within("guard.throttle_swap_iops", self.throttle_swap_iops, 0..=1_000_000)?;
        within("guard.throttle_cpu_percent", self.throttle_cpu_percent, 0..=100_000)?;
        within("guard.kill_after_seconds", self.kill_after_seconds, 1..=3600)?;
        within("guard.kill_interval_seconds", self.kill_interval_seconds, 0..=3600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_out_of_range_name_their_key() {
        let with = |f: fn(&mut GuardConfig)| crate::config::range::refused(GuardConfig::check, f);
        assert_eq!(with(|_| {}), None);
        assert_eq!(with(|c| c.throttle_io_weight = 0), Some("guard.throttle_io_weight"));
        assert_eq!(with(|c| c.throttle_cpu_weight = 10_001), Some("guard.throttle_cpu_weight"));
        assert_eq!(with(|c| c.kill_after_seconds = 0), Some("guard.kill_after_seconds"));
        assert_eq!(with(|c| c.kill_interval_seconds = 3601), Some("guard.kill_interval_seconds"));
        let parsed: GuardConfig = toml::from_str("action = \"kill\"").unwrap();
        assert_eq!(parsed.action, GuardMode::Kill);
        assert!(toml::from_str::<GuardConfig>("action = \"evict\"").is_err());
    }
}
