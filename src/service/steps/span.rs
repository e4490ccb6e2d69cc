//! Spans around the steps of an RPC.

/// A span around one step of an RPC (at debug level): with `log_span_timings` on, each
/// step's time is logged when it ends, which tells where a slow call spends its time.
pub(crate) fn step(name: &'static str) -> tracing::Span {
    tracing::debug_span!("step", step = name)
}
