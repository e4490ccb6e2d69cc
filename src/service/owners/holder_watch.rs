//! The wake-up of the PID-namespace holder watcher (sandbox_watch.rs).

use tokio::sync::Notify;

/// Tells the watcher that a sandbox with a holder was recorded.
#[derive(Default)]
pub struct HolderWatch {
    changed: Notify,
}

impl HolderWatch {
    pub fn changed(&self) {
        self.changed.notify_one();
    }

    /// Resolves at the next `changed` (or at once, for one that came before).
    pub async fn wait(&self) {
        self.changed.notified().await
    }
}
