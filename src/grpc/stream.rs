//! The `Stream*` list RPCs (CRIListStreaming): the same items as the `List*` call,
//! sent in batches so no single message nears gRPC's 4 MiB default limit.

use futures::stream::BoxStream;
use tonic::Status;

/// Items per response message. Each batch holds at least one item; an empty list
/// sends no message and just ends the stream.
pub const BATCH: usize = 256;

pub type ListStream<R> = BoxStream<'static, Result<R, Status>>;

/// Splits `items` into messages built by `wrap`.
pub fn batched<T: Send + 'static, R: Send + 'static>(items: Vec<T>, wrap: fn(Vec<T>) -> R) -> ListStream<R> {
    let mut batches = Vec::with_capacity(items.len().div_ceil(BATCH));
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        batches.push(Ok(wrap(items.by_ref().take(BATCH).collect())));
    }
    Box::pin(futures::stream::iter(batches))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn sizes(n: usize) -> Vec<usize> {
        let stream = batched((0..n).collect::<Vec<_>>(), |v| v);
        futures::executor::block_on(stream.map(|r| r.unwrap().len()).collect::<Vec<_>>())
    }

    #[test]
    fn every_item_once_in_non_empty_batches() {
        for (n, want) in [(0, vec![]), (1, vec![1]), (BATCH, vec![BATCH]), (BATCH + 1, vec![BATCH, 1])] {
            assert_eq!(sizes(n), want, "{n} items");
        }
        let stream = batched((0..600).collect::<Vec<_>>(), |v| v);
        let all: Vec<usize> = futures::executor::block_on(stream.map(|r| r.unwrap()).collect::<Vec<_>>()).concat();
        assert_eq!(all, (0..600).collect::<Vec<_>>());
    }
}
