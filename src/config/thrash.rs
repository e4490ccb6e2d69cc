//! `[thrash]`: when a container counts as pressured or thrashing (policy::thrash).

use serde::{Deserialize, Serialize};

use super::range::{non_negative, percent, within, Invalid};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThrashConfig {
    /// Watch containers for thrashing (cgroup v2 with PSI only).
    pub enabled: bool,
    /// Percent of the window in which some task stalled on memory: pressured from here (the
    /// kernel's PSI trigger on each container fires at this share of a second).
    pub pressured_some_percent: f64,
    /// The stall share that, with `swapins_per_second`, makes a container thrashing.
    pub thrashing_some_percent: f64,
    /// Anonymous pages faulted back in from swap or zswap per second.
    pub swapins_per_second: f64,
    /// The span the figures are taken over (1 to 60 s).
    pub window_seconds: u64,
    /// How long the figures must stay below a state before it is left.
    pub recover_seconds: u64,
}

impl Default for ThrashConfig {
    fn default() -> Self {
        ThrashConfig {
            enabled: true,
            pressured_some_percent: 10.0,
            thrashing_some_percent: 20.0,
            swapins_per_second: 256.0,
            window_seconds: 5,
            recover_seconds: 10,
        }
    }
}

impl ThrashConfig {
    /// The first value out of its range.
    pub fn check(&self) -> Result<(), Invalid> {
        percent("thrash.pressured_some_percent", self.pressured_some_percent)?;
        percent("thrash.thrashing_some_percent", self.thrashing_some_percent)?;
        // The trigger wakes the watcher at the pressured share; a thrash below it would go unseen.
        if self.pressured_some_percent > self.thrashing_some_percent {
            let (p, t) = (self.pressured_some_percent, self.thrashing_some_percent);
            return Err(("thrash.pressured_some_percent", format!("{p} is above thrashing_some_percent ({t})")));
        }
        non_negative("thrash.swapins_per_second", self.swapins_per_second)?;
        within("thrash.window_seconds", self.window_seconds, 1..=60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_out_of_range_name_their_key() {
        let with = |f: fn(&mut ThrashConfig)| crate::config::range::refused(ThrashConfig::check, f);
        assert_eq!(with(|_| {}), None);
        assert_eq!(with(|c| c.pressured_some_percent = 0.0), Some("thrash.pressured_some_percent"));
        assert_eq!(with(|c| c.thrashing_some_percent = 150.0), Some("thrash.thrashing_some_percent"));
        assert_eq!(with(|c| c.pressured_some_percent = 30.0), Some("thrash.pressured_some_percent"));
        assert_eq!(with(|c| c.swapins_per_second = f64::NAN), Some("thrash.swapins_per_second"));
        assert_eq!(with(|c| c.window_seconds = 0), Some("thrash.window_seconds"));
        assert_eq!(with(|c| c.window_seconds = 61), Some("thrash.window_seconds"));
    }
}
