//! The per-container monitor: a small process of our own binary, like conmon or a
//! containerd shim. It creates the container through the OCI runtime, holds its stdio, writes the CRI
//! log, reopens it on request, reaps the container's init as a subreaper, and records the
//! exit code, finish time and OOM kill on disk. It outlives the daemon.

pub mod attach;
mod handoff;
pub mod log;
mod process;
mod spawn;
pub mod terminal;

pub use handoff::{MonitorConfig, MonitorReport, SpareJob, SPARE_ARG};
pub use log::{CriLog, LineFramer, Stream};
pub use process::{main, spare_main};
pub use spawn::{reopen_log, spawn, MonitorError, Spares, COMMAND};
