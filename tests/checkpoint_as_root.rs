//! CheckpointContainer with a real runc and CRIU 4.1.1 (hack/criu.sh) on this host: a
//! counting container is dumped and left running, and the archive holds what CRI-O and
//! containerd put in theirs; a container that is not running is refused.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use common::pods::*;
use common::{checkpoint_daemon, require_root, Daemon};
use swapcri::cri;

const COUNTER: &str = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; echo $i; sleep 0.1; done";

/// The archive's entries (directories without their trailing slash) and their sizes, and the
/// contents of the small files.
fn read_archive(path: &std::path::Path) -> (BTreeMap<String, u64>, BTreeMap<String, Vec<u8>>) {
    let mut tar = tar::Archive::new(std::fs::File::open(path).unwrap());
    let (mut sizes, mut small) = (BTreeMap::new(), BTreeMap::new());
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string().trim_end_matches('/').to_string();
        sizes.insert(name.clone(), entry.size());
        if !name.starts_with("checkpoint/") && entry.size() < 1 << 20 {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            small.insert(name, bytes);
        }
    }
    (sizes, small)
}

/// A pod of that name on that handler, its logs under `logs/<name>`.
async fn run_pod(daemon: &Daemon, name: &str, handler: &str) -> (cri::PodSandboxConfig, String) {
    let config = sandbox_config(name, &daemon.dir.path().join("logs").join(name));
    let request = cri::RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: handler.into() };
    let pod = daemon.runtime().await.run_pod_sandbox(request).await.unwrap().into_inner().pod_sandbox_id;
    (config, pod)
}

async fn count(daemon: &Daemon, id: &str) -> u64 {
    let out = exec(daemon, id, &["cat", "/tmp/count"], 10).await.unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_container_is_dumped_and_keeps_running() {
    require_root();
    let daemon = checkpoint_daemon();
    // Debian's runc 1.1.5 (the built-in handler) and runc 1.4.3.
    for handler in ["runc", "runc-new"] {
        dump_and_go_on(&daemon, handler).await;
    }
}

async fn dump_and_go_on(daemon: &Daemon, handler: &str) {
    let mut rt = daemon.runtime().await;
    let (config, pod) = run_pod(daemon, &format!("counter-{handler}"), handler).await;
    let id = start(daemon, &pod, &config, container_config("counter", &["sh", "-c", COUNTER])).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let location = daemon.dir.path().join(format!("counter-{handler}.tar"));
    let request = cri::CheckpointContainerRequest {
        container_id: id.clone(),
        location: location.display().to_string(),
        timeout: 60,
    };
    let before = count(daemon, &id).await;
    let began = std::time::Instant::now();
    rt.checkpoint_container(request).await.unwrap();
    eprintln!("{handler}: checkpoint in {:?}", began.elapsed());
    let (sizes, files) = read_archive(&location);
    for image in ["checkpoint/inventory.img", "checkpoint/pstree.img", "checkpoint/descriptors.json"] {
        assert!(sizes.contains_key(image), "{image} missing: {:?}", sizes.keys());
    }
    let pages: u64 = sizes.iter().filter(|(n, _)| n.starts_with("checkpoint/pages-")).map(|(_, s)| s).sum();
    assert!(pages > 0, "CRIU dumped no memory pages: {sizes:?}");
    let dump: serde_json::Value = serde_json::from_slice(&files["config.dump"]).unwrap();
    assert_eq!((dump["id"].as_str(), dump["name"].as_str()), (Some(id.as_str()), Some("counter")));
    assert_eq!(dump["runtime"], handler);
    let spec: serde_json::Value = serde_json::from_slice(&files["spec.dump"]).unwrap();
    assert_eq!(spec["process"]["args"][2], COUNTER);
    let mut diff = tar::Archive::new(&files["rootfs-diff.tar"][..]);
    let changed: Vec<String> =
        diff.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
    assert!(changed.contains(&"tmp/count".to_string()), "{changed:?}");
    let log = String::from_utf8_lossy(&files["container.log"]);
    assert!(log.contains(" stdout F 1\n"), "the log as it was: {log}");
    assert!(String::from_utf8_lossy(&files["dump.log"]).contains("Dumping finished successfully"));

    // Left running, counting on.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = count(daemon, &id).await;
    assert!(after > before, "the counter stopped at {before} / {after}");
    let status = rt.container_status(cri::ContainerStatusRequest { container_id: id.clone(), verbose: false });
    let state = status.await.unwrap().into_inner().status.unwrap().state;
    assert_eq!(state, cri::ContainerState::ContainerRunning as i32);

    // A stopped container is refused, and the archive already there stays as it was.
    rt.stop_container(cri::StopContainerRequest { container_id: id.clone(), timeout: 0 }).await.unwrap();
    wait_exited(daemon, &id, Duration::from_secs(20)).await;
    let written = std::fs::read(&location).unwrap();
    let request = cri::CheckpointContainerRequest {
        container_id: id.clone(),
        location: location.display().to_string(),
        timeout: 0,
    };
    let err = rt.checkpoint_container(request).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{}", err.message());
    assert_eq!(std::fs::read(&location).unwrap(), written);
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}

/// The first and last numbers a counter's CRI log holds.
fn logged_counts(log: &std::path::Path) -> (u64, u64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let counts: Vec<u64> = text.lines().filter_map(|l| l.rsplit(' ').next()?.parse().ok()).collect();
    (*counts.first().unwrap_or(&0), *counts.last().unwrap_or(&0))
}

/// The memory cgroup limit of a process (cgroup v2's memory.max, or v1's limit).
fn memory_limit(pid: i64) -> Result<String, String> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if controllers.split(',').any(|c| c == "memory") {
            return Ok(std::fs::read_to_string(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")).unwrap());
        }
        if controllers.is_empty() && std::path::Path::new(&format!("/sys/fs/cgroup{path}/memory.max")).exists() {
            return Ok(std::fs::read_to_string(format!("/sys/fs/cgroup{path}/memory.max")).unwrap());
        }
    }
    Err(format!("process {pid}: no memory cgroup in {cgroups}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_restored_into_a_new_pod_counts_on_with_the_new_limits() {
    require_root();
    let daemon = checkpoint_daemon();
    // Debian's runc 1.1.5 (the built-in handler) and runc 1.4.3.
    for handler in ["runc", "runc-new"] {
        restore_into_a_new_pod(&daemon, handler).await;
    }
}

async fn restore_into_a_new_pod(daemon: &Daemon, handler: &str) {
    let mut rt = daemon.runtime().await;
    let (old_config, old_pod) = run_pod(daemon, &format!("counter-old-{handler}"), handler).await;
    let id = start(daemon, &old_pod, &old_config, container_config("counter", &["sh", "-c", COUNTER])).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let location = daemon.dir.path().join(format!("restore-{handler}.tar"));
    let request = cri::CheckpointContainerRequest {
        container_id: id.clone(),
        location: location.display().to_string(),
        timeout: 60,
    };
    rt.checkpoint_container(request).await.unwrap();
    let at_checkpoint = count(daemon, &id).await;
    let old = old_pod.clone();
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: old_pod }).await.unwrap();

    // A new pod; the container's image is the archive, its memory limit a new one.
    let (new_config, new_pod) = run_pod(daemon, &format!("counter-new-{handler}"), handler).await;
    let mut config = container_config("counter", &[]);
    config.image = Some(cri::ImageSpec { image: location.display().to_string(), ..Default::default() });
    let limit = 96 << 20;
    config.linux.as_mut().unwrap().resources =
        Some(cri::LinuxContainerResources { memory_limit_in_bytes: limit, ..Default::default() });
    let restored = start(daemon, &new_pod, &new_config, config.clone()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let now = count(daemon, &restored).await;
    assert!(now >= at_checkpoint, "the restored counter went back: {now} < {at_checkpoint}");
    let log = daemon.dir.path().join(format!("logs/counter-new-{handler}/counter.log"));
    let (first, last) = logged_counts(&log);
    assert!(
        first > 1 && first <= at_checkpoint + 1,
        "the restored counter's first line is {first} (checkpoint at {at_checkpoint})"
    );
    assert!(last > first, "it counts on: {first}..{last}");
    let status = rt.container_status(cri::ContainerStatusRequest { container_id: restored.clone(), verbose: true });
    let status = status.await.unwrap().into_inner();
    assert_eq!(status.status.as_ref().unwrap().state, cri::ContainerState::ContainerRunning as i32);
    let info: serde_json::Value = serde_json::from_str(&status.info["info"]).unwrap();
    let pid = info["pid"].as_i64().unwrap();
    let got = memory_limit(pid)
        .unwrap_or_else(|e| panic!("{handler}: container {restored} of pod {new_pod} (old pod {old}): {e}"));
    assert_eq!(got.trim(), limit.to_string(), "the new request's limit, not the checkpoint's");

    // Archives that cannot be restored change nothing.
    let junk = daemon.dir.path().join(format!("junk-{handler}.tar"));
    std::fs::write(&junk, "not a tar").unwrap();
    config.metadata.as_mut().unwrap().name = "junk".into();
    config.image = Some(cri::ImageSpec { image: junk.display().to_string(), ..Default::default() });
    let request = cri::CreateContainerRequest {
        pod_sandbox_id: new_pod.clone(),
        config: Some(config),
        sandbox_config: Some(new_config),
    };
    let err = rt.create_container(request).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{}", err.message());
    let listed = rt.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner().containers;
    let in_pod: Vec<_> = listed.iter().filter(|c| c.pod_sandbox_id == new_pod).collect();
    assert_eq!(in_pod.len(), 1, "{handler}: only the restored container: {in_pod:?}");
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: new_pod }).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oci_image_built_from_a_checkpoint_restores_like_the_archive() {
    require_root();
    let daemon = checkpoint_daemon();
    let mut rt = daemon.runtime().await;
    let (old_config, old_pod) = run_pod(&daemon, "image-old", "runc").await;
    let id = start(&daemon, &old_pod, &old_config, container_config("counter", &["sh", "-c", COUNTER])).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let location = daemon.dir.path().join("for-image.tar");
    let request = cri::CheckpointContainerRequest {
        container_id: id.clone(),
        location: location.display().to_string(),
        timeout: 60,
    };
    rt.checkpoint_container(request).await.unwrap();
    let at_checkpoint = count(&daemon, &id).await;
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: old_pod }).await.unwrap();

    // The archive's files as the one layer of an image that says it is a checkpoint.
    let layer = std::fs::read(&location).unwrap();
    let annotation = serde_json::json!({"io.kubernetes.cri-o.annotations.checkpoint.name": "counter"});
    let image = common::images::TestImage::build(vec![(layer, common::images::Compress::Gzip)], "", false)
        .with_manifest_annotations(annotation);
    let archive = daemon.dir.path().join("checkpoint-image.tar");
    image.write_layout_archive(&archive, "localhost/checkpoints/counter:latest");
    let out = daemon.command().args(["image", "import"]).arg(&archive).output().unwrap();
    assert!(out.status.success(), "import: {}", String::from_utf8_lossy(&out.stderr));

    let (new_config, new_pod) = run_pod(&daemon, "image-new", "runc").await;
    let mut config = container_config("counter", &[]);
    config.image = Some(cri::ImageSpec { image: "localhost/checkpoints/counter:latest".into(), ..Default::default() });
    let restored = start(&daemon, &new_pod, &new_config, config).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (first, last) = logged_counts(&daemon.dir.path().join("logs/image-new/counter.log"));
    assert!(
        first > 1 && first <= at_checkpoint + 1,
        "restored from the image, it starts at {first} (checkpoint at {at_checkpoint})"
    );
    assert!(last > first && count(&daemon, &restored).await >= at_checkpoint, "it counts on: {first}..{last}");
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: new_pod }).await.unwrap();
}
