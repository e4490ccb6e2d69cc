//! Faults of what swapcri drives on the node: an OCI runtime that is missing, then failing,
//! then repaired; a CNI plugin that hangs past its timeout. Each is a clear error, leaves
//! nothing behind, and the same request succeeds once the fault is gone — without a restart.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

fn write_script(path: &Path, body: &str) {
    // Written aside and renamed in: an exec never sees a half-written script.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn entries(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(list) => list.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    }
}

async fn create(daemon: &Daemon, pod: &str, pod_config: &cri::PodSandboxConfig) -> Result<String, tonic::Status> {
    let request = cri::CreateContainerRequest {
        pod_sandbox_id: pod.into(),
        config: Some(container_config("app", &["sleep", "1000"])),
        sandbox_config: Some(pod_config.clone()),
    };
    daemon.runtime().await.create_container(request).await.map(|r| r.into_inner().container_id)
}

async fn runtime_ready(daemon: &Daemon) -> cri::RuntimeCondition {
    let status = daemon.runtime().await.status(cri::StatusRequest { verbose: false }).await.unwrap().into_inner();
    status.status.unwrap().conditions.into_iter().find(|c| c.r#type == "RuntimeReady").unwrap()
}

/// What a failed CreateContainer must not leave: a record, a run directory, a mount, a
/// container in the runtime's state.
async fn assert_no_container_left(daemon: &Daemon, runtime_root: &Path, pod_run_dir: &Path) {
    let listed = daemon.runtime().await.list_containers(cri::ListContainersRequest::default()).await.unwrap();
    assert!(listed.into_inner().containers.is_empty());
    assert!(entries(&daemon.state_root().join("containers")).is_empty());
    assert!(entries(&daemon.dir.path().join("run/containers")).is_empty());
    assert!(entries(runtime_root).is_empty(), "runtime state: {:?}", entries(runtime_root));
    let mounts: Vec<String> =
        mounts_under(daemon.dir.path()).into_iter().filter(|m| !Path::new(m).starts_with(pod_run_dir)).collect();
    assert!(mounts.is_empty(), "{mounts:?}");
}

/// runc, except that `create` fails the way runc reports a failure: a JSON line in the file
/// given with `--log`, exit status 1.
const FAILING_RUNC: &str = r#"#!/bin/sh
log=/dev/null; prev=
for arg in "$@"; do [ "$prev" = --log ] && log=$arg; prev=$arg; done
case " $* " in *" create "*)
  echo '{"level":"error","msg":"injected fault: create refused","time":"2026-01-01T00:00:00Z"}' >> "$log"
  exit 1 ;;
esac
exec /usr/sbin/runc "$@"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_missing_then_failing_is_a_clear_error_and_works_once_repaired() {
    require_root();
    let bin = tempfile::tempdir().unwrap();
    let wrapper = bin.path().join("runc");
    let runtime_root = bin.path().join("state");
    let daemon = Daemon::start(&format!(
        "[runtime]\ndefault_handler = \"wrapped\"\n[runtime.handlers.wrapped]\nbinary = \"{}\"\nroot = \"{}\"\n",
        wrapper.display(),
        runtime_root.display()
    ));
    import_busybox(&daemon);

    // Missing: the node is not ready, and a create says which handler and binary.
    let ready = runtime_ready(&daemon).await;
    assert!(!ready.status && ready.message.contains("wrapped"), "{ready:?}");
    let pod_config = sandbox_config("faults", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let pod_run_dir = daemon.dir.path().join("run/sandboxes").join(&pod);
    let err = create(&daemon, &pod, &pod_config).await.unwrap_err();
    assert!(err.message().contains("runtime handler wrapped"), "{}", err.message());
    assert!(err.message().contains(&wrapper.display().to_string()), "{}", err.message());
    assert_no_container_left(&daemon, &runtime_root, &pod_run_dir).await;

    // Installed but failing every create: ready again, and the runtime's own words come back.
    write_script(&wrapper, FAILING_RUNC);
    let ready = runtime_ready(&daemon).await;
    assert!(ready.status, "a runtime installed after start-up is probed again: {ready:?}");
    let err = create(&daemon, &pod, &pod_config).await.unwrap_err();
    assert!(err.message().contains("injected fault: create refused"), "{}", err.message());
    assert_no_container_left(&daemon, &runtime_root, &pod_run_dir).await;

    // Repaired: the same request succeeds.
    write_script(&wrapper, "#!/bin/sh\nexec /usr/sbin/runc \"$@\"\n");
    let id = create(&daemon, &pod, &pod_config).await.expect("the retry succeeds");
    daemon.runtime().await.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.unwrap();
    assert_eq!(exec(&daemon, &id, &["echo", "ok"], 10).await.unwrap().stdout, b"ok\n");
    daemon.runtime().await.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    assert_no_container_left(&daemon, &runtime_root, &pod_run_dir).await;
    assert!(mounts_under(daemon.dir.path()).is_empty());
}

/// A CNI plugin after loopback in the chain: hangs on ADD while `hang` exists in its
/// directory (leaving a child of its own), else answers with an empty result.
const HANGING_PLUGIN: &str = r#"#!/bin/sh
cat > /dev/null
case "$CNI_COMMAND" in
  ADD) if [ -e DIR/hang ]; then sleep 600 & echo $! > DIR/sleeper; wait; fi
       echo '{"cniVersion":"1.0.0"}' ;;
  VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
esac
exit 0
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_cni_plugin_hanging_past_its_timeout_fails_the_pod_cleanly_and_the_retry_succeeds() {
    require_root();
    let plugins = tempfile::tempdir().unwrap();
    let dir = plugins.path();
    write_script(&dir.join("hang-plugin"), &HANGING_PLUGIN.replace("DIR", &dir.display().to_string()));
    std::fs::write(dir.join("hang"), "").unwrap();
    let net_d = dir.join("net.d");
    std::fs::create_dir(&net_d).unwrap();
    std::fs::write(
        net_d.join("10-hang.conflist"),
        r#"{"cniVersion": "1.0.0", "name": "hang", "plugins": [{"type": "loopback"}, {"type": "hang-plugin"}]}"#,
    )
    .unwrap();
    let daemon = Daemon::start(&format!(
        "[network]\nconfig_dir = \"{}\"\nplugin_dirs = [\"{}\", \"/usr/lib/cni\"]\nplugin_timeout_seconds = 2\n",
        net_d.display(),
        dir.display()
    ));

    let config = sandbox_config("hung", &daemon.dir.path().join("logs"));
    let request = cri::RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: String::new() };
    let started = Instant::now();
    let err = daemon.runtime().await.run_pod_sandbox(request.clone()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{}", err.message());
    assert!(err.message().contains("CNI plugin hang-plugin ADD did not finish within 2 s"), "{}", err.message());
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let listed = daemon.runtime().await.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await.unwrap();
    assert!(listed.into_inner().items.is_empty());
    assert!(entries(&daemon.dir.path().join("run/sandboxes")).is_empty());
    assert!(entries(&daemon.state_root().join("sandboxes")).is_empty());
    assert!(mounts_under(daemon.dir.path()).is_empty(), "{:?}", mounts_under(daemon.dir.path()));
    let sleeper = std::fs::read_to_string(dir.join("sleeper")).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", sleeper.trim())).unwrap_or_default();
    assert!(stat.is_empty() || stat.contains(") Z "), "the plugin's child outlived it: {stat}");

    std::fs::remove_file(dir.join("hang")).unwrap();
    let pod = daemon.runtime().await.run_pod_sandbox(request).await.expect("the retry succeeds").into_inner();
    daemon
        .runtime()
        .await
        .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod.pod_sandbox_id })
        .await
        .unwrap();
    assert!(mounts_under(daemon.dir.path()).is_empty());
    assert!(entries(&daemon.dir.path().join("run/sandboxes")).is_empty());
}
