//! The background walk of every container's writable layer, and its on-demand walk.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::ids::ContainerId;

use crate::service::owners::samples::disk_usage;
use crate::service::owners::writable_usage::REFRESH;
use crate::service::pod_service::PodService;

impl PodService {
    /// The writable layer's usage: the last background walk's, else walked now.
    pub(in crate::service) fn writable_usage(&self, id: &ContainerId) -> Option<(u64, u64)> {
        match self.writable.get(id) {
            Some(usage) => usage,
            None => self.walk_writable_layer(id),
        }
    }

    /// Walks the writable layer now and keeps the figure for listings.
    pub(in crate::service) fn walk_writable_layer(&self, id: &ContainerId) -> Option<(u64, u64)> {
        let usage = disk_usage(&self.registry.container_state_dir(id).join("upper"));
        self.writable.set(id, usage);
        usage
    }

    /// Walks every container's writable layer every [`REFRESH`] (runs for the daemon's life).
    pub(in crate::service) async fn refresh_writable_usage(self: Arc<Self>) {
        let mut tick = tokio::time::interval(REFRESH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let ids: Vec<ContainerId> = self.registry.read().containers.keys().cloned().collect();
            let service = self.clone();
            let walked = crate::blocking::spawn(move || {
                ids.into_iter()
                    .map(|id| {
                        let usage = disk_usage(&service.registry.container_state_dir(&id).join("upper"));
                        (id, usage)
                    })
                    .collect::<HashMap<_, _>>()
            })
            .await;
            if let Ok(fresh) = walked {
                self.writable.replace(fresh);
            }
        }
    }
}
