//! What one streaming connection may hold of the client's bytes before the container takes
//! them. The reader of a connection waits for room (and so stops reading the socket) instead
//! of queueing: memory per connection stays bounded whatever the client sends.

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// The bytes a connection's streams hold, shared by all of them.
#[derive(Clone)]
pub struct Budget {
    room: Arc<Semaphore>,
    bytes: usize,
}

/// Client bytes waiting for their consumer, counted against the connection's budget until
/// taken.
pub struct Held {
    data: Vec<u8>,
    _room: Option<OwnedSemaphorePermit>,
}

impl Held {
    /// Bytes counted against no budget (made by the runtime itself).
    pub fn free(data: Vec<u8>) -> Held {
        Held { data, _room: None }
    }

    pub fn take(self) -> Vec<u8> {
        self.data
    }
}

impl Budget {
    pub fn new(bytes: usize) -> Budget {
        Budget { room: Arc::new(Semaphore::new(bytes)), bytes }
    }

    /// Waits for room for `data` (frames are never larger than the budget: the frame cap is
    /// at most the budget, so a chunk is cut to it just in case).
    pub async fn hold(&self, data: Vec<u8>) -> Held {
        let n = data.len().clamp(1, self.bytes) as u32;
        match self.room.clone().acquire_many_owned(n).await {
            Ok(permit) => Held { data, _room: Some(permit) },
            Err(_) => Held::free(data), // never closed
        }
    }

    /// Bytes held now (for tests and figures).
    pub fn in_use(&self) -> usize {
        self.bytes - self.room.available_permits()
    }
}

/// Delivers client bytes to a stream's consumer after waiting for room; false when the
/// consumer is gone.
pub async fn deliver(budget: &Budget, to: &mpsc::Sender<Held>, data: Vec<u8>) -> bool {
    to.send(budget.hold(data).await).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_budget_makes_the_reader_wait_until_bytes_are_taken() {
        let budget = Budget::new(10);
        let (tx, mut rx) = mpsc::channel(64);
        assert!(deliver(&budget, &tx, vec![1; 6]).await);
        assert_eq!(budget.in_use(), 6);
        let blocked =
            tokio::time::timeout(std::time::Duration::from_millis(50), deliver(&budget, &tx, vec![2; 6])).await;
        assert!(blocked.is_err(), "no room for 6 more bytes");
        assert_eq!(rx.recv().await.unwrap().take(), vec![1; 6]);
        assert_eq!(budget.in_use(), 0);
        assert!(deliver(&budget, &tx, vec![2; 6]).await);
    }
}
