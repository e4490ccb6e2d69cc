//! What serde cannot check in a configuration: absolute paths, a known handler, sane
//! numbers, one section at a time.

use super::range::within;
use super::{Config, ConfigError};

impl Config {
    /// Checks what serde cannot: absolute paths, known handler, sane numbers.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_paths()?;
        self.validate_runtime()?;
        self.validate_memory_and_system()?;
        self.validate_network_and_streaming()?;
        self.validate_images()
    }

    fn validate_paths(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
        for (key, path) in [
            ("socket", &self.socket),
            ("state_root", &self.state_root),
            ("run_root", &self.run_root),
            ("cgroup_root", &self.cgroup_root),
        ] {
            if !path.is_absolute() {
                return Err(invalid(key, format!("{} is not an absolute path", path.display())));
            }
        }
        tracing_subscriber::EnvFilter::try_new(&self.log_level)
            .map_err(|e| invalid("log_level", format!("{:?}: {e}", self.log_level)))?;
        Ok(())
    }

    fn validate_runtime(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
        if !self.runtime.handlers.contains_key(&self.runtime.default_handler) {
            return Err(invalid(
                "runtime.default_handler",
                format!("{:?} is not one of runtime.handlers", self.runtime.default_handler),
            ));
        }
        for (name, handler) in &self.runtime.handlers {
            if name.is_empty() {
                return Err(invalid("runtime.handlers", "a handler name is empty".into()));
            }
            for (field, path) in [("binary", &handler.binary), ("root", &handler.root)] {
                if !path.as_os_str().is_empty() && !path.is_absolute() {
                    return Err(invalid(
                        &format!("runtime.handlers.{name}.{field}"),
                        format!("{} is not an absolute path", path.display()),
                    ));
                }
            }
        }
        if self.runtime.max_log_line_bytes == 0 {
            return Err(invalid("runtime.max_log_line_bytes", "must be at least 1".into()));
        }
        if !self.runtime.default_cgroup_parent.starts_with('/') {
            return Err(invalid("runtime.default_cgroup_parent", "must start with /".into()));
        }
        for (key, slice) in [
            ("runtime.parent_slice", &self.runtime.parent_slice),
            ("runtime.monitor_slice", &self.runtime.monitor_slice),
        ] {
            if let Err(e) = crate::model::cgroup_layout::check_slice(slice) {
                return Err(invalid(key, e.to_string()));
            }
        }
        Ok(())
    }

    fn validate_memory_and_system(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
        if let Some(factor) = self.memory_qos.throttling_factor {
            if !(factor > 0.0 && factor <= 1.0) {
                return Err(invalid("memory_qos.throttling_factor", format!("{factor} is not in (0, 1]")));
            }
        }
        if self.memory_qos.node_allocatable_bytes == Some(0) {
            return Err(invalid("memory_qos.node_allocatable_bytes", "must be above 0".into()));
        }
        if self.system.cgroup.is_empty() || self.system.cgroup.split('/').any(|p| p == "..") {
            return Err(invalid("system.cgroup", format!("{:?} is not a cgroup path", self.system.cgroup)));
        }
        if let Err((key, message)) = within("system.io_weight", self.system.io_weight, 1..=10_000)
            .and_then(|_| self.thrash.check())
            .and_then(|_| self.guard.check())
            .and_then(|_| self.offload.check())
            .and_then(|_| self.nri.check())
        {
            return Err(invalid(key, message));
        }
        for dev in &self.system.io_devices {
            let valid = dev.split_once(':').is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
            if !valid {
                return Err(invalid("system.io_devices", format!("{dev:?} is not MAJ:MIN")));
            }
        }
        Ok(())
    }

    fn validate_network_and_streaming(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
        if !self.network.config_dir.is_absolute() || self.network.plugin_dirs.iter().any(|d| !d.is_absolute()) {
            return Err(invalid("network", "config_dir and plugin_dirs must be absolute paths".into()));
        }
        if self.streaming.address.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid("streaming.address", format!("{:?} is not IP:port", self.streaming.address)));
        }
        if self.streaming.tls_cert_file.as_os_str().is_empty() != self.streaming.tls_key_file.as_os_str().is_empty() {
            return Err(invalid("streaming.tls_cert_file", "tls_cert_file and tls_key_file go together".into()));
        }
        if self.streaming.token_ttl_seconds == 0 {
            return Err(invalid("streaming.token_ttl_seconds", "must be at least 1".into()));
        }
        if self.network.plugin_timeout_seconds == 0 {
            return Err(invalid("network.plugin_timeout_seconds", "must be at least 1".into()));
        }
        let ifname = &self.network.interface;
        if ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', ' ', ':']) {
            return Err(invalid("network.interface", format!("{ifname:?} is not an interface name")));
        }
        if !self.metrics.address.is_empty() && self.metrics.address.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid(
                "metrics.address",
                format!("{:?} is not host:port (an IP address and a port)", self.metrics.address),
            ));
        }
        Ok(())
    }

    fn validate_images(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
        let s = &self.streaming;
        for (key, value) in [
            ("streaming.handshake_timeout_seconds", s.handshake_timeout_seconds),
            ("streaming.max_connections", s.max_connections as u64),
            ("streaming.max_frame_bytes", s.max_frame_bytes as u64),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1".into()));
            }
        }
        if s.max_buffered_bytes < s.max_frame_bytes || s.max_buffered_bytes > u32::MAX as usize {
            return Err(invalid(
                "streaming.max_buffered_bytes",
                "must hold one frame (at least streaming.max_frame_bytes) and be under 4 GiB".into(),
            ));
        }
        if self.image.pull_progress_timeout_secs == 0 {
            return Err(invalid("image.pull_progress_timeout_secs", "must be at least 1".into()));
        }
        if !(1..=3600).contains(&self.image.pull_min_rate_window_secs) {
            return Err(invalid("image.pull_min_rate_window_secs", "must be between 1 and 3600".into()));
        }
        if self.image.max_concurrent_downloads == 0 {
            return Err(invalid("image.max_concurrent_downloads", "must be at least 1".into()));
        }
        for (key, value) in [
            ("image.max_manifest_bytes", self.image.max_manifest_bytes),
            ("image.max_config_bytes", self.image.max_config_bytes),
            ("image.max_layers", self.image.max_layers as u64),
            ("image.max_layer_unpacked_bytes", self.image.max_layer_unpacked_bytes),
            ("image.max_image_unpacked_bytes", self.image.max_image_unpacked_bytes),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1".into()));
            }
        }
        for (host, registry) in &self.registries {
            if host.is_empty() || host.contains('/') {
                return Err(invalid(
                    &format!("registries.{host:?}"),
                    "a registry key is host[:port], without scheme or path".into(),
                ));
            }
            for mirror in &registry.mirrors {
                if mirror.is_empty() || mirror.contains('/') {
                    return Err(invalid(
                        &format!("registries.{host:?}.mirrors"),
                        format!("{mirror:?} is not host[:port]"),
                    ));
                }
            }
        }
        Ok(())
    }
}
