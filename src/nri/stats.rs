//! Per-plugin figures: connection, events, errors and time spent, for the metrics endpoint.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use super::plugin::PluginId;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventStats {
    pub count: u64,
    pub errors: u64,
    pub seconds: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginStats {
    pub plugin: String,
    pub connected: bool,
    pub events: BTreeMap<String, EventStats>,
}

#[derive(Default)]
pub struct Stats(Mutex<BTreeMap<String, PluginStats>>);

impl Stats {
    fn with(&self, id: &PluginId, f: impl FnOnce(&mut PluginStats)) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let name = id.to_string();
        f(all.entry(name.clone()).or_insert_with(|| PluginStats { plugin: name, ..Default::default() }));
    }

    pub fn connected(&self, id: &PluginId) {
        self.with(id, |s| s.connected = true);
    }

    pub fn disconnected(&self, id: &PluginId) {
        self.with(id, |s| s.connected = false);
    }

    pub fn observe(&self, id: &PluginId, event: &str, elapsed: Duration, failed: bool) {
        self.with(id, |s| {
            let e = s.events.entry(event.to_string()).or_default();
            e.count += 1;
            e.errors += u64::from(failed);
            e.seconds += elapsed.as_secs_f64();
        });
    }

    pub fn snapshot(&self) -> Vec<PluginStats> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }
}
