//! A checkpoint of a container with part of its memory swapped out, on a cgroup v2 node with
//! swap (the VM e2e runs it; on a node where swap limits do not apply it says so and checks
//! nothing): the archive holds all of its memory, the dump does not push a neighbour into
//! swap, and the container restored into a new pod has its memory intact.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::node::probe;
use common::pods::*;
use common::{checkpoint_daemon, require_root, scaled, Daemon};
use swapcri::cri;

/// Bytes of the hog's one big string: more than its memory limit, so part of it is in swap.
const HOG_BYTES: u64 = 96 << 20;
const HOG_LIMIT: i64 = 48 << 20;
/// The restored hog's swap limit (the checkpointed one had 256 MiB).
const RESTORED_SWAP: u64 = 192 << 20;
/// It says the string's length every second: the same number after a restore means the
/// memory came back whole.
const HOG: &str = "x=$(head -c 100663296 /dev/zero | tr '\\0' a); while :; do echo len=${#x}; sleep 1; done";
/// A neighbour that holds 32 MiB within its limit and may swap: only node pressure would.
const NEIGHBOUR: &str = "x=$(head -c 33554432 /dev/zero | tr '\\0' b); while :; do sleep 1; done";

fn container(name: &str, command: &str, limit: i64) -> cri::ContainerConfig {
    let mut config = container_config(name, &["sh", "-c", command]);
    let mut resources = cri::LinuxContainerResources { memory_limit_in_bytes: limit, ..Default::default() };
    resources.unified.insert("memory.swap.max".into(), (256u64 << 20).to_string());
    config.linux.as_mut().unwrap().resources = Some(resources);
    config
}

/// The container's cgroup directory and its init process, from its verbose status.
async fn cgroup_and_pid(daemon: &Daemon, id: &str) -> (PathBuf, i64) {
    let mut rt = daemon.runtime().await;
    let request = cri::ContainerStatusRequest { container_id: id.into(), verbose: true };
    let verbose = rt.container_status(request).await.unwrap().into_inner();
    let info: serde_json::Value = serde_json::from_str(&verbose.info["info"]).unwrap();
    let dir = Path::new("/sys/fs/cgroup").join(info["cgroup"].as_str().unwrap().trim_start_matches('/'));
    (dir, info["pid"].as_i64().unwrap())
}

async fn cgroup_dir(daemon: &Daemon, id: &str) -> PathBuf {
    cgroup_and_pid(daemon, id).await.0
}

fn read_u64(path: &Path) -> u64 {
    std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

fn vmstat(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/vmstat").unwrap();
    text.lines().find_map(|l| l.strip_prefix(&format!("{key} "))).unwrap().trim().parse().unwrap()
}

/// Bytes of memory pages in the archive's CRIU images.
fn dumped_pages(archive: &Path) -> u64 {
    let mut tar = tar::Archive::new(std::fs::File::open(archive).unwrap());
    let mut total = 0;
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().to_string_lossy().starts_with("checkpoint/pages-") {
            total += entry.size();
        }
        std::io::copy(&mut entry.by_ref().take(0), &mut std::io::sink()).unwrap();
    }
    total
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partly_swapped_container_is_dumped_whole_and_restored_whole() {
    require_root();
    let facts = probe();
    if !facts.swap_limits_apply() {
        eprintln!("swap limits do not apply on this node ({facts:?}): nothing to check");
        return;
    }
    let daemon = checkpoint_daemon();
    let mut rt = daemon.runtime().await;
    let pod_config = sandbox_config("swapped", &daemon.dir.path().join("logs/swapped"));
    let request = cri::RunPodSandboxRequest { config: Some(pod_config.clone()), runtime_handler: "runc-new".into() };
    let pod = rt.run_pod_sandbox(request).await.unwrap().into_inner().pod_sandbox_id;
    let neighbour = start(&daemon, &pod, &pod_config, container("neighbour", NEIGHBOUR, 128 << 20)).await;
    let hog = start(&daemon, &pod, &pod_config, container("hog", HOG, HOG_LIMIT)).await;
    let (hog_cg, neighbour_cg) = (cgroup_dir(&daemon, &hog).await, cgroup_dir(&daemon, &neighbour).await);
    let log = daemon.dir.path().join("logs/swapped/hog.log");
    let deadline = Instant::now() + scaled(Duration::from_secs(120));
    while !std::fs::read_to_string(&log).unwrap_or_default().contains(&format!("len={HOG_BYTES}")) {
        assert!(Instant::now() < deadline, "the hog never filled its string: {:?}", std::fs::read_to_string(&log));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let swapped = read_u64(&hog_cg.join("memory.swap.current"));
    assert!(swapped >= 32 << 20, "only {swapped} bytes of the hog in swap");

    let (neighbour_before, pswpin, pswpout) =
        (read_u64(&neighbour_cg.join("memory.swap.current")), vmstat("pswpin"), vmstat("pswpout"));
    let location = daemon.dir.path().join("swapped.tar");
    let request = cri::CheckpointContainerRequest {
        container_id: hog.clone(),
        location: location.display().to_string(),
        timeout: 600,
    };
    let began = Instant::now();
    rt.checkpoint_container(request).await.unwrap();
    let took = began.elapsed();
    let neighbour_after = read_u64(&neighbour_cg.join("memory.swap.current"));
    let hog_after = read_u64(&hog_cg.join("memory.swap.current"));
    let pages = dumped_pages(&location);
    eprintln!(
        "measured: dump of a hog with {} MiB in swap: {took:?}, {} MiB of pages; node pswpin +{}, pswpout +{} (pages); hog's swap after {} MiB; neighbour's swap {} -> {} bytes",
        swapped >> 20,
        pages >> 20,
        vmstat("pswpin") - pswpin,
        vmstat("pswpout") - pswpout,
        hog_after >> 20,
        neighbour_before,
        neighbour_after
    );
    assert!(pages >= HOG_BYTES, "the archive holds {pages} bytes of pages, less than the hog's string");
    assert_eq!(neighbour_after, neighbour_before, "the dump pushed the neighbour into swap");

    // Restored into a new pod, the string is whole.
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    let new_config = sandbox_config("restored", &daemon.dir.path().join("logs/restored"));
    let request = cri::RunPodSandboxRequest { config: Some(new_config.clone()), runtime_handler: "runc-new".into() };
    let new_pod = rt.run_pod_sandbox(request).await.unwrap().into_inner().pod_sandbox_id;
    let mut config = container("hog", "", HOG_LIMIT);
    config.command.clear();
    config.image = Some(cri::ImageSpec { image: location.display().to_string(), ..Default::default() });
    // A swap limit the checkpointed container did not have.
    let resources = config.linux.as_mut().unwrap().resources.as_mut().unwrap();
    resources.unified.insert("memory.swap.max".into(), RESTORED_SWAP.to_string());
    let restored = start(&daemon, &new_pod, &new_config, config).await;
    // The restored processes run in the new container's cgroup, with the new request's values.
    let (cgroup, pid) = cgroup_and_pid(&daemon, &restored).await;
    let procs = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert_eq!(Path::new("/sys/fs/cgroup").join(procs.trim().trim_start_matches("0::/")), cgroup);
    assert_eq!(read_u64(&cgroup.join("memory.max")), HOG_LIMIT as u64);
    assert_eq!(read_u64(&cgroup.join("memory.swap.max")), RESTORED_SWAP);
    let log = daemon.dir.path().join("logs/restored/hog.log");
    let deadline = Instant::now() + scaled(Duration::from_secs(60));
    while !std::fs::read_to_string(&log).unwrap_or_default().contains(&format!("len={HOG_BYTES}")) {
        assert!(Instant::now() < deadline, "the restored hog says {:?}", std::fs::read_to_string(&log));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: new_pod }).await.unwrap();
}
