//! Pod networking through CNI (spec 1.0): ADD when a pod starts, DEL when it stops, CHECK on
//! request, VERSION to validate a configuration. Every attachment is recorded before ADD runs
//! and removed only after DEL succeeded, so a crash at any point leaves a record that
//! recovery can tear down: no address is leaked.

pub mod conf;
pub mod health;
pub mod interfaces;
pub mod invoke;
pub mod result;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::config::NetworkConfig;
use crate::model::error_kind::{Classify, ErrorKind};
pub use crate::model::sandbox::PodAddresses;
use conf::NetworkList;
use invoke::{Call, PluginError};

#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("pod network not ready: {0}")]
    NotReady(String),
    #[error("pod CIDR {0:?} is not an address/prefix")]
    InvalidCidr(String),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error("network state {path}: {message}")]
    State { path: PathBuf, message: String },
}

/// What a pod asks of the network.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodRequest {
    pub sandbox_id: String,
    pub netns: PathBuf,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    /// CNI `portMappings` capability entries (hostPort > 0 only).
    pub port_mappings: Vec<Value>,
    /// CNI `dns` capability (the pod's DNS config), when set.
    pub dns: Option<Value>,
}

/// The record kept per pod: everything DEL needs, even after a restart or a config change.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Attachment {
    request: PodRequest,
    ifname: String,
    network: NetworkList,
    runtime_config: Map<String, Value>,
    /// None while ADD has not completed.
    result: Option<Value>,
}

/// A configuration checked by running each plugin's VERSION, remembered by file and mtime.
#[derive(Debug, Clone)]
struct Validated {
    source: PathBuf,
    modified: Option<std::time::SystemTime>,
    outcome: Result<NetworkList, String>,
}

pub struct Network {
    config: NetworkConfig,
    state_dir: PathBuf,
    pod_cidr: Mutex<String>,
    validated: Mutex<Option<Validated>>,
    health: health::HealthCache,
}

impl Network {
    pub fn new(config: NetworkConfig, state_dir: PathBuf) -> Self {
        Network {
            config,
            state_dir,
            pod_cidr: Mutex::new(String::new()),
            validated: Mutex::new(None),
            health: Default::default(),
        }
    }

    /// The pod CIDR kubelet hands over (UpdateRuntimeConfig; comma-separated when dual
    /// stack), offered to plugins that declare the `ipRanges` capability.
    pub fn set_pod_cidr(&self, cidr: &str) -> Result<(), NetworkError> {
        for part in cidr.split(',') {
            let valid = part.split_once('/').is_some_and(|(ip, len)| {
                let max = match ip.parse::<std::net::IpAddr>() {
                    Ok(std::net::IpAddr::V4(_)) => 32,
                    Ok(std::net::IpAddr::V6(_)) => 128,
                    Err(_) => return false,
                };
                len.parse::<u8>().is_ok_and(|l| l <= max)
            });
            if !valid {
                return Err(NetworkError::InvalidCidr(part.to_string()));
            }
        }
        *self.pod_cidr.lock().unwrap_or_else(|e| e.into_inner()) = cidr.to_string();
        Ok(())
    }

    pub fn pod_cidr(&self) -> String {
        self.pod_cidr.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.config.plugin_timeout_seconds)
    }

    /// The network pods join now: the first configuration in the directory whose plugins
    /// all exist and accept its cniVersion. Re-read whenever the file changes, so dropping a
    /// configuration in makes the node ready without a restart.
    pub async fn ready(&self) -> Result<NetworkList, NetworkError> {
        self.usable().await.map_err(NetworkError::NotReady)
    }

    async fn usable(&self) -> Result<NetworkList, String> {
        let list = conf::load_first(&self.config.config_dir).map_err(|e| e.to_string())?;
        let modified = std::fs::metadata(&list.source).and_then(|m| m.modified()).ok();
        {
            let cached = self.validated.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(v) = cached.as_ref().filter(|v| v.source == list.source && v.modified == modified) {
                if v.outcome.as_ref().ok().is_none_or(|l| *l == list) {
                    return v.outcome.clone();
                }
            }
        }
        let outcome = self.validate(list.clone()).await;
        if let Err(e) = &outcome {
            tracing::warn!(config = %list.source.display(), "CNI configuration not usable: {e}");
        }
        *self.validated.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Validated { source: list.source.clone(), modified, outcome: outcome.clone() });
        outcome
    }

    async fn validate(&self, list: NetworkList) -> Result<NetworkList, String> {
        let call = Call {
            command: "VERSION",
            container_id: "",
            netns: "",
            ifname: "",
            args: "",
            plugin_dirs: &self.config.plugin_dirs,
            timeout: self.timeout(),
        };
        for plugin in list.plugin_types() {
            let answer = invoke::run(plugin, &call, &json!({ "cniVersion": list.cni_version })).await;
            let info = answer.map_err(|e| e.to_string())?;
            let supported = info.get("supportedVersions").and_then(Value::as_array);
            if !supported.is_some_and(|v| v.iter().any(|s| s.as_str() == Some(list.cni_version.as_str()))) {
                return Err(format!(
                    "{}: plugin {plugin} does not support cniVersion {} (it supports {})",
                    list.source.display(),
                    list.cni_version,
                    supported.map(|v| Value::Array(v.clone()).to_string()).unwrap_or_else(|| "nothing".into())
                ));
            }
        }
        Ok(list)
    }

    fn record_path(&self, sandbox_id: &str) -> PathBuf {
        self.state_dir.join(format!("{sandbox_id}.json"))
    }

    /// Writes the record (fsynced: it must be on disk before the plugin allocates anything),
    /// off the async workers.
    fn save(&self, attachment: &Attachment) -> Result<(), NetworkError> {
        let path = self.record_path(&attachment.request.sandbox_id);
        let state = |message: String| NetworkError::State { path: path.clone(), message };
        let bytes = serde_json::to_vec_pretty(attachment).map_err(|e| state(e.to_string()))?;
        crate::blocking::run(|| {
            crate::store::private::create_dir_all(&self.state_dir)?;
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, bytes)?;
            std::fs::File::open(&tmp).and_then(|f| f.sync_all())?;
            std::fs::rename(&tmp, &path)
        })
        .map_err(|e| state(e.to_string()))
    }

    fn load(&self, sandbox_id: &str) -> Result<Option<Attachment>, NetworkError> {
        let path = self.record_path(sandbox_id);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| NetworkError::State { path, message: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(NetworkError::State { path, message: e.to_string() }),
        }
    }

    fn cni_args(request: &PodRequest) -> String {
        format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={}",
            request.namespace, request.name, request.sandbox_id, request.uid
        )
    }

    fn runtime_config(&self, request: &PodRequest) -> Map<String, Value> {
        let mut rc = Map::new();
        if !request.port_mappings.is_empty() {
            rc.insert("portMappings".into(), Value::Array(request.port_mappings.clone()));
        }
        let cidr = self.pod_cidr();
        if !cidr.is_empty() {
            let ranges: Vec<Value> = cidr.split(',').map(|c| json!([{ "subnet": c }])).collect();
            rc.insert("ipRanges".into(), Value::Array(ranges));
        }
        if let Some(dns) = &request.dns {
            rc.insert("dns".into(), dns.clone());
        }
        rc
    }

    /// Attaches the pod: ADD through the plugin chain. On failure whatever was set up is
    /// torn down again and the record removed.
    pub async fn setup(&self, request: PodRequest) -> Result<PodAddresses, NetworkError> {
        let network = self.ready().await?;
        let mut attachment = Attachment {
            runtime_config: self.runtime_config(&request),
            request,
            ifname: self.config.interface.clone(),
            network,
            result: None,
        };
        self.save(&attachment)?;
        match self.run_chain("ADD", &attachment).await {
            Ok(result) => {
                attachment.result = Some(result.clone());
                self.save(&attachment)?;
                self.health.record(&attachment.request.sandbox_id, health::Outcome::new("ADD", Ok(())));
                let (ip, additional_ips) = result::pod_ips(&result);
                Ok(PodAddresses { network: attachment.network.name, ip, additional_ips })
            }
            Err(e) => {
                let id = attachment.request.sandbox_id.clone();
                if let Err(del) = self.teardown(&id).await {
                    tracing::warn!(sandbox = %id, error = %del, "cleaning up after a failed CNI ADD");
                }
                Err(e)
            }
        }
    }

    /// Detaches the pod: DEL through the chain in reverse. Idempotent; a pod without a record
    /// has nothing to release. The record stays when DEL fails, so the next try repeats it.
    pub async fn teardown(&self, sandbox_id: &str) -> Result<(), NetworkError> {
        self.health.forget(sandbox_id);
        let Some(attachment) = self.load(sandbox_id)? else { return Ok(()) };
        self.run_chain("DEL", &attachment).await?;
        let path = self.record_path(sandbox_id);
        match crate::blocking::run(|| std::fs::remove_file(&path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(NetworkError::State { path, message: e.to_string() })
            }
            _ => Ok(()),
        }
    }

    /// CHECK of an attached pod (skipped when the network disables it or predates 0.4.0).
    pub async fn check(&self, sandbox_id: &str) -> Result<(), NetworkError> {
        let Some(attachment) = self.load(sandbox_id)? else { return Ok(()) };
        if attachment.network.disable_check || result::version_before(&attachment.network.cni_version, (0, 4)) {
            return Ok(());
        }
        self.run_chain("CHECK", &attachment).await.map(|_| ())
    }

    /// The last verified state of a pod's attachment, without waiting on a plugin; starts a
    /// CHECK in the background when that state is stale.
    pub fn health(self: &Arc<Self>, sandbox_id: &str) -> Option<health::Outcome> {
        let (outcome, start) = self.health.latest(sandbox_id, std::time::Instant::now());
        if start {
            let network = Arc::clone(self);
            let id = sandbox_id.to_string();
            tokio::spawn(async move {
                let result = network.check(&id).await.map_err(|e| e.to_string());
                network.health.finish_check(&id, health::Outcome::new("CHECK", result));
            });
        }
        outcome
    }

    /// Tears down every recorded attachment whose pod `keep` does not vouch for (a crash
    /// between ADD and the pod's own record, or a pod that no longer exists).
    pub async fn recover(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.state_dir) else { return Vec::new() };
        let mut released = Vec::new();
        let ids: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_string))
            .collect();
        for id in ids {
            if keep(&id) {
                continue;
            }
            match self.teardown(&id).await {
                Ok(()) => {
                    tracing::info!(sandbox = %id, "released the network of an unknown pod");
                    released.push(id);
                }
                Err(e) => tracing::warn!(sandbox = %id, error = %e, "cannot release the network of an unknown pod"),
            }
        }
        released
    }

    /// One operation over the chain: ADD in order threading prevResult, DEL in reverse with
    /// the recorded result, CHECK in order with it.
    async fn run_chain(&self, command: &'static str, attachment: &Attachment) -> Result<Value, NetworkError> {
        let request = &attachment.request;
        let netns = netns_arg(&request.netns, command);
        let args = Self::cni_args(request);
        let call = Call {
            command,
            container_id: &request.sandbox_id,
            netns: &netns,
            ifname: &attachment.ifname,
            args: &args,
            plugin_dirs: &self.config.plugin_dirs,
            timeout: self.timeout(),
        };
        let list = &attachment.network;
        let mut prev = if command == "ADD" { None } else { attachment.result.clone() };
        let plugins: Vec<&Map<String, Value>> =
            if command == "DEL" { list.plugins.iter().rev().collect() } else { list.plugins.iter().collect() };
        for plugin in plugins {
            let kind = plugin.get("type").and_then(Value::as_str).unwrap_or_default();
            let config = plugin_config(list, plugin, &attachment.runtime_config, prev.as_ref());
            let out = invoke::run(kind, &call, &config).await;
            match (command, out) {
                ("ADD", Ok(result)) => prev = Some(result),
                (_, Ok(_)) => {}
                // A plugin that is gone cannot hold anything to release.
                ("DEL", Err(PluginError::NotFound { plugin, .. })) => {
                    tracing::warn!(%plugin, sandbox = %request.sandbox_id, "CNI plugin missing at DEL; skipped")
                }
                (_, Err(e)) => return Err(e.into()),
            }
        }
        Ok(prev.unwrap_or(Value::Null))
    }
}

/// CNI_NETNS: the pinned namespace, or empty for DEL when it is gone.
fn netns_arg(path: &Path, command: &str) -> String {
    if command == "DEL" && !path.exists() {
        String::new()
    } else {
        path.display().to_string()
    }
}

/// The configuration one plugin reads: its own object plus the list's name and version, the
/// runtime values for the capabilities it declares, and the previous result.
fn plugin_config(
    list: &NetworkList,
    plugin: &Map<String, Value>,
    runtime: &Map<String, Value>,
    prev: Option<&Value>,
) -> Value {
    let mut config = plugin.clone();
    config.insert("name".into(), Value::String(list.name.clone()));
    config.insert("cniVersion".into(), Value::String(list.cni_version.clone()));
    let capabilities = plugin.get("capabilities").and_then(Value::as_object);
    let wanted: Map<String, Value> = runtime
        .iter()
        .filter(|(k, _)| capabilities.and_then(|c| c.get(*k)).and_then(Value::as_bool) == Some(true))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !wanted.is_empty() {
        config.insert("runtimeConfig".into(), Value::Object(wanted));
    }
    match prev {
        Some(p) if !p.is_null() => {
            config.insert("prevResult".into(), p.clone());
        }
        _ => {}
    }
    Value::Object(config)
}

impl Classify for NetworkError {
    fn kind(&self) -> ErrorKind {
        match self {
            NetworkError::NotReady(_) => ErrorKind::FailedPrecondition,
            NetworkError::InvalidCidr(_) => ErrorKind::InvalidArgument,
            NetworkError::Plugin(PluginError::Timeout { .. }) => ErrorKind::DeadlineExceeded,
            NetworkError::Plugin(_) | NetworkError::State { .. } => ErrorKind::Internal,
        }
    }
}

#[cfg(test)]
mod tests;
