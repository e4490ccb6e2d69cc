//! The security step: seccomp, masked and read-only paths (none of them for a privileged
//! container).

use crate::cri;
use oci_spec::runtime::LinuxSeccomp;

use crate::policy::{seccomp, PolicyError};

pub struct Confinement {
    pub seccomp: Option<LinuxSeccomp>,
    pub masked_paths: Vec<String>,
    pub readonly_paths: Vec<String>,
}

pub fn with_security(
    security: &cri::LinuxContainerSecurityContext,
    cap_names: &[String],
    localhost_seccomp: Option<LinuxSeccomp>,
) -> Result<Confinement, PolicyError> {
    if security.privileged {
        return Ok(Confinement { seccomp: None, masked_paths: Vec::new(), readonly_paths: Vec::new() });
    }
    let or_default = |given: &[String], default: fn() -> Vec<String>| {
        if given.is_empty() {
            default()
        } else {
            given.to_vec()
        }
    };
    Ok(Confinement {
        seccomp: seccomp_profile(security.seccomp.as_ref(), cap_names, localhost_seccomp)?,
        masked_paths: or_default(&security.masked_paths, oci_spec::runtime::get_default_maskedpaths),
        readonly_paths: or_default(&security.readonly_paths, oci_spec::runtime::get_default_readonly_paths),
    })
}

fn seccomp_profile(
    profile: Option<&cri::SecurityProfile>,
    caps: &[String],
    localhost: Option<LinuxSeccomp>,
) -> Result<Option<LinuxSeccomp>, PolicyError> {
    let Some(profile) = profile else {
        return Ok(None);
    };
    match cri::security_profile::ProfileType::try_from(profile.profile_type) {
        Ok(cri::security_profile::ProfileType::RuntimeDefault) => Ok(Some(seccomp::runtime_default(caps))),
        Ok(cri::security_profile::ProfileType::Unconfined) => Ok(None),
        Ok(cri::security_profile::ProfileType::Localhost) => localhost
            .map(Some)
            .ok_or_else(|| PolicyError::Invalid(format!("seccomp profile {:?} was not loaded", profile.localhost_ref))),
        Err(_) => Err(PolicyError::Invalid(format!("unknown seccomp profile type {}", profile.profile_type))),
    }
}
