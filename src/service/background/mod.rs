//! What runs beside the calls: the exit watch, the PID-namespace holder watch, the writable-
//! layer walk, the NRI exit relay, and the start-up recovery.

pub(in crate::service) mod exit_watch;
pub(in crate::service) mod recovery;
pub(in crate::service) mod sandbox_watch;
pub(in crate::service) mod writable_refresh;
