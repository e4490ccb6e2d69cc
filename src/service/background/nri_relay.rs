//! The exits found on their own (not through StopContainer), relayed to NRI plugins as
//! StopContainer events.

use std::sync::Arc;

use crate::model::ids::ContainerId;
use crate::service::owners::events::EventKind;
use crate::service::pod_service::PodService;

impl PodService {
    /// Relays exits found on their own to NRI, for the daemon's life (with NRI on).
    pub(in crate::service) async fn relay_exits_to_nri(self: Arc<Self>) {
        if !self.nri.enabled() {
            return;
        }
        let mut events = self.subscribe_events();
        loop {
            match events.recv().await {
                Ok(event) if event.kind == EventKind::Stopped => {
                    let service = self.clone();
                    if let Some(id) = ContainerId::parse(&event.id) {
                        tokio::spawn(async move { service.nri_stopped(&id).await });
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
