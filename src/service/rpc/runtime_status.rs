use serde_json::json;

use crate::network::NetworkError;
use crate::service::owners::runtimes::HandlerCapabilities;
use crate::service::pod_service::PodService;
use crate::service::runtime_service::RuntimeService;

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
    /// Usable handlers ("" first, for the default) with what each offers.
    pub handlers: Vec<(String, HandlerCapabilities)>,
    pub info: Option<serde_json::Value>,
}

impl RuntimeService {
    /// RuntimeReady needs a working default handler; NetworkReady a usable CNI
    /// configuration. Verbose adds the node facts, the handlers and the memory policy.
    pub async fn status(&self, verbose: bool, pods: &PodService) -> RuntimeStatus {
        let network = pods.network_ready().await;
        let runtimes = self.runtimes.clone();
        if let Err(e) = crate::blocking::spawn(move || runtimes.reprobe_unusable()).await {
            tracing::warn!(error = %e, "probing the runtime handlers again");
        }
        let mut status = self.conditions(verbose, network);
        status.conditions.push(pods.records_condition());
        if let Some(info) = &mut status.info {
            pods.memory.add_status(info);
        }
        status
    }

    fn conditions(&self, verbose: bool, network: Result<String, NetworkError>) -> RuntimeStatus {
        let default = self.runtimes.default_name();
        let default_probe = self.runtimes.get(default).ok();
        let runtime_ready = match default_probe.map(|h| h.features()) {
            Some(f) if f.usable => {
                Condition { kind: "RuntimeReady", status: true, reason: String::new(), message: String::new() }
            }
            Some(f) => Condition {
                kind: "RuntimeReady",
                status: false,
                reason: "RuntimeHandlerUnavailable".into(),
                message: format!("default handler {default}: {}", f.error.as_deref().unwrap_or("unusable")),
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
                message: match why {
                    NetworkError::NotReady(reason) => format!("no usable CNI configuration: {reason}"),
                    other => other.to_string(),
                },
            },
        };
        let mut handlers = Vec::new();
        if let Some(h) = default_probe.filter(|h| h.features().usable) {
            handlers.push((String::new(), h.capabilities(&self.node)));
        }
        handlers.extend(
            self.runtimes
                .all()
                .filter(|h| h.features().usable)
                .map(|h| (h.spec.name.clone(), h.capabilities(&self.node))),
        );
        let info = verbose.then(|| {
            json!({
                "config": &*self.config,
                "node": &self.node,
                "restrictOomScoreAdj": self.node.min_oom_score_adj > -1000,
                "network": match &network { Ok(name) => json!({"ready": true, "name": name}), Err(e) => json!({"ready": false, "error": e.to_string()}) },
                "handlers": self.runtimes.all().map(|h| json!({
                    "name": h.spec.name,
                    "engine": h.spec.engine,
                    "binary": h.spec.binary,
                    "root": h.spec.root,
                    "features": h.features(),
                })).collect::<Vec<_>>(),
            })
        });
        RuntimeStatus { conditions: vec![runtime_ready, network_ready], handlers, info }
    }
}

/// The condition that reports records this build cannot read (kubelet acts on RuntimeReady
/// and NetworkReady only; this one is for the operator, in `crictl info`).
pub const RECORDS_READABLE: &str = "RecordsReadable";

impl PodService {
    /// False while any object is quarantined, naming each and why.
    pub fn records_condition(&self) -> Condition {
        let state = self.registry.read();
        if state.quarantined.is_empty() {
            return Condition { kind: RECORDS_READABLE, status: true, reason: String::new(), message: String::new() };
        }
        let listed: Vec<String> = state.quarantined.iter().map(|q| format!("{} {}: {}", q.kind, q.id, q.why)).collect();
        Condition {
            kind: RECORDS_READABLE,
            status: false,
            reason: "RecordsQuarantined".into(),
            message: format!(
                "{} object(s) kept aside and left running, not listed (see `swapcri quarantine list`): {}",
                listed.len(),
                listed.join("; ")
            ),
        }
    }
}
