//! Whether a container thrashes: its tasks stall on memory (memory PSI) *and* it keeps
//! faulting swapped-out pages back in (anonymous refaults). Either alone is not thrashing:
//! a group throttled at `memory.high` or reclaiming page cache stalls without swap-ins
//! (pressured), and a group with much cold memory in swap that it never touches has neither.
//! Pure: readings of the kernel's running totals go in, states come out.
//!
//! A state rises as soon as a window's figures call for it and falls back only after they
//! have stayed below it for `recover_ms`, so a thrash that pauses for a moment is not
//! reported as over.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::config::ThrashConfig;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThrashState {
    #[default]
    Normal,
    Pressured,
    Thrashing,
}

impl ThrashState {
    pub fn as_str(self) -> &'static str {
        match self {
            ThrashState::Normal => "normal",
            ThrashState::Pressured => "pressured",
            ThrashState::Thrashing => "thrashing",
        }
    }
}

/// Where the states begin (the `[thrash]` settings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Share of the window (percent) in which some task of the group stalled on memory
    /// that makes it pressured.
    pub pressured_some_percent: f64,
    /// The stall share that, with `swapins_per_second`, makes it thrashing.
    pub thrashing_some_percent: f64,
    /// Anonymous refaults (pages brought back from swap or zswap) per second.
    pub swapins_per_second: f64,
    /// The span the figures are taken over.
    pub window_ms: u64,
    /// How long the figures must stay below a state before it is left.
    pub recover_ms: u64,
}

impl Thresholds {
    pub fn of(config: &ThrashConfig) -> Self {
        Thresholds {
            pressured_some_percent: config.pressured_some_percent,
            thrashing_some_percent: config.thrashing_some_percent,
            swapins_per_second: config.swapins_per_second,
            window_ms: config.window_seconds * 1000,
            recover_ms: config.recover_seconds * 1000,
        }
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds::of(&ThrashConfig::default())
    }
}

/// One reading of a group's running totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Milliseconds on a monotonic clock.
    pub at_ms: u64,
    /// `memory.pressure` some and full totals, microseconds.
    pub some_us: u64,
    pub full_us: u64,
    /// `memory.stat` workingset_refault_anon.
    pub anon_refaults: u64,
}

/// A window's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Figures {
    pub some_percent: f64,
    pub full_percent: f64,
    pub swapins_per_second: f64,
}

/// A state change, with the figures that caused it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub from: ThrashState,
    pub to: ThrashState,
    pub figures: Figures,
}

/// The state of one group, fed with readings about once a second.
#[derive(Debug, Clone)]
pub struct Detector {
    thresholds: Thresholds,
    readings: VecDeque<Reading>,
    state: ThrashState,
    /// Since when the figures have called for less than `state`.
    calmer_since: Option<u64>,
    figures: Figures,
}

impl Detector {
    pub fn new(thresholds: Thresholds) -> Detector {
        Detector {
            thresholds,
            readings: VecDeque::new(),
            state: ThrashState::Normal,
            calmer_since: None,
            figures: Figures::default(),
        }
    }

    pub fn state(&self) -> ThrashState {
        self.state
    }

    /// The latest window's figures.
    pub fn figures(&self) -> Figures {
        self.figures
    }

    /// Takes a reading; Some when the state changed. Readings that go back in time, whose
    /// counters went down (a new group under the same name), or that follow a gap longer than
    /// the window (sampling paused while the group was calm) start the window again.
    pub fn observe(&mut self, r: Reading) -> Option<Change> {
        if let Some(last) = self.readings.back() {
            let backwards = r.at_ms <= last.at_ms
                || r.some_us < last.some_us
                || r.full_us < last.full_us
                || r.anon_refaults < last.anon_refaults;
            if backwards || r.at_ms - last.at_ms > self.thresholds.window_ms {
                self.readings.clear();
            }
        }
        self.readings.push_back(r);
        // Keep the newest reading at or before the window's start, for a whole window's span.
        while self.readings.len() > 2 && r.at_ms - self.readings[1].at_ms >= self.thresholds.window_ms {
            self.readings.pop_front();
        }
        let first = *self.readings.front()?;
        let span_ms = r.at_ms.saturating_sub(first.at_ms);
        // Less than a second says too little either way.
        if span_ms < 1_000 {
            return None;
        }
        let span_us = span_ms as f64 * 1000.0;
        self.figures = Figures {
            some_percent: (r.some_us - first.some_us) as f64 * 100.0 / span_us,
            full_percent: (r.full_us - first.full_us) as f64 * 100.0 / span_us,
            swapins_per_second: (r.anon_refaults - first.anon_refaults) as f64 * 1000.0 / span_ms as f64,
        };
        self.settle(self.verdict(), r.at_ms)
    }

    fn verdict(&self) -> ThrashState {
        let (t, f) = (&self.thresholds, &self.figures);
        if f.some_percent >= t.thrashing_some_percent && f.swapins_per_second >= t.swapins_per_second {
            ThrashState::Thrashing
        } else if f.some_percent >= t.pressured_some_percent {
            ThrashState::Pressured
        } else {
            ThrashState::Normal
        }
    }

    /// Rises at once, falls back after `recover_ms` below.
    fn settle(&mut self, verdict: ThrashState, now_ms: u64) -> Option<Change> {
        let from = self.state;
        if verdict >= from {
            self.calmer_since = None;
            if verdict == from {
                return None;
            }
        } else {
            let since = *self.calmer_since.get_or_insert(now_ms);
            if now_ms - since < self.thresholds.recover_ms {
                return None;
            }
            self.calmer_since = None;
        }
        self.state = verdict;
        Some(Change { from, to: verdict, figures: self.figures })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace of one reading a second: (stall share of that second in percent, swap-ins in
    /// that second), from an empty group.
    fn run(trace: &[(u64, u64)]) -> Vec<(usize, ThrashState)> {
        let mut d = Detector::new(Thresholds::default());
        let mut r = Reading { at_ms: 0, some_us: 0, full_us: 0, anon_refaults: 0 };
        let mut changes = vec![];
        d.observe(r);
        for (second, (stall_percent, swapins)) in trace.iter().enumerate() {
            r.at_ms += 1000;
            r.some_us += stall_percent * 10_000;
            r.full_us += stall_percent * 5_000;
            r.anon_refaults += swapins;
            if let Some(c) = d.observe(r) {
                changes.push((second + 1, c.to));
            }
        }
        changes
    }

    #[test]
    fn traces() {
        use ThrashState::*;
        let thrash = (60, 5000);
        let quiet = (0, 0);
        let cases: Vec<(&str, Vec<(u64, u64)>, Vec<(usize, ThrashState)>)> = vec![
            ("idle", vec![quiet; 30], vec![]),
            ("cold memory in swap, never touched", vec![(0, 0); 30], vec![]),
            ("a few swap-ins without stalls", vec![(1, 400); 30], vec![]),
            ("throttled at memory.high without swap-ins", vec![(40, 0); 20], vec![(1, Pressured)]),
            (
                "a thrash from second 5 is seen within 2 s, and over 10 s after the window clears",
                [vec![quiet; 4], vec![thrash; 10], vec![quiet; 30]].concat(),
                vec![(5, Pressured), (6, Thrashing), (28, Normal)],
            ),
            (
                "a mild thrash needs the window to fill",
                [vec![quiet; 5], vec![(25, 400); 10]].concat(),
                vec![(7, Pressured), (9, Thrashing)],
            ),
            (
                "a pause shorter than recover_ms does not end a thrash",
                [vec![thrash; 5], vec![quiet; 7], vec![thrash; 5], vec![quiet; 20]].concat(),
                vec![(1, Thrashing), (31, Normal)],
            ),
            (
                "thrash easing into pressure steps down once",
                [vec![thrash; 5], vec![(40, 0); 20]].concat(),
                vec![(1, Thrashing), (20, Pressured)],
            ),
        ];
        let wrong: Vec<String> = cases
            .into_iter()
            .filter_map(|(name, trace, want)| {
                let got = run(&trace);
                (got != want).then(|| format!("{name}: got {got:?}, want {want:?}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn figures_are_shares_and_rates_over_the_window() {
        let mut d = Detector::new(Thresholds::default());
        for s in 0..=10u64 {
            d.observe(Reading { at_ms: s * 1000, some_us: s * 300_000, full_us: s * 100_000, anon_refaults: s * 50 });
        }
        let f = d.figures();
        assert!((f.some_percent - 30.0).abs() < 1e-9, "{f:?}");
        assert!((f.full_percent - 10.0).abs() < 1e-9, "{f:?}");
        assert!((f.swapins_per_second - 50.0).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn a_gap_in_sampling_does_not_dilute_the_window() {
        let mut d = Detector::new(Thresholds::default());
        d.observe(Reading { at_ms: 0, some_us: 0, full_us: 0, anon_refaults: 0 });
        // A minute unobserved, then two seconds of heavy thrash: judged on those two seconds.
        d.observe(Reading { at_ms: 60_000, some_us: 100, full_us: 0, anon_refaults: 10 });
        d.observe(Reading { at_ms: 61_000, some_us: 800_100, full_us: 0, anon_refaults: 5_010 });
        assert_eq!(d.state(), ThrashState::Thrashing, "{:?}", d.figures());
    }

    #[test]
    fn counters_that_go_back_start_again() {
        let mut d = Detector::new(Thresholds::default());
        d.observe(Reading { at_ms: 0, some_us: 0, full_us: 0, anon_refaults: 0 });
        d.observe(Reading { at_ms: 2000, some_us: 1_900_000, full_us: 0, anon_refaults: 90_000 });
        assert_eq!(d.state(), ThrashState::Thrashing);
        // A restarted group: its totals are small again; no negative figures, no panic.
        assert_eq!(d.observe(Reading { at_ms: 3000, some_us: 10, full_us: 0, anon_refaults: 1 }), None);
        assert_eq!(d.observe(Reading { at_ms: 2500, some_us: 20, full_us: 0, anon_refaults: 2 }), None);
    }
}
