//! A pod's sysctls: only those a namespace of the pod's own isolates, so a pod that asks for
//! one the runtime would refuse (or one that would change the node) is refused before
//! anything is created.

use std::collections::HashMap;

use super::PolicyError;

/// The IPC namespace's sysctls (besides `fs.mqueue.*`).
const IPC: [&str; 8] = [
    "kernel.msgmax",
    "kernel.msgmnb",
    "kernel.msgmni",
    "kernel.sem",
    "kernel.shmall",
    "kernel.shmmax",
    "kernel.shmmni",
    "kernel.shm_rmid_forced",
];

pub fn check(sysctls: &HashMap<String, String>, host_network: bool, host_ipc: bool) -> Result<(), PolicyError> {
    let mut names: Vec<&String> = sysctls.keys().collect();
    names.sort();
    for name in names {
        let refuse = |why: &str| Err(PolicyError::Invalid(format!("sysctl {name:?}: {why}")));
        let plain = !name.is_empty() && name.split(['.', '/']).all(|p| !p.is_empty() && p != "..");
        if !plain {
            return refuse("not a sysctl name");
        }
        // The kernel's names use dots; a slash form (net/ipv4/...) is the same file.
        let dotted = name.replace('/', ".");
        if IPC.contains(&dotted.as_str()) || dotted.starts_with("fs.mqueue.") {
            if host_ipc {
                return refuse("the pod shares the host's IPC namespace");
            }
        } else if dotted.starts_with("net.") {
            if host_network {
                return refuse("the pod is on the host's network namespace");
            }
        } else if dotted == "kernel.domainname" {
            if host_network {
                return refuse("the pod shares the host's UTS namespace");
            }
        } else if dotted == "kernel.hostname" {
            return refuse("set the pod's hostname instead");
        } else {
            return refuse("not isolated by a namespace of the pod's: it would change the node");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_sysctls_only() {
        let one = |name: &str| HashMap::from([(name.to_string(), "1".to_string())]);
        let cases = [
            ("net.ipv4.ip_unprivileged_port_start", false, false, None),
            ("net/ipv4/ip_forward", false, false, None),
            ("net.ipv4.ip_forward", true, false, Some("host's network")),
            ("kernel.shmmax", false, false, None),
            ("fs.mqueue.msg_max", false, true, Some("host's IPC")),
            ("kernel.sem", false, true, Some("host's IPC")),
            ("kernel.domainname", false, false, None),
            ("kernel.domainname", true, false, Some("UTS")),
            ("kernel.hostname", false, false, Some("hostname instead")),
            ("vm.swappiness", false, false, Some("change the node")),
            ("kernel.panic", false, false, Some("change the node")),
            ("net..ipv4", false, false, Some("not a sysctl name")),
            ("../../etc", false, false, Some("not a sysctl name")),
        ];
        for (name, host_network, host_ipc, want) in cases {
            match (check(&one(name), host_network, host_ipc), want) {
                (Ok(()), None) => {}
                (Err(e), Some(part)) => assert!(e.to_string().contains(part), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
