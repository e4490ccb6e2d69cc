//! The runtime handlers: each OCI runtime with its settings and the features probed once at
//! start-up. Requests name a handler; this owner resolves it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::config::Config;
use crate::error::Error;
use crate::model::handler::HandlerSpec;
use crate::model::node::NodeFacts;
use crate::oci::{Features, OciRuntime};

/// One handler: what it is, its runtime, and what it supports.
pub struct RuntimeHandler {
    pub spec: HandlerSpec,
    pub runtime: Arc<dyn OciRuntime>,
    /// Probed at start-up; probed again while the runtime is unusable (not installed yet).
    features: RwLock<Features>,
}

/// What a handler offers a pod on this node, as the CRI's RuntimeHandlerFeatures say it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandlerCapabilities {
    /// The runtime has the `rro` mount option and the kernel has mount_setattr (5.12).
    pub recursive_read_only: bool,
    /// User namespaces with id-mapped mounts: the runtime maps mounts (`idmap`) and the node
    /// can give pods user namespaces (see `node::userns`).
    pub user_namespaces: bool,
    /// A user-namespaced pod may use the host's network namespace: whenever user namespaces
    /// work, as the container gets the host's /sys bound instead of a sysfs of its own.
    pub user_namespaces_host_network: bool,
}

impl RuntimeHandler {
    fn new(spec: HandlerSpec, runtime: Arc<dyn OciRuntime>) -> Self {
        let features = runtime.probe_features();
        if let Some(e) = &features.error {
            tracing::warn!(handler = %spec.name, error = %e, "runtime handler unusable");
        } else {
            tracing::info!(handler = %spec.name, version = %features.version, rro = features.recursive_read_only,
                idmap = features.idmap_mounts, probed_by = features.probed_by, "runtime handler");
        }
        RuntimeHandler { spec, runtime, features: RwLock::new(features) }
    }

    pub fn features(&self) -> Features {
        self.features.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Probes an unusable runtime again: a binary installed (or repaired) after start-up
    /// makes the handler usable without a restart, and a still unusable one reports why now.
    fn reprobe_if_unusable(&self) {
        if self.features().usable {
            return;
        }
        let features = self.runtime.probe_features();
        if features.usable {
            tracing::info!(handler = %self.spec.name, version = %features.version, "runtime handler usable now");
        }
        *self.features.write().unwrap_or_else(|p| p.into_inner()) = features;
    }

    pub fn capabilities(&self, node: &NodeFacts) -> HandlerCapabilities {
        let kernel = |major, minor| node.memory.kernel.is_some_and(|k| k.at_least(major, minor));
        let user_namespaces = self.userns_unsupported_reason(node).is_empty();
        let features = self.features();
        HandlerCapabilities {
            recursive_read_only: features.usable && features.recursive_read_only && kernel(5, 12),
            user_namespaces,
            // The host's /sys is bind-mounted where sysfs cannot be mounted (policy::spec).
            user_namespaces_host_network: user_namespaces,
        }
    }

    /// Why pods of this handler cannot have user namespaces ("" when they can).
    pub fn userns_unsupported_reason(&self, node: &NodeFacts) -> String {
        let features = self.features();
        if !features.usable {
            "the runtime is unusable".into()
        } else if !features.idmap_mounts {
            format!("{} has no id-mapped mounts", features.version)
        } else if !node.userns.supported {
            node.userns.detail.clone()
        } else {
            String::new()
        }
    }
}

pub struct Runtimes {
    default: String,
    handlers: BTreeMap<String, RuntimeHandler>,
}

impl Runtimes {
    /// Builds every configured handler and probes its binary.
    pub fn probe(config: &Config) -> Self {
        let handlers = config
            .handler_specs()
            .into_iter()
            .map(|spec| {
                let runtime = crate::oci::runtime_for(&spec);
                (spec.name.clone(), RuntimeHandler::new(spec, runtime))
            })
            .collect();
        Runtimes { default: config.runtime.default_handler.clone(), handlers }
    }

    /// The handler name a request resolves to ("" is the default).
    pub fn resolve(&self, requested: &str) -> Result<String, Error> {
        let name = if requested.is_empty() { self.default.as_str() } else { requested };
        if self.handlers.contains_key(name) {
            Ok(name.to_string())
        } else {
            Err(Error::InvalidArgument(format!("unknown runtime handler {requested:?}")))
        }
    }

    pub fn get(&self, name: &str) -> Result<&RuntimeHandler, Error> {
        self.handlers
            .get(name)
            .ok_or_else(|| Error::FailedPrecondition(format!("runtime handler {name:?} is no longer configured")))
    }

    /// The runtime of a handler.
    pub fn runtime(&self, name: &str) -> Result<Arc<dyn OciRuntime>, Error> {
        self.get(name).map(|h| h.runtime.clone())
    }

    pub fn default_name(&self) -> &str {
        &self.default
    }

    pub fn all(&self) -> impl Iterator<Item = &RuntimeHandler> {
        self.handlers.values()
    }

    /// Probes the handlers found unusable again (see `RuntimeHandler::reprobe_if_unusable`).
    pub fn reprobe_unusable(&self) {
        self.handlers.values().for_each(RuntimeHandler::reprobe_if_unusable);
    }

    /// Replaces every handler's runtime (tests: a fake runtime).
    #[cfg(test)]
    pub fn replace_runtimes(&mut self, runtime: Arc<dyn OciRuntime>) {
        for handler in self.handlers.values_mut() {
            handler.runtime = runtime.clone();
        }
    }
}
