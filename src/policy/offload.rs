//! Cold-memory offload (pure): how much of a container's memory to reclaim proactively
//! (through `memory.reclaim`) at each look, the approach of Meta's TMO/Senpai. Reclaim
//! continues while the container's own memory pressure stays under a target and the pages
//! taken do not come back (refaults); its step grows while that holds and falls back to the
//! smallest at the first sign of either, after which the container is left alone for a
//! doubling number of looks. It never reclaims past the container's swap share
//! (`memory.swap.max`): what does not fit there would only be written for nothing. Nor does
//! it ask for more than the anonymous memory the container's processes left untouched over
//! each of the last two spans between looks (the kernel's accessed bits): a container that
//! touched all of it in either is not probed at all, so a hot working set, or one that was
//! only kept off a CPU for a moment, loses nothing to it. A container that ran but is reported
//! to have touched almost nothing is not believed (`untouched`) and is not probed either.

use serde::Serialize;

use crate::config::OffloadConfig;

const PAGE: u64 = 4096;
/// Swap left free in the container's share.
const SWAP_MARGIN: u64 = 1 << 20;
/// The smallest step worth a write.
const MIN_STEP: u64 = 256 << 10;

/// The `[offload]` settings the decisions use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The memory pressure (some, percent of the time between looks) under which reclaim
    /// continues.
    pub psi_some_percent: f64,
    /// The first step, percent of `memory.current`.
    pub step_percent: f64,
    /// The most the step grows to (× the first).
    pub max_growth: u32,
    /// Refaults, as a percent of the last step, that mean the pages taken were in use.
    pub refault_percent: f64,
    /// The most looks a container is left alone after a sign of pressure.
    pub max_backoff: u32,
}

impl Settings {
    pub fn of(config: &OffloadConfig) -> Self {
        Settings {
            psi_some_percent: config.psi_some_percent,
            step_percent: config.step_percent,
            max_growth: config.max_growth,
            refault_percent: config.refault_percent,
            max_backoff: config.max_backoff_looks,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::of(&OffloadConfig::default())
    }
}

/// One look at a container's files.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Milliseconds on a monotonic clock.
    pub at_ms: u64,
    /// `memory.pressure` some total, microseconds.
    pub some_us: u64,
    /// Refaulted pages, anonymous and file (`workingset_refault_*`).
    pub refaults: u64,
    pub memory_current: u64,
    pub swap_current: u64,
    /// `memory.swap.max` in bytes (None: "max").
    pub swap_max: Option<u64>,
    /// Anonymous memory the kernel saw no access to since the last look.
    pub idle_anon: Untouched,
}

/// What the kernel's accessed bits say of a container's anonymous memory over a span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Untouched {
    /// Not read: a span too short, a process or the CPU time unreadable, too many processes.
    #[default]
    Unknown,
    /// Read but not believed (`untouched`).
    NotSeen,
    /// Bytes left untouched.
    Bytes(u64),
}

impl Untouched {
    fn bytes(self) -> Option<u64> {
        match self {
            Untouched::Bytes(b) => Some(b),
            Untouched::Unknown | Untouched::NotSeen => None,
        }
    }
}

/// CPU time, in thousandths of a span, from which a container reported to have touched
/// less than `MIN_STEP` is not believed.
const BLIND_CPU_PER_MILLE: u64 = 10;

/// Anonymous bytes left untouched over a span of `span_us`, from `anon` and the bytes the
/// kernel's accessed bits say the container's processes touched; `NotSeen` when those bits
/// cannot be believed, `Unknown` without the CPU time used (`ran_us`). x86 Linux does not flush the TLB when it clears accessed bits
/// (`clear_refs`, and reclaim's own aging), and a CPU sets them only when it walks the page
/// tables: a process whose working set stays in the TLB (a small one, one in huge pages, one
/// that never leaves its CPU) keeps touching it and is reported to touch nothing. A
/// container that used the CPU for at least 1 % of the span (`ran_us`) yet is reported to
/// have touched less than the smallest step is such a case.
pub fn untouched(anon: u64, touched: u64, ran_us: Option<u64>, span_us: u64) -> Untouched {
    match ran_us {
        None => Untouched::Unknown,
        Some(ran) if ran * 1000 >= span_us * BLIND_CPU_PER_MILLE && touched < MIN_STEP => Untouched::NotSeen,
        Some(_) => Untouched::Bytes(anon.saturating_sub(touched)),
    }
}

/// What to do at this look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Step {
    /// Write this many bytes to `memory.reclaim`.
    Reclaim { bytes: u64 },
    /// Nothing this time, and why.
    Wait { why: Why },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Why {
    /// The first look, or counters that went back: a span is needed.
    Measuring,
    Pressure,
    Refaults,
    BackingOff,
    SwapShareFull,
    /// Every anonymous page was touched since the last look: all of it is working set.
    WorkingSet,
    /// The container ran, yet the kernel saw it touch almost nothing: what is idle is not known.
    NotSeen,
}

/// One container's offload, fed a sample per look.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Offloader {
    #[serde(skip)]
    settings: Settings,
    #[serde(skip)]
    last: Option<Sample>,
    /// Bytes asked in all.
    pub requested: u64,
    growth: u32,
    backoff: u32,
    skip: u32,
    #[serde(skip)]
    last_idle: Option<u64>,
    /// What the last look decided.
    pub decision: Option<Step>,
}

impl Offloader {
    pub fn new(settings: Settings) -> Offloader {
        Offloader {
            settings,
            last: None,
            requested: 0,
            growth: 1,
            backoff: 0,
            skip: 0,
            last_idle: None,
            decision: None,
        }
    }

    pub fn look(&mut self, s: Sample) -> Step {
        let step = self.decide(s);
        if let Step::Reclaim { bytes } = step {
            self.requested += bytes;
        }
        self.decision = Some(step);
        step
    }

    /// Bytes asked of the kernel at the last look (0: it waited).
    fn last_step(&self) -> u64 {
        match self.decision {
            Some(Step::Reclaim { bytes }) => bytes,
            _ => 0,
        }
    }

    fn decide(&mut self, s: Sample) -> Step {
        let cfg = self.settings;
        let wait = |why| Step::Wait { why };
        // Idle over this span and the one before it.
        let before = std::mem::replace(&mut self.last_idle, s.idle_anon.bytes());
        let idle = s.idle_anon.bytes().zip(before).map(|(a, b)| a.min(b));
        let Some(prev) = self.last_sample(s) else { return wait(Why::Measuring) };
        let span_us = (s.at_ms - prev.at_ms) as f64 * 1000.0;
        let pressure = (s.some_us - prev.some_us) as f64 * 100.0 / span_us;
        let refaulted = (s.refaults - prev.refaults) * PAGE;
        let tolerated = (self.last_step() as f64 * cfg.refault_percent / 100.0) as u64;
        let sign = if pressure > cfg.psi_some_percent {
            Some(Why::Pressure)
        } else if refaulted > tolerated.max(MIN_STEP / 4) {
            Some(Why::Refaults)
        } else {
            None
        };
        if let Some(why) = sign {
            self.growth = 1;
            self.backoff = (self.backoff * 2).clamp(1, cfg.max_backoff.max(1));
            self.skip = self.backoff;
            return wait(why);
        }
        if self.skip > 0 {
            self.skip -= 1;
            return wait(Why::BackingOff);
        }
        // A reclaim that brought nothing back earns trust; a look after a pause does not.
        if self.last_step() > 0 {
            self.backoff /= 2;
        }
        let Some(idle) = idle else {
            return wait(if s.idle_anon == Untouched::NotSeen { Why::NotSeen } else { Why::Measuring });
        };
        if idle < MIN_STEP {
            return wait(Why::WorkingSet);
        }
        let headroom = s.swap_max.map_or(u64::MAX, |max| max.saturating_sub(s.swap_current + SWAP_MARGIN));
        let step = s.memory_current as f64 * cfg.step_percent / 100.0 * self.growth as f64;
        // Slower as the pressure nears the target.
        let step = (step * (1.0 - pressure / cfg.psi_some_percent)) as u64 / PAGE * PAGE;
        let step = step.max(MIN_STEP).min(headroom).min(idle / PAGE * PAGE);
        if step < MIN_STEP {
            return wait(Why::SwapShareFull);
        }
        self.growth = (self.growth * 2).min(cfg.max_growth.max(1));
        Step::Reclaim { bytes: step }
    }

    /// Keeps `s` and gives the sample before it, when the two make a span.
    fn last_sample(&mut self, s: Sample) -> Option<Sample> {
        let prev = self.last.replace(s)?;
        let backwards = s.at_ms <= prev.at_ms || s.some_us < prev.some_us || s.refaults < prev.refaults;
        (!backwards).then_some(prev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A sample `n` looks in, 5 s apart, with the pressure (µs per look) and refaults
    /// (pages per look) so far.
    fn at(n: u64, some_us: u64, refaults: u64, current: u64, swap: u64) -> Sample {
        Sample {
            at_ms: n * 5000,
            some_us,
            refaults,
            memory_current: current,
            swap_current: swap,
            swap_max: Some(256 * MIB),
            idle_anon: Untouched::Bytes(current),
        }
    }

    fn bytes(step: Step) -> u64 {
        match step {
            Step::Reclaim { bytes } => bytes,
            Step::Wait { .. } => 0,
        }
    }

    #[test]
    fn accessed_bits_are_believed_unless_the_container_ran_and_touched_nothing() {
        use Untouched::*;
        const S: u64 = 5_000_000;
        let cases = [
            // anon, touched, CPU used, span: untouched
            (64 * MIB, 0, Some(0), S, Bytes(64 * MIB)),
            (64 * MIB, 0, Some(S / 100 - 1), S, Bytes(64 * MIB)),
            (64 * MIB, 0, Some(S / 100), S, NotSeen),
            (64 * MIB, 0, Some(S), S, NotSeen),
            (64 * MIB, MIN_STEP - 4096, Some(S), S, NotSeen),
            (64 * MIB, MIN_STEP, Some(S), S, Bytes(64 * MIB - MIN_STEP)),
            (64 * MIB, 64 * MIB, Some(S), S, Bytes(0)),
            (MIB, 2 * MIB, Some(0), S, Bytes(0)),
            (64 * MIB, 0, None, S, Unknown),
        ];
        for (anon, touched, ran, span, want) in cases {
            assert_eq!(untouched(anon, touched, ran, span), want, "{anon} {touched} {ran:?}");
        }
    }

    #[test]
    fn cold_memory_goes_in_growing_steps() {
        let mut o = Offloader::new(Settings::default());
        assert_eq!(o.look(at(0, 0, 0, 100 * MIB, 0)), Step::Wait { why: Why::Measuring });
        let mut current = 100 * MIB;
        let mut steps = vec![];
        for n in 1..=6 {
            let b = bytes(o.look(at(n, 0, 0, current, 100 * MIB - current)));
            steps.push(b / (MIB / 100));
            current -= b;
        }
        // 2 %, 4 %, 8 % of what is left, and 8 % from then on (max_growth 4).
        assert_eq!(steps, [200, 391, 752, 692, 636, 585], "hundredths of a MiB");
        assert!(100 * MIB - current >= 20 * MIB, "a fifth moved within 30 s");
    }

    fn letter(step: Step) -> char {
        match step {
            Step::Reclaim { .. } => 'R',
            Step::Wait { why: Why::Refaults } => 'F',
            Step::Wait { why: Why::Pressure } => 'P',
            Step::Wait { why: Why::BackingOff } => 'B',
            Step::Wait { .. } => '?',
        }
    }

    #[test]
    fn a_touched_working_set_is_never_probed_and_the_part_idle_over_two_spans_is_the_most_asked() {
        let mut o = Offloader::new(Settings::default());
        let with_idle = |n, idle: Option<u64>| Sample {
            idle_anon: idle.map_or(Untouched::Unknown, Untouched::Bytes),
            ..at(n, 0, 0, 64 * MIB, 0)
        };
        o.look(with_idle(0, None));
        assert_eq!(o.look(with_idle(1, Some(MIB / 8))), Step::Wait { why: Why::Measuring }, "one span only");
        for n in 2..=20 {
            assert_eq!(o.look(with_idle(n, Some(MIB / 8))), Step::Wait { why: Why::WorkingSet }, "look {n}");
        }
        assert_eq!(o.requested, 0);
        assert_eq!(o.look(with_idle(21, None)), Step::Wait { why: Why::Measuring }, "accessed bits unknown");
        let blind = Sample { idle_anon: Untouched::NotSeen, ..with_idle(22, None) };
        assert_eq!(o.look(blind), Step::Wait { why: Why::NotSeen }, "accessed bits not believed");
        assert_eq!(o.look(with_idle(23, Some(32 * MIB))), Step::Wait { why: Why::Measuring }, "one span only");
        // 2 % of 64 MiB would be 1.28 MiB; only 512 KiB (and a bit) went untouched in this span.
        assert_eq!(o.look(with_idle(24, Some(MIB / 2 + 100))), Step::Reclaim { bytes: MIB / 2 });
        // Idle now, but not over the span before: the smaller of the two.
        assert_eq!(o.look(with_idle(25, Some(32 * MIB))), Step::Reclaim { bytes: MIB / 2 });
        // Idle over both: 8 % (growth 4) of 64 MiB, whole pages.
        assert_eq!(o.look(with_idle(26, Some(32 * MIB))), Step::Reclaim { bytes: 5_365_760 }, "1,310 pages");
        // Touched in this span: nothing, whatever the span before said.
        assert_eq!(o.look(with_idle(27, Some(0))), Step::Wait { why: Why::WorkingSet });
    }

    /// Pages touched less often than the looks come look idle; the refaults tell.
    #[test]
    fn a_hot_working_set_is_probed_ever_more_rarely() {
        let mut o = Offloader::new(Settings::default());
        o.look(at(0, 0, 0, 64 * MIB, 0));
        let mut refaults = 0;
        let mut trace = String::new();
        for n in 1..=16 {
            let step = o.look(at(n, 0, refaults, 64 * MIB, 0));
            if n == 1 {
                assert_eq!(bytes(step), 1_339_392, "2 % of 64 MiB");
            }
            // Whatever is taken comes straight back.
            refaults += bytes(step) / 4096;
            trace.push(letter(step));
        }
        assert_eq!(trace, "RFBRFBBRFBBBBRFB");
    }

    #[test]
    fn pressure_stops_it_and_clean_steps_shorten_the_pause_again() {
        let mut o = Offloader::new(Settings::default());
        o.look(at(0, 0, 0, 64 * MIB, 0));
        let mut trace = String::new();
        // Above 0.1 % of 5 s (5 ms) at looks 2 and 3; clean otherwise.
        let some = |n: u64| match n {
            0..=1 => 0,
            2 => 6_000,
            _ => 12_000,
        };
        for n in 1..=9 {
            trace.push(letter(o.look(at(n, some(n), 0, 64 * MIB, 0))));
        }
        assert_eq!(trace, "RPPBBRRRR");
        assert_eq!(o.backoff, 0, "halved at each clean reclaim after the pause");
    }

    #[test]
    fn a_few_refaults_within_the_tolerance_do_not_stop_it() {
        let mut o = Offloader::new(Settings::default());
        o.look(at(0, 0, 0, 100 * MIB, 0));
        o.look(at(1, 0, 0, 100 * MIB, 0));
        // 10 % of a 2 MiB step is 51 pages.
        assert!(matches!(o.look(at(2, 1_000, 50, 98 * MIB, 2 * MIB)), Step::Reclaim { .. }));
    }

    #[test]
    fn never_past_the_swap_share() {
        let mut o = Offloader::new(Settings::default());
        let near_full = |n| Sample { swap_max: Some(10 * MIB), ..at(n, 0, 0, 100 * MIB, 8 * MIB + MIB / 2) };
        o.look(near_full(0));
        assert_eq!(bytes(o.look(near_full(1))), MIB / 2, "what is left of the share less the margin");
        let full = Sample { swap_max: Some(10 * MIB), ..at(2, 0, 0, 100 * MIB, 9 * MIB + 1) };
        assert_eq!(o.look(full), Step::Wait { why: Why::SwapShareFull });
        let unlimited = Sample { swap_max: None, ..at(3, 0, 0, 100 * MIB, 50 * MIB) };
        assert!(matches!(o.look(unlimited), Step::Reclaim { .. }));
    }

    #[test]
    fn counters_going_back_start_a_new_span() {
        let mut o = Offloader::new(Settings::default());
        o.look(at(1, 5_000_000, 900, 64 * MIB, 0));
        assert_eq!(o.look(at(2, 0, 0, 64 * MIB, 0)), Step::Wait { why: Why::Measuring });
        assert!(matches!(o.look(at(3, 0, 0, 64 * MIB, 0)), Step::Reclaim { .. }));
    }
}
