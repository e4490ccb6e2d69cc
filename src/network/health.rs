//! The latest verified state of each pod's attachment, so a status call never waits on a
//! plugin: verbose PodSandboxStatus reports the last outcome (of ADD, then of CHECK) and,
//! once it is older than [`MAX_AGE`], a fresh CHECK runs in the background.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

/// How long an outcome stands before verbose status asks the plugins again.
pub const MAX_AGE: Duration = Duration::from_secs(10);

/// What the plugins last said of one pod's attachment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// "ADD" or "CHECK".
    pub by: &'static str,
    /// Seconds since the epoch.
    pub checked_at: u64,
}

impl Outcome {
    pub fn new(by: &'static str, result: Result<(), String>) -> Outcome {
        let checked_at = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        Outcome { ok: result.is_ok(), error: result.err(), by, checked_at }
    }
}

struct Entry {
    outcome: Option<Outcome>,
    at: Instant,
    checking: bool,
}

#[derive(Default)]
pub struct HealthCache {
    entries: Mutex<HashMap<String, Entry>>,
}

impl HealthCache {
    pub fn record(&self, sandbox_id: &str, outcome: Outcome) {
        let entry = Entry { outcome: Some(outcome), at: Instant::now(), checking: false };
        self.lock().insert(sandbox_id.to_string(), entry);
    }

    /// A background CHECK's outcome; dropped when the pod was torn down meanwhile.
    pub fn finish_check(&self, sandbox_id: &str, outcome: Outcome) {
        if let Some(entry) = self.lock().get_mut(sandbox_id) {
            *entry = Entry { outcome: Some(outcome), at: Instant::now(), checking: false };
        }
    }

    pub fn forget(&self, sandbox_id: &str) {
        self.lock().remove(sandbox_id);
    }

    /// The last outcome, and whether the caller should start a CHECK now (stale or never
    /// checked, and no CHECK already under way: at most one per pod at a time).
    pub fn latest(&self, sandbox_id: &str, now: Instant) -> (Option<Outcome>, bool) {
        let mut entries = self.lock();
        let entry = entries.entry(sandbox_id.to_string()).or_insert(Entry { outcome: None, at: now, checking: false });
        let stale = entry.outcome.is_none() || now.saturating_duration_since(entry.at) >= MAX_AGE;
        let start = stale && !entry.checking;
        if start {
            entry.checking = true;
        }
        (entry.outcome.clone(), start)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_outcomes_stand_and_stale_ones_start_one_check() {
        let cache = HealthCache::default();
        let t0 = Instant::now();
        // Never checked: one caller starts a CHECK, the next waits for it.
        assert_eq!(cache.latest("p", t0), (None, true));
        assert_eq!(cache.latest("p", t0), (None, false));
        cache.finish_check("p", Outcome::new("CHECK", Ok(())));
        let (outcome, start) = cache.latest("p", Instant::now());
        assert!(outcome.is_some_and(|o| o.ok && o.by == "CHECK"));
        assert!(!start);
        // Older than MAX_AGE: the old outcome is answered and exactly one CHECK starts.
        let later = Instant::now() + MAX_AGE;
        assert!(cache.latest("p", later).1);
        assert!(!cache.latest("p", later).1);
        cache.forget("p");
        // A CHECK that ends after the pod was torn down leaves nothing behind.
        cache.finish_check("p", Outcome::new("CHECK", Ok(())));
        assert_eq!(cache.latest("p", later), (None, true));
    }

    #[test]
    fn a_failed_check_keeps_its_error() {
        let cache = HealthCache::default();
        cache.record("p", Outcome::new("CHECK", Err("bridge: no such link".into())));
        let (outcome, _) = cache.latest("p", Instant::now());
        let outcome = outcome.unwrap();
        assert!(!outcome.ok);
        assert_eq!(outcome.error.as_deref(), Some("bridge: no such link"));
    }
}
