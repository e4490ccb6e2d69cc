//! Runtime-wide facts: configuration and what was probed at start-up.

use std::sync::Arc;

use crate::config::Config;

use crate::service::owners::runtimes::Runtimes;

/// Runtime-wide facts: configuration and what was probed at start-up.
pub struct RuntimeService {
    pub(super) config: Arc<Config>,
    pub(super) node: crate::model::node::NodeFacts,
    pub(super) runtimes: Arc<Runtimes>,
}

impl RuntimeService {
    pub fn new(config: Arc<Config>, node: crate::model::node::NodeFacts, runtimes: Arc<Runtimes>) -> Self {
        RuntimeService { config, node, runtimes }
    }
}
