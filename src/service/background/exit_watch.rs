//! Lifecycle events to subscribers, and the exits picked up for them while anyone listens.

use tokio::sync::broadcast;

use crate::service::owners::events::{Event, EXIT_POLL};
use crate::service::pod_service::PodService;

impl PodService {
    /// A subscription to lifecycle events.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Event> {
        self.registry.subscribe_events()
    }

    /// Picks up exits the monitors recorded, while anyone listens for events (runs for the
    /// daemon's life).
    pub(in crate::service) async fn watch_exits(self: std::sync::Arc<Self>) {
        let mut tick = tokio::time::interval(EXIT_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if !self.registry.events_wanted() {
                continue;
            }
            let live: Vec<_> = self
                .registry
                .read()
                .containers
                .values()
                .filter(|c| {
                    matches!(
                        c.status.state,
                        crate::model::container::ContainerState::Created
                            | crate::model::container::ContainerState::Running
                    )
                })
                .map(|c| c.meta.id.clone())
                .collect();
            for id in live {
                self.registry.refresh(&id);
            }
        }
    }
}
