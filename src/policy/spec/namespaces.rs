//! The namespaces step: a mount namespace of its own, the pod's network, IPC and UTS, the
//! PID namespace the request asks for, the pod's user namespace when it has one, and a
//! cgroup namespace on cgroup v2.

use std::path::Path;

use crate::cri;
use oci_spec::runtime::{LinuxNamespace, LinuxNamespaceType};

use super::input::ContainerInput;
use crate::policy::{NodeFacts, PolicyError};

fn namespace(typ: LinuxNamespaceType, path: Option<&Path>) -> LinuxNamespace {
    let mut ns = LinuxNamespace::default();
    ns.set_typ(typ);
    ns.set_path(path.map(Path::to_path_buf));
    ns
}

pub fn with_namespaces(
    input: &ContainerInput,
    security: &cri::LinuxContainerSecurityContext,
    node: &NodeFacts,
) -> Result<Vec<LinuxNamespace>, PolicyError> {
    let options = security.namespace_options.clone().unwrap_or_default();
    crate::policy::userns::check_container(
        input.pod.userns.as_ref().map(|(_, map)| map),
        options.userns_options.as_ref(),
    )?;
    let mut namespaces = vec![namespace(LinuxNamespaceType::Mount, None)];
    if let Some((path, _)) = &input.pod.userns {
        namespaces.push(namespace(LinuxNamespaceType::User, Some(path)));
    }
    match cri::NamespaceMode::try_from(options.pid) {
        Ok(cri::NamespaceMode::Pod) => match &input.pod.pid_ns {
            Some(path) => namespaces.push(namespace(LinuxNamespaceType::Pid, Some(path))),
            None => return Err(PolicyError::Unsupported("the pod has no shared PID namespace".into())),
        },
        Ok(cri::NamespaceMode::Node) => {}
        Ok(cri::NamespaceMode::Target) => match &input.target_pid_ns {
            Some(path) => namespaces.push(namespace(LinuxNamespaceType::Pid, Some(path))),
            None => {
                return Err(PolicyError::Invalid(format!("target container {:?} is not running", options.target_id)))
            }
        },
        Ok(cri::NamespaceMode::Container) => namespaces.push(namespace(LinuxNamespaceType::Pid, None)),
        Err(_) => return Err(PolicyError::Invalid(format!("unknown pid namespace mode {}", options.pid))),
    }
    for (typ, path) in [
        (LinuxNamespaceType::Network, &input.pod.net_ns),
        (LinuxNamespaceType::Ipc, &input.pod.ipc_ns),
        (LinuxNamespaceType::Uts, &input.pod.uts_ns),
    ] {
        if let Some(p) = path {
            namespaces.push(namespace(typ, Some(p)));
        }
    }
    if node.cgroup_v2() {
        namespaces.push(namespace(LinuxNamespaceType::Cgroup, None));
    }
    Ok(namespaces)
}
