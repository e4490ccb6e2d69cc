//! The wake-up of a background watcher (background/): something new for it to watch was
//! recorded (a pod with a PID-namespace holder, a container with a monitor).

use tokio::sync::Notify;

/// Tells a watcher to look at the records again.
#[derive(Default)]
pub struct Wake {
    changed: Notify,
}

impl Wake {
    pub fn changed(&self) {
        self.changed.notify_one();
    }

    /// Resolves at the next `changed` (or at once, for one that came before).
    pub async fn wait(&self) {
        self.changed.notified().await
    }
}
