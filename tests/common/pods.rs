//! Pods and containers for the runtime tests: a busybox image imported into the daemon,
//! and CRI configs the way crictl writes them.

use std::path::Path;
use std::time::{Duration, Instant};

use swapcri::cri;

use super::images::{busybox, Compress, LayerTar, TestImage};
use super::Daemon;

pub const IMAGE: &str = "localhost/test/busybox:latest";

/// A busybox image with the usual applets, /etc/passwd and /etc/group.
pub fn busybox_image() -> TestImage {
    let mut layer = LayerTar::new().dir("bin").file("bin/busybox", 0o755, &busybox());
    for applet in [
        "sh",
        "echo",
        "cat",
        "sleep",
        "ls",
        "id",
        "hostname",
        "true",
        "false",
        "dd",
        "head",
        "yes",
        "mount",
        "ps",
        "kill",
        "printf",
        "grep",
        "wc",
        "stat",
        "touch",
        "rm",
        "seq",
        "readlink",
        "tr",
        "ip",
        "wget",
        "nc",
        "httpd",
        "stty",
        "sha256sum",
    ] {
        layer = layer.symlink(&format!("bin/{applet}"), "busybox");
    }
    let layer = layer
        .dir("etc")
        .file("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n")
        .file("etc/group", 0o644, b"root:x:0:\napp:x:1000:\nwheel:x:10:app\n")
        .dir("tmp")
        .dir("root")
        .finish();
    TestImage::build(vec![(layer, Compress::Gzip)], "", false)
}

/// Imports the busybox image into the daemon's store with `swapcri image import`.
pub fn import_busybox(daemon: &Daemon) {
    let archive = daemon.dir.path().join("busybox.tar");
    busybox_image().write_layout_archive(&archive, IMAGE);
    let out = daemon.command().args(["image", "import"]).arg(&archive).output().unwrap();
    assert!(out.status.success(), "import: {}", String::from_utf8_lossy(&out.stderr));
}

pub fn sandbox_config(name: &str, log_dir: &Path) -> cri::PodSandboxConfig {
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: name.into(),
        log_directory: log_dir.display().to_string(),
        linux: Some(cri::LinuxPodSandboxConfig {
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    pid: cri::NamespaceMode::Container as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn container_config(name: &str, command: &[&str]) -> cri::ContainerConfig {
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: name.into(), attempt: 0 }),
        image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        command: command.iter().map(|s| s.to_string()).collect(),
        log_path: format!("{name}.log"),
        linux: Some(cri::LinuxContainerConfig {
            security_context: Some(cri::LinuxContainerSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    pid: cri::NamespaceMode::Container as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod shares one PID namespace among its containers (it gets a holder).
pub fn with_pod_pid_namespace(mut config: cri::PodSandboxConfig) -> cri::PodSandboxConfig {
    let context = config.linux.as_mut().unwrap().security_context.as_mut().unwrap();
    context.namespace_options.as_mut().unwrap().pid = cri::NamespaceMode::Pod as i32;
    config
}

/// The container joins its pod's PID namespace.
pub fn in_pod_pid_namespace(mut config: cri::ContainerConfig) -> cri::ContainerConfig {
    let context = config.linux.as_mut().unwrap().security_context.as_mut().unwrap();
    context.namespace_options.as_mut().unwrap().pid = cri::NamespaceMode::Pod as i32;
    config
}

pub async fn run_sandbox(daemon: &Daemon, config: cri::PodSandboxConfig) -> String {
    let mut rt = daemon.runtime().await;
    rt.run_pod_sandbox(cri::RunPodSandboxRequest { config: Some(config), runtime_handler: String::new() })
        .await
        .expect("RunPodSandbox")
        .into_inner()
        .pod_sandbox_id
}

/// Creates and starts a container; returns its id.
pub async fn start(
    daemon: &Daemon,
    sandbox: &str,
    sandbox_config: &cri::PodSandboxConfig,
    config: cri::ContainerConfig,
) -> String {
    let mut rt = daemon.runtime().await;
    let id = rt
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sandbox.into(),
            config: Some(config),
            sandbox_config: Some(sandbox_config.clone()),
        })
        .await
        .expect("CreateContainer")
        .into_inner()
        .container_id;
    rt.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.expect("StartContainer");
    id
}

pub async fn status(daemon: &Daemon, id: &str) -> cri::ContainerStatus {
    let mut rt = daemon.runtime().await;
    rt.container_status(cri::ContainerStatusRequest { container_id: id.into(), verbose: false })
        .await
        .expect("ContainerStatus")
        .into_inner()
        .status
        .unwrap()
}

/// Waits until the container has exited.
pub async fn wait_exited(daemon: &Daemon, id: &str, within: Duration) -> cri::ContainerStatus {
    let deadline = Instant::now() + within;
    loop {
        let s = status(daemon, id).await;
        if s.state == cri::ContainerState::ContainerExited as i32 {
            return s;
        }
        assert!(Instant::now() < deadline, "container {id} still {:?} after {within:?}", s.state);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn exec(
    daemon: &Daemon,
    id: &str,
    cmd: &[&str],
    timeout: i64,
) -> Result<cri::ExecSyncResponse, tonic::Status> {
    let mut rt = daemon.runtime().await;
    rt.exec_sync(cri::ExecSyncRequest {
        container_id: id.into(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        timeout,
    })
    .await
    .map(|r| r.into_inner())
}

/// The containers the daemon's runc (the built-in handler) holds.
pub fn runc_list(daemon: &Daemon) -> std::collections::BTreeSet<String> {
    let out = std::process::Command::new("runc")
        .arg("--root")
        .arg(daemon.dir.path().join("run/runc"))
        .args(["list", "-q"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect()
}

/// A test's CNI bridge, deleted at the end (the bridge plugin leaves it on DEL).
pub struct Bridge(pub String);

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["link", "del", &self.0]).output();
    }
}

/// Mounts under `dir` still present in the host's mount table.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = dir.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4).map(str::to_string))
        .filter(|m| m.starts_with(&prefix))
        .collect()
}

/// A streaming URL for an exec with stdout (and the other streams as asked).
pub async fn exec_url(daemon: &Daemon, id: &str, cmd: &[&str], tty: bool, stdin: bool, stderr: bool) -> String {
    let mut rt = daemon.runtime().await;
    let req = cri::ExecRequest {
        container_id: id.into(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        tty,
        stdin,
        stdout: true,
        stderr,
        ..Default::default()
    };
    rt.exec(req).await.expect("Exec").into_inner().url
}

/// The `info` of a container's verbose status.
pub async fn verbose_container_info(daemon: &Daemon, id: &str) -> serde_json::Value {
    let request = cri::ContainerStatusRequest { container_id: id.into(), verbose: true };
    let status = daemon.runtime().await.container_status(request).await.unwrap().into_inner();
    serde_json::from_str(&status.info["info"]).unwrap()
}

/// The pid of a container's init, from its verbose status.
pub async fn container_pid(daemon: &Daemon, id: &str) -> i64 {
    verbose_container_info(daemon, id).await["pid"].as_i64().unwrap()
}

/// The ids of the pods and of the containers the daemon lists.
pub async fn listed(daemon: &Daemon) -> (Vec<String>, Vec<String>) {
    let mut rt = daemon.runtime().await;
    let pods = rt.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await.unwrap().into_inner().items;
    let containers = rt.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner().containers;
    (pods.into_iter().map(|p| p.id).collect(), containers.into_iter().map(|c| c.id).collect())
}

/// The pod's state and the `info` of its verbose status.
pub async fn verbose_pod_status(daemon: &Daemon, id: &str) -> (i32, serde_json::Value) {
    let answer = daemon
        .runtime()
        .await
        .pod_sandbox_status(cri::PodSandboxStatusRequest { pod_sandbox_id: id.into(), verbose: true })
        .await
        .unwrap()
        .into_inner();
    (answer.status.unwrap().state, serde_json::from_str(&answer.info["info"]).unwrap())
}

/// The pid of the process holding the pod's PID namespace.
pub async fn holder_pid(daemon: &Daemon, pod: &str) -> i32 {
    let (_, info) = verbose_pod_status(daemon, pod).await;
    info["pidNamespaceHolder"]["pid"].as_i64().expect("the pod has a PID namespace holder") as i32
}
