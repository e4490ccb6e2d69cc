//! Typed configuration, loaded from TOML. Every field has a default; unknown keys are refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod checkpoint;
mod guard;
mod handlers;
mod nri;
mod offload;
mod range;
mod thrash;
mod validate;

use crate::model::handler::HandlerSpec;
pub use checkpoint::CheckpointConfig;
pub use guard::{GuardConfig, GuardMode};
pub use handlers::{HandlerConfig, BUILTIN_HANDLER};
pub use nri::NriConfig;
pub use offload::OffloadConfig;
pub use thrash::ThrashConfig;

/// Where the configuration file lives unless `--config` says otherwise.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/swapcri/config.toml";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid config value for `{key}`: {message}")]
    Invalid { key: String, message: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Unix socket that serves the CRI API.
    pub socket: PathBuf,
    /// Group (numeric gid) that owns the socket; the socket mode is 0660.
    pub socket_gid: Option<u32>,
    /// Persistent state: images, layers, container metadata.
    pub state_root: PathBuf,
    /// Volatile state: sockets, runtime directories.
    pub run_root: PathBuf,
    /// tracing filter, e.g. "info" or "swapcri=debug"; RUST_LOG overrides it.
    pub log_level: String,
    /// Log each traced step's duration when it ends (the steps are at debug level, so
    /// the filter must let them through, e.g. "swapcri=debug,info").
    pub log_span_timings: bool,
    /// Where the cgroup filesystem is mounted (probed for the cgroup mode).
    pub cgroup_root: PathBuf,
    pub runtime: RuntimeConfig,
    pub swap: SwapConfig,
    pub memory_qos: MemoryQosConfig,
    pub system: SystemConfig,
    pub metrics: MetricsConfig,
    pub thrash: ThrashConfig,
    pub guard: GuardConfig,
    pub offload: OffloadConfig,
    pub nri: NriConfig,
    pub network: NetworkConfig,
    pub streaming: StreamingConfig,
    pub image: ImageConfig,
    pub checkpoint: CheckpointConfig,
    /// Per-registry settings, keyed by host[:port] (e.g. "registry.local:5000").
    pub registries: BTreeMap<String, RegistryConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Handler used when a request names none.
    pub default_handler: String,
    /// The runtime handlers offered to kubelet (RuntimeClass handler names), the built-in
    /// `runc` one included.
    #[serde(deserialize_with = "handlers::with_builtin")]
    pub handlers: BTreeMap<String, HandlerConfig>,
    /// How pods and containers are placed in the cgroup tree; kubelet follows it (RuntimeConfig).
    pub cgroup_driver: CgroupDriver,
    /// Size of each pod's /dev/shm tmpfs.
    pub shm_size_bytes: u64,
    /// Container log lines longer than this are split into partial records.
    pub max_log_line_bytes: usize,
    /// ExecSync keeps at most this much of stdout and of stderr.
    pub exec_output_limit_bytes: usize,
    /// Container monitors kept started ahead of need (0: each starts with its container).
    pub spare_monitors: usize,
    /// cgroup (relative to each hierarchy's root) for monitors and namespace holders, so
    /// stopping the daemon's service kills no container.
    pub monitor_cgroup: String,
    /// cgroup parent for pods whose request names none (crictl); swapcri owns it.
    pub default_cgroup_parent: String,
    /// systemd driver: the slice under which pods whose request names no parent get a slice
    /// of their own (`<parent>-pod<id>.slice`).
    pub parent_slice: String,
    /// systemd driver: the slice of the monitors' and namespace holders' scopes.
    pub monitor_slice: String,
    /// `noswap` on the tmpfs mounts swapcri creates: "auto" (probe), "on" or "off".
    pub tmpfs_noswap: NoswapMode,
}

pub use crate::model::cgroup_layout::CgroupDriver;

/// How containers' `memory.swap.max` is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SwapBehavior {
    /// Apply what kubelet sends; NoSwap where it sends nothing.
    #[serde(rename = "follow-kubelet")]
    FollowKubelet,
    NoSwap,
    LimitedSwap,
}

/// Whose value is applied when swapcri's own swap decision differs from kubelet's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SwapAuthority {
    Kubelet,
    Runtime,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwapConfig {
    pub behavior: SwapBehavior,
    pub authority: SwapAuthority,
    /// Swap kept for processes outside containers; LimitedSwap shares out the rest.
    pub reserved_for_system_bytes: u64,
}

/// Memory protection (`memory.min` / `memory.low`) of swapcri's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reservation {
    /// Apply what kubelet sends, nothing of our own.
    #[serde(rename = "follow-kubelet")]
    FollowKubelet,
    /// Every container's `memory.min` = its request (kubelet's original MemoryQoS).
    #[serde(rename = "min")]
    Min,
    /// Guaranteed: `memory.min` = request; Burstable: `memory.low` = request.
    #[serde(rename = "tiered")]
    Tiered,
    /// No reservation at all, kubelet's included.
    #[serde(rename = "none")]
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryQosConfig {
    pub reservation: Reservation,
    /// `memory.high` = request + factor × (limit − request); unset: none of our own.
    pub throttling_factor: Option<f64>,
    /// Node allocatable memory; unset: the kubepods cgroup's memory.max, else MemTotal.
    pub node_allocatable_bytes: Option<u64>,
}

/// The Prometheus endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` serving `/metrics` (e.g. "127.0.0.1:9117"); empty: off.
    pub address: String,
}

/// The streaming server behind Exec, Attach and PortForward (kubectl exec / attach /
/// port-forward).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamingConfig {
    /// `IP:port` to listen on; port 0 picks a free port. kubelet connects here, so keep it
    /// on loopback unless kubelet runs elsewhere.
    pub address: String,
    /// How long a URL from Exec, Attach or PortForward stays valid (each is usable once).
    pub token_ttl_seconds: u64,
    /// A session whose connection carries nothing either way for this long is closed (as
    /// kubelet's and containerd's stream idle timeout); 0: never.
    pub stream_idle_timeout_seconds: u64,
    /// PEM certificate chain and private key: when both are set the server speaks TLS and
    /// hands out https URLs (the client must trust the chain; kubelet does not accept a
    /// self-signed one). Empty: plain HTTP.
    pub tls_cert_file: PathBuf,
    pub tls_key_file: PathBuf,
    /// A connection must finish its TLS handshake and its HTTP request (up to the upgrade)
    /// in this time.
    pub handshake_timeout_seconds: u64,
    /// Connections served at once, from accept to the end of their session; more are closed
    /// as they arrive.
    pub max_connections: usize,
    /// Largest SPDY frame (and decompressed header block) or WebSocket message a client may
    /// send.
    pub max_frame_bytes: usize,
    /// Client bytes one connection may hold while its container has not taken them; past
    /// this the connection is not read until it has.
    pub max_buffered_bytes: usize,
}

impl Default for StreamingConfig {
    fn default() -> Self {
        Self {
            address: "127.0.0.1:0".into(),
            token_ttl_seconds: 60,
            stream_idle_timeout_seconds: 4 * 3600,
            tls_cert_file: PathBuf::new(),
            tls_key_file: PathBuf::new(),
            handshake_timeout_seconds: 10,
            max_connections: 128,
            max_frame_bytes: 1 << 20,
            max_buffered_bytes: 2 << 20,
        }
    }
}

/// Pod networking through CNI plugins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkConfig {
    /// Directories searched, in order, for plugin binaries (CNI_PATH).
    pub plugin_dirs: Vec<PathBuf>,
    /// Network configurations (`*.conflist`, `*.conf`, `*.json`); the first by file name is used.
    pub config_dir: PathBuf,
    /// A plugin still running after this many seconds is killed and the operation fails.
    pub plugin_timeout_seconds: u64,
    /// Name of the pod's interface (CNI_IFNAME).
    pub interface: String,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        Self {
            plugin_dirs: vec![PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")],
            config_dir: PathBuf::from("/etc/cni/net.d"),
            plugin_timeout_seconds: 60,
            interface: "eth0".into(),
        }
    }
}

/// Protection of the system daemons' cgroup from swap and swap I/O.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SystemConfig {
    /// The system daemons' cgroup, relative to the cgroup root.
    pub cgroup: String,
    /// Create `cgroup` when it is missing (otherwise protection is reported as skipped).
    pub create_cgroup: bool,
    /// `memory.swap.max` of the system cgroup (e.g. 0); unset: not written.
    pub swap_max: Option<u64>,
    /// `io.latency` target in microseconds; unset: no io protection.
    pub io_latency_target_us: Option<u64>,
    /// Devices ("MAJ:MIN") the io protection covers; empty: the disks under active swap.
    pub io_devices: Vec<String>,
    /// Without io.latency in the kernel, fall back to `io.weight` / `io.bfq.weight`.
    pub io_weight_fallback: bool,
    /// The weight used by that fallback (1–10000; cgroups default to 100).
    pub io_weight: u32,
}

impl Default for SystemConfig {
    fn default() -> Self {
        Self {
            cgroup: "system.slice".into(),
            create_cgroup: false,
            swap_max: None,
            io_latency_target_us: None,
            io_devices: Vec::new(),
            io_weight_fallback: true,
            io_weight: 1000,
        }
    }
}

impl Default for SwapConfig {
    fn default() -> Self {
        Self { behavior: SwapBehavior::FollowKubelet, authority: SwapAuthority::Kubelet, reserved_for_system_bytes: 0 }
    }
}

impl Default for MemoryQosConfig {
    fn default() -> Self {
        Self { reservation: Reservation::FollowKubelet, throttling_factor: None, node_allocatable_bytes: None }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImageConfig {
    /// A pull that receives no bytes for this long is cancelled.
    pub pull_progress_timeout_secs: u64,
    /// The slowest a transfer of a pull may be, bytes per second, measured over each
    /// `pull_min_rate_window_secs` (0: no floor): a registry that trickles is refused.
    pub pull_min_bytes_per_second: u64,
    pub pull_min_rate_window_secs: u64,
    /// Layers downloaded at once within one pull.
    pub max_concurrent_downloads: usize,
    /// Images reported as pinned (never garbage-collected by kubelet).
    pub pinned: Vec<String>,
    /// Registries on loopback addresses (localhost, 127.0.0.0/8, ::1) are reached over
    /// plain HTTP unless they have an entry of their own.
    pub loopback_plain_http: bool,
    /// Largest manifest or index a registry may send.
    pub max_manifest_bytes: u64,
    /// Largest image config.
    pub max_config_bytes: u64,
    /// Most layers an image may have.
    pub max_layers: usize,
    /// Largest layer once decompressed (the tar stream).
    pub max_layer_unpacked_bytes: u64,
    /// Largest image: its layers decompressed, and its layers as downloaded.
    pub max_image_unpacked_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// Reach this registry over plain HTTP.
    pub plain_http: bool,
    /// Accept any TLS certificate from this registry.
    pub insecure_skip_verify: bool,
    /// Registries tried, in order, before this one (host[:port]); each mirror's own
    /// entry decides its protocol.
    pub mirrors: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            socket: PathBuf::from("/run/swapcri/swapcri.sock"),
            socket_gid: None,
            state_root: PathBuf::from("/var/lib/swapcri"),
            run_root: PathBuf::from("/run/swapcri"),
            log_level: "info".to_string(),
            log_span_timings: false,
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            runtime: RuntimeConfig::default(),
            swap: SwapConfig::default(),
            memory_qos: MemoryQosConfig::default(),
            system: SystemConfig::default(),
            metrics: MetricsConfig::default(),
            thrash: ThrashConfig::default(),
            guard: GuardConfig::default(),
            nri: NriConfig::default(),
            offload: OffloadConfig::default(),
            network: NetworkConfig::default(),
            streaming: StreamingConfig::default(),
            image: ImageConfig::default(),
            checkpoint: CheckpointConfig::default(),
            registries: BTreeMap::new(),
        }
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        let handlers = handlers::builtin();
        Self {
            default_handler: "runc".to_string(),
            handlers,
            cgroup_driver: CgroupDriver::Cgroupfs,
            shm_size_bytes: 64 * 1024 * 1024,
            max_log_line_bytes: 16 * 1024,
            exec_output_limit_bytes: 16 * 1024 * 1024,
            spare_monitors: 1,
            monitor_cgroup: "swapcri-monitors".to_string(),
            default_cgroup_parent: "/swapcri".to_string(),
            parent_slice: "swapcri.slice".to_string(),
            monitor_slice: "swapcri-monitors.slice".to_string(),
            tmpfs_noswap: NoswapMode::Auto,
        }
    }
}

impl Default for ImageConfig {
    fn default() -> Self {
        Self {
            pull_progress_timeout_secs: 60,
            pull_min_bytes_per_second: 1024,
            pull_min_rate_window_secs: 60,
            max_concurrent_downloads: 3,
            pinned: Vec::new(),
            loopback_plain_http: true,
            max_manifest_bytes: 4 << 20,
            max_config_bytes: 4 << 20,
            max_layers: 128,
            max_layer_unpacked_bytes: 16 << 30,
            max_image_unpacked_bytes: 64 << 30,
        }
    }
}

/// The default configuration as a commented TOML document (`swapcri config default`).
pub const DEFAULT_TOML: &str = include_str!("default.toml");

/// Overrides given on the command line; each replaces the file's value when set.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub socket: Option<PathBuf>,
    pub state_root: Option<PathBuf>,
    pub run_root: Option<PathBuf>,
    pub log_level: Option<String>,
}

impl Config {
    /// Reads `path`; a missing file at the default path means all defaults.
    pub fn load(path: &Path, must_exist: bool) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
                let config = Self::default();
                config.validate()?;
                Ok(config)
            }
            Err(source) => Err(ConfigError::Read { path: path.to_path_buf(), source }),
        }
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    pub fn apply(&mut self, overrides: Overrides) -> Result<(), ConfigError> {
        if let Some(v) = overrides.socket {
            self.socket = v;
        }
        if let Some(v) = overrides.state_root {
            self.state_root = v;
        }
        if let Some(v) = overrides.run_root {
            self.run_root = v;
        }
        if let Some(v) = overrides.log_level {
            self.log_level = v;
        }
        self.validate()
    }

    /// Every runtime handler with its defaults filled in.
    pub fn handler_specs(&self) -> Vec<HandlerSpec> {
        let systemd_cgroup = self.runtime.cgroup_driver == CgroupDriver::Systemd;
        let resolve =
            |(name, h): (&String, &HandlerConfig)| HandlerSpec { systemd_cgroup, ..h.resolve(name, &self.run_root) };
        self.runtime.handlers.iter().map(resolve).collect()
    }

    /// Where the image store keeps its content.
    pub fn image_root(&self) -> PathBuf {
        self.state_root.join("images")
    }
}

/// The operator's choice for tmpfs `noswap` (`runtime.tmpfs_noswap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoswapMode {
    /// Probe the kernel.
    Auto,
    /// Always add `noswap` (mounts fail on kernels without it).
    On,
    /// Never add it.
    Off,
}

#[cfg(test)]
mod tests;
