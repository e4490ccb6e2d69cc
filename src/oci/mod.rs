//! The OCI runtimes (runc, crun) behind one trait. Nothing outside this module knows an OCI
//! runtime's command line: the monitor creates through `create`, streaming exec runs the
//! command `exec_command` builds, and the services use the async calls.

mod cli;
mod exec;
#[cfg(test)]
pub mod fake;
mod features;
mod runtime;

use std::sync::Arc;

use crate::model::handler::HandlerSpec;

pub use cli::CliRuntime;
pub use features::Features;
pub use runtime::{exit_code, CheckpointPaths, CreateIo, ExecOutput, OciError, OciRuntime, RestoreFrom, RuntimeState};

/// The runtime for a handler.
pub fn runtime_for(spec: &HandlerSpec) -> Arc<dyn OciRuntime> {
    Arc::new(CliRuntime::new(spec.clone()))
}
