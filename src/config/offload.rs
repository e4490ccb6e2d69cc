//! `[offload]`: proactive reclaim of cold memory into swap (policy::offload).

use serde::{Deserialize, Serialize};

use crate::policy::offload::Settings;

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
        let s = Settings::default();
        OffloadConfig {
            enabled: false,
            interval_seconds: 5,
            psi_some_percent: s.psi_some_percent,
            step_percent: s.step_percent,
            max_growth: s.max_growth,
            refault_percent: s.refault_percent,
            max_backoff_looks: s.max_backoff,
        }
    }
}

impl OffloadConfig {
    pub fn settings(&self) -> Settings {
        Settings {
            psi_some_percent: self.psi_some_percent,
            step_percent: self.step_percent,
            max_growth: self.max_growth,
            refault_percent: self.refault_percent,
            max_backoff: self.max_backoff_looks,
        }
    }

    /// The first value out of its range: (its key, why).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let percent = |v: f64| v > 0.0 && v <= 100.0;
        if !(1..=600).contains(&self.interval_seconds) {
            return Err(("offload.interval_seconds", format!("{} is not in 1..=600", self.interval_seconds)));
        }
        if !percent(self.psi_some_percent) {
            return Err(("offload.psi_some_percent", format!("{} is not in (0, 100]", self.psi_some_percent)));
        }
        if !percent(self.step_percent) {
            return Err(("offload.step_percent", format!("{} is not in (0, 100]", self.step_percent)));
        }
        if !(1..=64).contains(&self.max_growth) {
            return Err(("offload.max_growth", format!("{} is not in 1..=64", self.max_growth)));
        }
        if !(self.refault_percent >= 0.0 && self.refault_percent.is_finite()) {
            return Err(("offload.refault_percent", format!("{} is not a percent", self.refault_percent)));
        }
        if !(1..=1000).contains(&self.max_backoff_looks) {
            return Err(("offload.max_backoff_looks", format!("{} is not in 1..=1000", self.max_backoff_looks)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_out_of_range_name_their_key() {
        let with = |f: fn(&mut OffloadConfig)| {
            let mut c = OffloadConfig::default();
            f(&mut c);
            c.check().err().map(|(key, _)| key)
        };
        assert_eq!(with(|_| {}), None);
        assert_eq!(with(|c| c.interval_seconds = 0), Some("offload.interval_seconds"));
        assert_eq!(with(|c| c.psi_some_percent = 0.0), Some("offload.psi_some_percent"));
        assert_eq!(with(|c| c.step_percent = 101.0), Some("offload.step_percent"));
        assert_eq!(with(|c| c.max_growth = 0), Some("offload.max_growth"));
        assert_eq!(with(|c| c.refault_percent = f64::INFINITY), Some("offload.refault_percent"));
        assert_eq!(with(|c| c.max_backoff_looks = 0), Some("offload.max_backoff_looks"));
        assert_eq!(OffloadConfig::default().settings(), Settings::default());
    }
}
