//! The containers whose NRI StopContainer event was sent, each once (nri_domain.rs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::model::ids::ContainerId;

/// Each container's StopContainer event, sent once: by whoever sees the stop first, the
/// others waiting for it (so RemoveContainer never overtakes it).
#[derive(Default)]
pub(crate) struct StopsSent(Mutex<HashMap<ContainerId, Arc<tokio::sync::OnceCell<()>>>>);

impl StopsSent {
    pub(in crate::service) fn cell(&self, id: &ContainerId) -> Arc<tokio::sync::OnceCell<()>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).entry(id.clone()).or_default().clone()
    }

    pub(in crate::service) fn forget(&self, id: &ContainerId) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}
