//! `[offload]`: proactive reclaim of cold memory into swap (policy::offload).

use serde::{Deserialize, Serialize};

use super::range::{non_negative, percent, within, Invalid};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OffloadConfig {
    /// Move cold memory of Burstable containers with a swap share into swap (cgroup v2
    /// with PSI and memory.reclaim only).
    pub enabled: bool,
    /// Seconds between two looks at a container.
    pub interval_seconds: u64,
    /// Reclaim continues while the container's memory pressure (some) stays below this
    /// percent of the time.
    pub psi_some_percent: f64,
    /// The first step, percent of the container's memory.
    pub step_percent: f64,
    /// The most the step grows to while nothing comes back (× the first).
    pub max_growth: u32,
    /// Refaults, percent of the last step, that stop it (the pages were in use).
    pub refault_percent: f64,
    /// The longest pause after pressure or refaults, in looks.
    pub max_backoff_looks: u32,
}

impl Default for OffloadConfig {
    fn default() -> Self {
        OffloadConfig {
            enabled: false,
            interval_seconds: 5,
            psi_some_percent: 0.1,
            step_percent: 2.0,
            max_growth: 4,
            refault_percent: 10.0,
            max_backoff_looks: 24,
        }
    }
}

impl OffloadConfig {
    /// The first value out of its range.
    pub fn check(&self) -> Result<(), Invalid> {
        within("offload.interval_seconds", self.interval_seconds, 1..=600)?;
        percent("offload.psi_some_percent", self.psi_some_percent)?;
        percent("offload.step_percent", self.step_percent)?;
        within("offload.max_growth", self.max_growth, 1..=64)?;
        non_negative("offload.refault_percent", self.refault_percent)?;
        within("offload.max_backoff_looks", self.max_backoff_looks, 1..=1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_out_of_range_name_their_key() {
        let with = |f: fn(&mut OffloadConfig)| crate::config::range::refused(OffloadConfig::check, f);
        assert_eq!(with(|_| {}), None);
        assert_eq!(with(|c| c.interval_seconds = 0), Some("offload.interval_seconds"));
        assert_eq!(with(|c| c.psi_some_percent = 0.0), Some("offload.psi_some_percent"));
        assert_eq!(with(|c| c.step_percent = 101.0), Some("offload.step_percent"));
        assert_eq!(with(|c| c.max_growth = 0), Some("offload.max_growth"));
        assert_eq!(with(|c| c.refault_percent = f64::INFINITY), Some("offload.refault_percent"));
        assert_eq!(with(|c| c.max_backoff_looks = 0), Some("offload.max_backoff_looks"));
    }
}
