//! Container and sandbox lifecycle events (GetContainerEvents, for kubelet's Evented PLEG).
//! The registry emits one whenever a record is added, changes state or is removed; each
//! carries the pod's status and its containers' statuses at that moment. Subscribers read
//! from a bounded buffer: one that falls behind by more than it holds is dropped, so a slow
//! client never holds the daemon up.

use tokio::sync::broadcast;

use crate::service::owners::objects::{Container, Sandbox};

/// Events a subscriber may fall behind by before it is dropped.
pub const BUFFER: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Created,
    Started,
    Stopped,
    Deleted,
}

#[derive(Debug, Clone)]
pub struct Event {
    pub kind: EventKind,
    /// The container's id, or the sandbox's for the sandbox's own events.
    pub id: String,
    /// Nanoseconds since the epoch.
    pub created_at: i64,
    /// The pod's record at the time (None when it is already gone).
    pub sandbox: Option<Sandbox>,
    /// The pod's containers at the time.
    pub containers: Vec<Container>,
}

pub struct Events {
    tx: broadcast::Sender<Event>,
}

impl Default for Events {
    fn default() -> Self {
        Events { tx: broadcast::channel(BUFFER).0 }
    }
}

impl Events {
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }

    /// Whether anyone listens (the registry skips building events otherwise).
    pub fn wanted(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    pub fn send(&self, event: Event) {
        // No subscriber is not an error: events are not kept for later.
        let _ = self.tx.send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: usize) -> Event {
        Event { kind: EventKind::Created, id: n.to_string(), created_at: 0, sandbox: None, containers: vec![] }
    }

    #[test]
    fn a_slow_subscriber_lags_and_the_sender_never_waits() {
        let events = Events::default();
        assert!(!events.wanted());
        events.send(event(0));
        let mut slow = events.subscribe();
        let mut fast = events.subscribe();
        for n in 0..BUFFER + 5 {
            events.send(event(n));
            assert_eq!(fast.try_recv().unwrap().id, n.to_string());
        }
        assert!(matches!(slow.try_recv(), Err(broadcast::error::TryRecvError::Lagged(5))));
    }
}
