//! Runtime handlers by configuration alone: Debian's runc (the built-in handler) and runc
//! 1.4.3 (built from `hack/runc` by hack/tools.sh) side by side, each creating, starting, exec'ing and
//! stopping containers; each reports its own probed features; a broken handler's failures
//! name it. (crun refuses this host's hybrid cgroups: the VM e2e covers it.)

mod common;

use std::time::Duration;

use common::pods::*;
use common::{newer_runc, require_root, Daemon};
use swapcri::cri;

async fn run_pod(daemon: &Daemon, name: &str, handler: &str) -> Result<(String, cri::PodSandboxConfig), tonic::Status> {
    let config = sandbox_config(name, &daemon.dir.path().join("logs").join(name));
    let mut rt = daemon.runtime().await;
    let request = cri::RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: handler.into() };
    Ok((rt.run_pod_sandbox(request).await?.into_inner().pod_sandbox_id, config))
}

#[tokio::test(flavor = "multi_thread")]
async fn each_handler_runs_its_own_containers() {
    require_root();
    let runc_new = newer_runc();
    let daemon = Daemon::start(&format!(
        "[runtime.handlers.runc-new]\nbinary = \"{}\"\n[runtime.handlers.broken]\nbinary = \"/nonexistent/crun\"\n",
        runc_new.display()
    ));
    import_busybox(&daemon);
    let mut rt = daemon.runtime().await;

    // The built-in handler stays; each handler's features come from its own binary.
    let status = rt.status(cri::StatusRequest { verbose: true }).await.unwrap().into_inner();
    let info: serde_json::Value = serde_json::from_str(&status.info["info"]).unwrap();
    let handler = |name: &str| info["handlers"].as_array().unwrap().iter().find(|h| h["name"] == name).unwrap().clone();
    let (old, new, broken) = (handler("runc"), handler("runc-new"), handler("broken"));
    assert_eq!(old["binary"], "/usr/sbin/runc");
    assert!(new["features"]["version"].as_str().unwrap().contains("1.4.3"), "{new}");
    assert_eq!(new["features"]["probedBy"], "features");
    assert_eq!(new["features"]["idmapMounts"], true, "runc 1.4.3 says it has id-mapped mounts: {new}");
    assert_eq!(old["features"]["idmapMounts"], false, "runc 1.1 has none: {old}");
    assert_eq!((broken["engine"].as_str(), broken["features"]["usable"].as_bool()), (Some("crun"), Some(false)));
    assert_eq!(status.runtime_handlers.iter().filter(|h| !h.name.is_empty()).count(), 2, "usable: runc, runc-new");

    for name in ["runc", "runc-new"] {
        let (pod, pod_config) = run_pod(&daemon, &format!("pod-{name}"), name).await.unwrap();
        let id = start(&daemon, &pod, &pod_config, container_config("app", &["sleep", "1000"])).await;
        // The handler's runtime holds the container in its own state directory.
        let state_dir = daemon.dir.path().join("run").join(name).join(&id);
        assert!(state_dir.is_dir(), "{name}: {} missing", state_dir.display());
        let out = exec(&daemon, &id, &["sh", "-c", "echo hi from $0", name], 10).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("hi from {name}\n"));
        let err = exec(&daemon, &id, &["sh", "-c", "sleep 30 & sleep 30"], 1).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{name}");
        rt.stop_container(cri::StopContainerRequest { container_id: id.clone(), timeout: 2 }).await.unwrap();
        let exited = wait_exited(&daemon, &id, Duration::from_secs(20)).await;
        // `sleep` is the container's PID 1 with no SIGTERM handler: SIGTERM does nothing, the
        // SIGKILL after the 2 s timeout ends it.
        assert_eq!(exited.exit_code, 137, "{name}");
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
        assert!(!state_dir.exists(), "{name}: the runtime's state is gone with the container");
    }

    // A handler whose binary is missing: its failure names it.
    let (pod, pod_config) = run_pod(&daemon, "pod-broken", "broken").await.unwrap();
    let err = rt
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(container_config("app", &["true"])),
            sandbox_config: Some(pod_config),
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("runtime handler broken"), "{}", err.message());
    assert!(!err.message().contains("runc create"), "{}", err.message());
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    let unknown = run_pod(&daemon, "pod-unknown", "kata").await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::InvalidArgument);
}
