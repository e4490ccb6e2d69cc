//! `[nri]`: the Node Resource Interface, through which plugins see pod and container
//! lifecycle events and adjust containers (see nri::).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::range::{within, Invalid};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NriConfig {
    /// Serve NRI (on by default, as containerd 2.x and CRI-O do): listen on `socket_path`
    /// and start the pre-installed plugins. With no plugin connected it costs nothing
    /// measurable (docs/nri.md).
    pub enable: bool,
    /// The socket external plugins connect to (created 0600, root's).
    pub socket_path: PathBuf,
    /// Pre-installed plugins: executables named `<index>-<name>`, started at start-up.
    pub plugin_path: PathBuf,
    /// Their configuration: `<index>-<name>.conf` or `<name>.conf`, handed over as is.
    pub plugin_config_path: PathBuf,
    /// Only pre-installed plugins: no socket for external ones.
    pub disable_connections: bool,
    /// Where CDI specs are read, for the CDI devices plugins ask for.
    pub cdi_spec_dirs: Vec<String>,
    /// How long a plugin may take from connecting to the end of its synchronisation.
    pub registration_timeout_ms: u64,
    /// How long a plugin may take to answer one event; one that does not is disconnected.
    pub request_timeout_ms: u64,
    /// Let a plugin raise `memory.swap.max` above the value the swap policy decided.
    pub allow_swap_raise: bool,
    /// Let a plugin give swap to containers the policy keeps off swap (Guaranteed, critical,
    /// NoSwap).
    pub allow_swap_for_protected: bool,
}

impl Default for NriConfig {
    fn default() -> Self {
        NriConfig {
            enable: true,
            socket_path: PathBuf::from("/var/run/nri/nri.sock"),
            plugin_path: PathBuf::from("/opt/nri/plugins"),
            plugin_config_path: PathBuf::from("/etc/nri/conf.d"),
            disable_connections: false,
            cdi_spec_dirs: vec!["/etc/cdi".into(), "/var/run/cdi".into()],
            registration_timeout_ms: 5000,
            request_timeout_ms: 2000,
            allow_swap_raise: false,
            allow_swap_for_protected: false,
        }
    }
}

impl NriConfig {
    /// The first value out of its range.
    pub fn check(&self) -> Result<(), Invalid> {
        within("nri.registration_timeout_ms", self.registration_timeout_ms, 100..=600_000)?;
        within("nri.request_timeout_ms", self.request_timeout_ms, 10..=600_000)?;
        if self.enable && !self.disable_connections && !self.socket_path.is_absolute() {
            return Err(("nri.socket_path", format!("{} is not an absolute path", self.socket_path.display())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_out_of_range_name_their_key() {
        let with = |f: fn(&mut NriConfig)| crate::config::range::refused(NriConfig::check, f);
        assert_eq!(with(|_| {}), None);
        assert_eq!(with(|c| c.registration_timeout_ms = 10), Some("nri.registration_timeout_ms"));
        assert_eq!(with(|c| c.request_timeout_ms = 0), Some("nri.request_timeout_ms"));
        assert_eq!(
            with(|c| {
                c.enable = true;
                c.socket_path = "nri.sock".into()
            }),
            Some("nri.socket_path")
        );
        let parsed: NriConfig = toml::from_str("enable = true\nrequest_timeout_ms = 500").unwrap();
        assert!(parsed.enable);
        assert_eq!(parsed.request_timeout_ms, 500);
        assert!(toml::from_str::<NriConfig>("enabled = true").is_err());
    }
}
