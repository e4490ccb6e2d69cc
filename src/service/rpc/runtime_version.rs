use crate::service::runtime_service::RuntimeService;

/// What `Version` answers.
pub struct VersionInfo {
    pub runtime_name: &'static str,
    pub runtime_version: &'static str,
    pub api_version: &'static str,
}

impl RuntimeService {
    pub fn version(&self) -> VersionInfo {
        VersionInfo { runtime_name: "swapcri", runtime_version: env!("CARGO_PKG_VERSION"), api_version: "v1" }
    }
}
