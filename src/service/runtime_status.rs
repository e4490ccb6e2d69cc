use std::process::Command;

use serde_json::json;

use crate::config::Config;

use super::RuntimeService;

/// One CRI runtime condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub kind: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// What `Status` answers.
#[derive(Debug, Clone)]
pub struct RuntimeStatus {
    pub conditions: Vec<Condition>,
    pub handlers: Vec<String>,
    pub info: Option<serde_json::Value>,
}

/// A runtime handler and whether its binary answered `--version` at start-up.
#[derive(Debug, Clone)]
pub struct HandlerProbe {
    pub name: String,
    pub version: Result<String, String>,
}

pub fn probe_handlers(config: &Config) -> Vec<HandlerProbe> {
    config
        .runtime
        .handlers
        .iter()
        .map(|(name, handler)| {
            let version = match Command::new(&handler.binary).arg("--version").output() {
                Ok(out) if out.status.success() => {
                    Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_string())
                }
                Ok(out) => Err(format!("{} --version failed: {}", handler.binary.display(), out.status)),
                Err(e) => Err(format!("{}: {e}", handler.binary.display())),
            };
            if let Err(e) = &version {
                tracing::warn!(handler = %name, error = %e, "runtime handler unusable");
            }
            HandlerProbe { name: name.clone(), version }
        })
        .collect()
}

impl RuntimeService {
    /// RuntimeReady needs a working default handler; NetworkReady a usable CNI
    /// configuration (`network`: the network's name, or why there is none).
    pub fn status(&self, verbose: bool, network: Result<String, String>) -> RuntimeStatus {
        let default = &self.config.runtime.default_handler;
        let default_probe = self.handlers.iter().find(|h| &h.name == default);
        let runtime_ready = match default_probe.map(|h| &h.version) {
            Some(Ok(_)) => {
                Condition { kind: "RuntimeReady", status: true, reason: String::new(), message: String::new() }
            }
            Some(Err(e)) => Condition {
                kind: "RuntimeReady",
                status: false,
                reason: "RuntimeHandlerUnavailable".into(),
                message: format!("default handler {default}: {e}"),
            },
            None => Condition {
                kind: "RuntimeReady",
                status: false,
                reason: "RuntimeHandlerUnavailable".into(),
                message: format!("default handler {default} is not configured"),
            },
        };
        let network_ready = match &network {
            Ok(_) => Condition { kind: "NetworkReady", status: true, reason: String::new(), message: String::new() },
            Err(why) => Condition {
                kind: "NetworkReady",
                status: false,
                reason: "NetworkPluginNotReady".into(),
                message: format!("no usable CNI configuration: {why}"),
            },
        };
        let mut handlers = Vec::new();
        if default_probe.is_some_and(|h| h.version.is_ok()) {
            handlers.push(String::new());
        }
        handlers.extend(self.handlers.iter().filter(|h| h.version.is_ok()).map(|h| h.name.clone()));
        let info = verbose.then(|| {
            json!({
                "config": &*self.config,
                "node": &self.node,
                "restrictOomScoreAdj": self.node.min_oom_score_adj > -1000,
                "network": match &network { Ok(name) => json!({"ready": true, "name": name}), Err(e) => json!({"ready": false, "error": e}) },
                "handlers": self.handlers.iter().map(|h| json!({
                    "name": h.name,
                    "version": h.version.as_ref().ok(),
                    "error": h.version.as_ref().err(),
                })).collect::<Vec<_>>(),
            })
        });
        RuntimeStatus { conditions: vec![runtime_ready, network_ready], handlers, info }
    }
}
