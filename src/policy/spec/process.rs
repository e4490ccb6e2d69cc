//! The process step: command, environment, working directory, user, capabilities,
//! oom_score_adj and AppArmor.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::cri;
use oci_spec::runtime::{Capability, LinuxCapabilities, Process, User};

use super::input::{ContainerInput, ImageDefaults};
use crate::policy::{caps, NodeFacts, PolicyError};

/// The OCI process, and the capability names it holds (the seccomp profile follows them).
pub fn with_process(
    input: &ContainerInput,
    security: &cri::LinuxContainerSecurityContext,
    resources: &cri::LinuxContainerResources,
    node: &NodeFacts,
    warnings: &mut Vec<String>,
) -> Result<(Process, Vec<String>), PolicyError> {
    let config = input.config;
    let mut process = Process::default();
    process.set_terminal(Some(config.tty));
    process.set_args(Some(command_line(config, input.image)?));
    process.set_env(Some(environment(config, input.image, &input.pod.hostname)));
    let cwd = [config.working_dir.as_str(), input.image.working_dir.as_str()]
        .into_iter()
        .find(|d| !d.is_empty())
        .unwrap_or("/");
    if !cwd.starts_with('/') {
        return Err(PolicyError::Invalid(format!("working directory {cwd:?} is not absolute")));
    }
    process.set_cwd(PathBuf::from(cwd));
    let mut user = User::default();
    user.set_uid(input.user.uid);
    user.set_gid(input.user.gid);
    user.set_additional_gids(Some(input.user.additional_gids.clone()));
    process.set_user(user);
    let cap_names = capabilities(&mut process, security, node)?;
    process.set_no_new_privileges(Some(security.no_new_privs));
    process.set_oom_score_adj(Some(oom_score_adj(resources.oom_score_adj, node, warnings)));
    apply_apparmor(&mut process, apparmor_request(security).as_ref(), security.privileged, node, warnings)?;
    Ok((process, cap_names))
}

/// Bounding, effective and permitted sets: the request's adds and drops over the default
/// set, never more than the daemon holds.
fn capabilities(
    process: &mut Process,
    security: &cri::LinuxContainerSecurityContext,
    node: &NodeFacts,
) -> Result<Vec<String>, PolicyError> {
    let (add, drop) = security
        .capabilities
        .as_ref()
        .map(|c| (c.add_capabilities.clone(), c.drop_capabilities.clone()))
        .unwrap_or_default();
    let names =
        caps::container_set(&add, &drop, security.privileged, &node.held_capabilities).map_err(PolicyError::Invalid)?;
    let set = names.iter().map(|c| capability(c)).collect::<Result<HashSet<_>, _>>()?;
    let mut capabilities = LinuxCapabilities::default();
    capabilities.set_bounding(Some(set.clone()));
    capabilities.set_effective(Some(set.clone()));
    capabilities.set_permitted(Some(set));
    capabilities.set_inheritable(None);
    capabilities.set_ambient(None);
    process.set_capabilities(Some(capabilities));
    Ok(names)
}

fn capability(name: &str) -> Result<Capability, PolicyError> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|_| PolicyError::Invalid(format!("unknown capability {name:?}")))
}

/// The request's value, raised to what the daemon may set (without CAP_SYS_RESOURCE it
/// cannot go below its own).
pub fn oom_score_adj(requested: i64, node: &NodeFacts, warnings: &mut Vec<String>) -> i32 {
    let requested = requested.clamp(-1000, 1000) as i32;
    if requested < node.min_oom_score_adj {
        warnings.push(format!(
            "oom_score_adj {requested} raised to {}: the daemon lacks CAP_SYS_RESOURCE",
            node.min_oom_score_adj
        ));
        return node.min_oom_score_adj;
    }
    requested
}

/// The AppArmor profile a container asks for: the structured field, else the deprecated
/// string (`runtime/default`, `unconfined`, `localhost/<name>`) older kubelets send.
#[allow(deprecated)] // the deprecated field is what this reads
pub fn apparmor_request(security: &cri::LinuxContainerSecurityContext) -> Option<cri::SecurityProfile> {
    use cri::security_profile::ProfileType;
    if let Some(profile) = &security.apparmor {
        return Some(profile.clone());
    }
    let (profile_type, localhost_ref) = match security.apparmor_profile.as_str() {
        "" => return None,
        "runtime/default" => (ProfileType::RuntimeDefault, String::new()),
        "unconfined" => (ProfileType::Unconfined, String::new()),
        other => (ProfileType::Localhost, other.to_string()),
    };
    Some(cri::SecurityProfile { profile_type: profile_type as i32, localhost_ref })
}

fn apply_apparmor(
    process: &mut Process,
    profile: Option<&cri::SecurityProfile>,
    privileged: bool,
    node: &NodeFacts,
    warnings: &mut Vec<String>,
) -> Result<(), PolicyError> {
    use cri::security_profile::ProfileType;
    let Some(profile) = profile else {
        return Ok(());
    };
    match ProfileType::try_from(profile.profile_type) {
        Ok(ProfileType::Unconfined) => Ok(()),
        Ok(ProfileType::Localhost) if node.apparmor_enabled => {
            let name = profile.localhost_ref.strip_prefix("localhost/").unwrap_or(&profile.localhost_ref);
            process.set_apparmor_profile(Some(name.to_string()));
            Ok(())
        }
        Ok(ProfileType::Localhost) => Err(PolicyError::Unsupported(format!(
            "AppArmor profile {:?} requested but AppArmor is not enabled on this node",
            profile.localhost_ref
        ))),
        Ok(ProfileType::RuntimeDefault) if privileged => Ok(()),
        Ok(ProfileType::RuntimeDefault) if node.apparmor_enabled => match &node.apparmor_default {
            Some(name) => {
                process.set_apparmor_profile(Some(name.clone()));
                Ok(())
            }
            None => Err(PolicyError::Unsupported(
                "AppArmor RuntimeDefault: the default profile is not loaded (apparmor_parser missing or failed at start, see the daemon's log); use a Localhost profile or Unconfined".into(),
            )),
        },
        Ok(ProfileType::RuntimeDefault) => {
            warnings.push(
                "AppArmor RuntimeDefault requested: AppArmor is not enabled on this node, nothing applied".into(),
            );
            Ok(())
        }
        Err(_) => Err(PolicyError::Invalid(format!("unknown AppArmor profile type {}", profile.profile_type))),
    }
}

/// Kubernetes' rules: `command` replaces the entrypoint, `args` the image's cmd.
pub fn command_line(config: &cri::ContainerConfig, image: &ImageDefaults) -> Result<Vec<String>, PolicyError> {
    let line: Vec<String> = if !config.command.is_empty() {
        config.command.iter().chain(&config.args).cloned().collect()
    } else {
        let args = if config.args.is_empty() { &image.cmd } else { &config.args };
        image.entrypoint.iter().chain(args).cloned().collect()
    };
    if line.is_empty() {
        return Err(PolicyError::Invalid("no command: neither the request nor the image gives one".into()));
    }
    Ok(line)
}

/// Image env first, the request's values override by name.
pub fn environment(config: &cri::ContainerConfig, image: &ImageDefaults, hostname: &str) -> Vec<String> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: &str| match env.iter_mut().find(|(key, _)| key == k) {
        Some(entry) => entry.1 = v.to_string(),
        None => env.push((k.to_string(), v.to_string())),
    };
    set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    set("HOSTNAME", hostname);
    for e in &image.env {
        let (k, v) = e.split_once('=').unwrap_or((e, ""));
        set(k, v);
    }
    for kv in &config.envs {
        set(&kv.key, &kv.value);
    }
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}
