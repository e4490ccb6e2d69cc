//! User namespaces over the socket with real runc: Debian's runc (no id-mapped mounts) and
//! runc 1.4.3 side by side. Each handler's report follows what it and the node can do; a
//! handler that can runs a pod in its own user namespace (mapped ids, the image's files
//! owned by the container's root, id-mapped volumes and image volumes, the host's network),
//! one that cannot refuses it; malformed requests are refused by both and create nothing.

mod common;

use std::os::unix::fs::MetadataExt;

use common::pods::*;
use common::{newer_runc, require_root, Daemon};
use swapcri::cri;

const BASE: u32 = 300_000;
const LENGTH: u32 = 65536;
const FOREVER: [&str; 3] = ["sh", "-c", "while true; do sleep 1; done"];

fn mapping(container_id: u32, host_id: u32, length: u32) -> cri::IdMapping {
    cri::IdMapping { container_id, host_id, length }
}

fn userns(mode: cri::NamespaceMode, uids: Vec<cri::IdMapping>, gids: Vec<cri::IdMapping>) -> cri::UserNamespace {
    cri::UserNamespace { mode: mode as i32, uids, gids }
}

fn pod_userns() -> cri::UserNamespace {
    userns(cri::NamespaceMode::Pod, vec![mapping(0, BASE, LENGTH)], vec![mapping(0, BASE, LENGTH)])
}

fn options(config: &mut cri::PodSandboxConfig) -> &mut cri::NamespaceOption {
    config
        .linux
        .get_or_insert_with(Default::default)
        .security_context
        .get_or_insert_with(Default::default)
        .namespace_options
        .get_or_insert_with(Default::default)
}

fn container_options(config: &mut cri::ContainerConfig) -> &mut cri::NamespaceOption {
    config
        .linux
        .get_or_insert_with(Default::default)
        .security_context
        .get_or_insert_with(Default::default)
        .namespace_options
        .get_or_insert_with(Default::default)
}

fn stdout(r: &cri::ExecSyncResponse) -> String {
    String::from_utf8_lossy(&r.stdout).trim().to_string()
}

async fn sh(daemon: &Daemon, id: &str, script: &str) -> String {
    let r = exec(daemon, id, &["sh", "-c", script], 20).await.unwrap();
    assert_eq!(r.exit_code, 0, "{script}: {}", String::from_utf8_lossy(&r.stderr));
    stdout(&r)
}

async fn run_pod(daemon: &Daemon, config: &cri::PodSandboxConfig, handler: &str) -> Result<String, tonic::Status> {
    let mut rt = daemon.runtime().await;
    let request = cri::RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: handler.into() };
    Ok(rt.run_pod_sandbox(request).await?.into_inner().pod_sandbox_id)
}

/// (name, user_namespaces) per handler, and the node's verdict from the verbose status.
async fn reports(daemon: &Daemon) -> (Vec<(String, bool)>, bool, bool) {
    let status = daemon.runtime().await.status(cri::StatusRequest { verbose: true }).await.unwrap().into_inner();
    let info: serde_json::Value = serde_json::from_str(&status.info["info"]).unwrap();
    let node = info["node"]["userns"]["supported"].as_bool().unwrap();
    let handlers =
        status.runtime_handlers.iter().map(|h| (h.name.clone(), h.features.unwrap().user_namespaces)).collect();
    (handlers, node, status.features.unwrap().user_namespaces_host_network)
}

#[tokio::test(flavor = "multi_thread")]
async fn user_namespaces_follow_the_handler_and_the_node() {
    require_root();
    let daemon = Daemon::start(&format!("[runtime.handlers.runc-new]\nbinary = \"{}\"\n", newer_runc().display()));
    import_busybox(&daemon);
    let (handlers, node_supports, host_network) = reports(&daemon).await;
    let supports = |name: &str| handlers.iter().find(|(n, _)| n == name).unwrap().1;
    assert!(!supports("runc"), "Debian's runc 1.1.5 has no id-mapped mounts");
    assert!(!supports(""), "the default handler is Debian's runc");
    assert_eq!(supports("runc-new"), node_supports, "runc 1.4.3 maps mounts: the node decides");
    assert_eq!(host_network, node_supports);

    let logs = daemon.dir.path().join("logs");
    let mut config = sandbox_config("userns", &logs);
    options(&mut config).userns_options = Some(pod_userns());
    let err = run_pod(&daemon, &config, "runc").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    if !node_supports {
        let err = run_pod(&daemon, &config, "runc-new").await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
        return;
    }

    let pod = run_pod(&daemon, &config, "runc-new").await.expect("a pod in its own user namespace");
    let volume = daemon.dir.path().join("volume");
    std::fs::create_dir_all(&volume).unwrap();
    std::fs::write(volume.join("file"), "data").unwrap();
    let mut c = container_config("inside", &FOREVER);
    container_options(&mut c).userns_options = Some(pod_userns());
    c.mounts = vec![
        cri::Mount {
            container_path: "/mapped".into(),
            host_path: volume.display().to_string(),
            uid_mappings: vec![mapping(0, BASE, LENGTH)],
            gid_mappings: vec![mapping(0, BASE, LENGTH)],
            ..Default::default()
        },
        cri::Mount { container_path: "/plain".into(), host_path: volume.display().to_string(), ..Default::default() },
        cri::Mount {
            container_path: "/image".into(),
            image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
            readonly: true,
            uid_mappings: vec![mapping(0, BASE, LENGTH)],
            gid_mappings: vec![mapping(0, BASE, LENGTH)],
            ..Default::default()
        },
    ];
    let id = start(&daemon, &pod, &config, c).await;

    let uid_map: Vec<String> =
        sh(&daemon, &id, "cat /proc/self/uid_map").await.split_whitespace().map(String::from).collect();
    assert_eq!(uid_map, ["0", &BASE.to_string(), &LENGTH.to_string()]);
    assert_eq!(sh(&daemon, &id, "id -u").await, "0");
    assert_eq!(sh(&daemon, &id, "stat -c '%u %g' /etc/passwd /").await, "0 0\n0 0", "the image's files are root's");
    sh(&daemon, &id, "touch /new-in-root && touch /dev/shm/x && echo 127.0.0.2 extra >> /etc/hosts").await;
    assert_eq!(sh(&daemon, &id, "stat -c '%u' /mapped/file; echo x > /mapped/made").await, "0");
    assert_eq!(std::fs::metadata(volume.join("made")).unwrap().uid(), 0, "written as the host's root through the map");
    assert_eq!(sh(&daemon, &id, "stat -c '%u' /plain/file").await, "65534", "unmapped: the overflow id");
    let denied = exec(&daemon, &id, &["sh", "-c", "echo y > /plain/other"], 20).await.unwrap();
    assert_ne!(denied.exit_code, 0, "the container's root is not the host's");
    assert!(sh(&daemon, &id, "mount").await.contains(" /sys type sysfs"), "a sysfs of its own");
    assert_eq!(sh(&daemon, &id, "stat -c '%u %g' /image/etc/passwd").await, "0 0", "an image volume is mapped too");

    // On the host the container runs as the pod's range.
    let pid = status_pid(&daemon, &id).await;
    assert_eq!(std::fs::metadata(format!("/proc/{pid}")).unwrap().uid(), BASE);

    // The host's network: the host's /sys, still the pod's ids.
    if host_network {
        let mut host = sandbox_config("userns-host", &logs);
        options(&mut host).userns_options = Some(pod_userns());
        options(&mut host).network = cri::NamespaceMode::Node as i32;
        let hpod = run_pod(&daemon, &host, "runc-new").await.expect("host network pod");
        let mut c = container_config("host-net", &FOREVER);
        container_options(&mut c).network = cri::NamespaceMode::Node as i32;
        let hid = start(&daemon, &hpod, &host, c).await;
        assert_eq!(sh(&daemon, &hid, "id -u").await, "0");
        assert!(sh(&daemon, &hid, "ls /sys/class/net").await.contains("lo"));
    }

    // A container may not ask for another user namespace than its pod's.
    let mut other = container_config("other", &FOREVER);
    container_options(&mut other).userns_options =
        Some(userns(cri::NamespaceMode::Pod, vec![mapping(0, BASE * 2, LENGTH)], vec![mapping(0, BASE * 2, LENGTH)]));
    let err = daemon
        .runtime()
        .await
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(other),
            sandbox_config: Some(config.clone()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");

    // Removing the pods leaves no mount behind (layers, namespaces, shm).
    let mut rt = daemon.runtime().await;
    let pods = rt.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await.unwrap().into_inner().items;
    for p in pods {
        rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: p.id.clone() }).await.unwrap();
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: p.id }).await.unwrap();
    }
    assert_eq!(mounts_under(daemon.dir.path()), Vec::<String>::new());
}

async fn status_pid(daemon: &Daemon, id: &str) -> u32 {
    let mut rt = daemon.runtime().await;
    let r = rt.container_status(cri::ContainerStatusRequest { container_id: id.into(), verbose: true }).await.unwrap();
    let info: serde_json::Value = serde_json::from_str(&r.into_inner().info["info"]).unwrap();
    info["pid"].as_u64().unwrap() as u32
}

/// The CRI's refusals, the same whatever the handler: nothing is created.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_user_namespaces_are_refused() {
    require_root();
    let daemon = Daemon::start(&format!("[runtime.handlers.runc-new]\nbinary = \"{}\"\n", newer_runc().display()));
    use cri::NamespaceMode::*;
    let one = || vec![mapping(0, BASE, LENGTH)];
    let cases = [
        ("two-mappings", userns(Pod, vec![mapping(0, BASE, LENGTH), mapping(0, BASE * 2, LENGTH)], one()), Pod),
        ("root-unmapped", userns(Pod, vec![mapping(1, BASE, LENGTH)], one()), Pod),
        ("container-mode", userns(Container, vec![], vec![]), Pod),
        ("target-mode", userns(Target, vec![], vec![]), Pod),
        ("node-with-mappings", userns(Node, one(), one()), Pod),
        ("host-ipc", pod_userns(), Node),
    ];
    for (name, request, ipc) in cases {
        let mut config = sandbox_config(name, &daemon.dir.path().join("logs"));
        options(&mut config).userns_options = Some(request);
        options(&mut config).ipc = ipc as i32;
        for handler in ["runc", "runc-new"] {
            let err = run_pod(&daemon, &config, handler).await.unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{name} on {handler}: {err:?}");
        }
    }
    let mut rt = daemon.runtime().await;
    let pods = rt.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await.unwrap().into_inner().items;
    assert!(pods.is_empty(), "{pods:?}");
    assert_eq!(mounts_under(daemon.dir.path()), Vec::<String>::new());
}
