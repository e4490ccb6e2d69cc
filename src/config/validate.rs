//! What serde cannot check in a configuration: absolute paths, a known handler, sane
//! numbers, one section at a time.

use super::range::{fraction, positive, within, Invalid};
use super::{Config, ConfigError};

impl Config {
    /// Checks what serde cannot: absolute paths, known handler, sane numbers.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_paths()?;
        self.validate_runtime()?;
        self.validate_system()?;
        self.validate_network()?;
        self.validate_streaming()?;
        self.validate_images()?;
        self.validate_ranges().map_err(|(key, message)| ConfigError::Invalid { key: key.to_string(), message })
    }

    /// Every numeric setting against its range (config/range.rs), section by section.
    fn validate_ranges(&self) -> Result<(), Invalid> {
        let (r, s, i) = (&self.runtime, &self.streaming, &self.image);
        positive("runtime.max_log_line_bytes", r.max_log_line_bytes as u64)?;
        within("runtime.spare_monitors", r.spare_monitors as u64, 0..=16)?;
        if let Some(factor) = self.memory_qos.throttling_factor {
            fraction("memory_qos.throttling_factor", factor)?;
        }
        if let Some(bytes) = self.memory_qos.node_allocatable_bytes {
            positive("memory_qos.node_allocatable_bytes", bytes)?;
        }
        within("system.io_weight", self.system.io_weight, 1..=10_000)?;
        self.thrash.check()?;
        self.guard.check()?;
        self.offload.check()?;
        self.nri.check()?;
        self.checkpoint.check()?;
        positive("network.plugin_timeout_seconds", self.network.plugin_timeout_seconds)?;
        positive("streaming.token_ttl_seconds", s.token_ttl_seconds)?;
        positive("streaming.handshake_timeout_seconds", s.handshake_timeout_seconds)?;
        positive("streaming.max_connections", s.max_connections as u64)?;
        positive("streaming.max_frame_bytes", s.max_frame_bytes as u64)?;
        // One frame must fit; at most 4 GiB.
        within(
            "streaming.max_buffered_bytes",
            s.max_buffered_bytes as u64,
            s.max_frame_bytes as u64..=u32::MAX as u64,
        )?;
        positive("image.pull_progress_timeout_secs", i.pull_progress_timeout_secs)?;
        within("image.pull_min_rate_window_secs", i.pull_min_rate_window_secs, 1..=3600)?;
        positive("image.max_concurrent_downloads", i.max_concurrent_downloads as u64)?;
        positive("image.max_manifest_bytes", i.max_manifest_bytes)?;
        positive("image.max_config_bytes", i.max_config_bytes)?;
        positive("image.max_layers", i.max_layers as u64)?;
        positive("image.max_layer_unpacked_bytes", i.max_layer_unpacked_bytes)?;
        positive("image.max_image_unpacked_bytes", i.max_image_unpacked_bytes)
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

    fn validate_system(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
        if self.system.cgroup.is_empty() || self.system.cgroup.split('/').any(|p| p == "..") {
            return Err(invalid("system.cgroup", format!("{:?} is not a cgroup path", self.system.cgroup)));
        }
        for dev in &self.system.io_devices {
            let valid = dev.split_once(':').is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
            if !valid {
                return Err(invalid("system.io_devices", format!("{dev:?} is not MAJ:MIN")));
            }
        }
        Ok(())
    }

    fn validate_network(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
        if !self.network.config_dir.is_absolute() || self.network.plugin_dirs.iter().any(|d| !d.is_absolute()) {
            return Err(invalid("network", "config_dir and plugin_dirs must be absolute paths".into()));
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

    fn validate_streaming(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
        if self.streaming.address.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid("streaming.address", format!("{:?} is not IP:port", self.streaming.address)));
        }
        if self.streaming.tls_cert_file.as_os_str().is_empty() != self.streaming.tls_key_file.as_os_str().is_empty() {
            return Err(invalid("streaming.tls_cert_file", "tls_cert_file and tls_key_file go together".into()));
        }
        Ok(())
    }

    /// Registry keys and mirrors (the image limits are ranges).
    fn validate_images(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { key: key.to_string(), message };
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
