//! The slowest a registry may send (`image.pull_min_bytes_per_second` over
//! `image.pull_min_rate_window_secs`): the progress timeout only ends a transfer that sends
//! nothing, and one that trickles a few bytes every few seconds would otherwise hold a pull,
//! and every pull queued behind it, for ever.

use std::time::{Duration, Instant};

/// Bytes of one transfer, counted in consecutive windows.
#[derive(Debug, Clone)]
pub struct RateFloor {
    bytes_per_second: u64,
    window: Duration,
    started: Instant,
    received: u64,
}

/// A window that closed with less than its share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooSlow {
    pub received: u64,
    pub window_secs: u64,
    pub bytes_per_second: u64,
}

impl RateFloor {
    /// A floor of `bytes_per_second` (0: none) measured over `window`, from `now`.
    pub fn new(bytes_per_second: u64, window: Duration, now: Instant) -> Self {
        RateFloor { bytes_per_second, window, started: now, received: 0 }
    }

    /// Counts `bytes` received at `now`. Once a window has passed, it must have brought at
    /// least its share; the next window starts then.
    pub fn record(&mut self, bytes: u64, now: Instant) -> Result<(), TooSlow> {
        self.received = self.received.saturating_add(bytes);
        let elapsed = now.saturating_duration_since(self.started);
        if self.bytes_per_second == 0 || elapsed < self.window {
            return Ok(());
        }
        let share = self.bytes_per_second.saturating_mul(elapsed.as_secs());
        if self.received < share {
            return Err(TooSlow {
                received: self.received,
                window_secs: elapsed.as_secs(),
                bytes_per_second: self.bytes_per_second,
            });
        }
        self.started = now;
        self.received = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_must_bring_its_share() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        /// (rate, chunks as (seconds after the start, bytes)): the chunk that fails, if any.
        type Case = (u64, &'static [(u64, u64)], Option<usize>);
        let cases: [Case; 7] = [
            // A slow but real link: 2 KiB/s.
            (1024, &[(10, 20_480), (30, 40_960), (60, 61_440), (90, 61_440), (121, 61_440)], None),
            // A trickle of 30 bytes every second or so.
            (1024, &[(1, 30), (30, 900), (59, 870), (61, 60)], Some(3)),
            // Nothing is judged before a window has passed.
            (1024, &[(59, 1)], None),
            // A window's bytes may all come at its end.
            (1024, &[(60, 61_440), (120, 61_440)], None),
            // A chunk late past the window is judged over the whole time it took.
            (1024, &[(10, 61_440), (100, 30_000)], Some(1)),
            // The second window too.
            (1024, &[(60, 61_440), (125, 100)], Some(1)),
            // 0: no floor.
            (0, &[(600, 1)], None),
        ];
        for (rate, chunks, fails_at) in cases {
            let mut floor = RateFloor::new(rate, s(60), t0);
            let failed = chunks.iter().position(|(at, bytes)| floor.record(*bytes, t0 + s(*at)).is_err());
            assert_eq!(failed, fails_at, "{rate} {chunks:?}");
        }
        let mut floor = RateFloor::new(1024, s(60), t0);
        assert_eq!(
            floor.record(1800, t0 + s(61)),
            Err(TooSlow { received: 1800, window_secs: 61, bytes_per_second: 1024 })
        );
    }
}
