//! Time to answer the list calls kubelet makes every few seconds, on a node at kubelet's
//! default maximum of 110 running pods (one running container each). Needs root.
//!   sudo hack/bench.sh
//! Against a daemon of its own by default; with LIST_ENDPOINT (a CRI socket path) and
//! LIST_IMAGE (an image that endpoint can pull, with `sleep`), against that runtime instead,
//! so every runtime of hack/bench.sh is timed by the same client.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::Daemon;
use swapcri::cri;

/// Calls timed per list (LIST_CALLS: more, to profile one).
fn calls() -> usize {
    std::env::var("LIST_CALLS").ok().and_then(|n| n.parse().ok()).filter(|&n| n > 0).unwrap_or(20)
}
const PODS: usize = 110;

/// The median of `calls()` calls, or the first call's error.
async fn median_of<F, Fut>(mut call: F) -> Result<Duration, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let mut samples = Vec::new();
    let calls = calls();
    for _ in 0..calls {
        let started = Instant::now();
        call().await?;
        samples.push(started.elapsed());
    }
    samples.sort();
    Ok(samples[calls / 2])
}

fn report(name: &str, took: Result<Duration, String>, target_ms: f64) {
    match took {
        Ok(took) => {
            let ms = took.as_secs_f64() * 1000.0;
            println!(
                "  {name:<22} {ms:>7.2} ms   (target <= {target_ms} ms: {})",
                if ms <= target_ms { "ok" } else { "MISSED" }
            );
        }
        Err(e) => println!("  {name:<22} failed: {e}"),
    }
}

/// Where the pods run: a daemon of our own, or the runtime on LIST_ENDPOINT.
struct Target {
    _daemon: Option<Daemon>,
    socket: std::path::PathBuf,
    image: String,
    logs: std::path::PathBuf,
    _logs_dir: Option<tempfile::TempDir>,
}

async fn target() -> Target {
    match std::env::var_os("LIST_ENDPOINT") {
        None => {
            let daemon = Daemon::start("");
            import_busybox(&daemon);
            let logs = daemon.dir.path().join("logs");
            Target { socket: daemon.socket(), image: IMAGE.into(), logs, _daemon: Some(daemon), _logs_dir: None }
        }
        Some(endpoint) => {
            let socket = std::path::PathBuf::from(endpoint.to_string_lossy().trim_start_matches("unix://"));
            let image = std::env::var("LIST_IMAGE").expect("LIST_IMAGE: an image the endpoint can pull");
            let mut images = cri::image_service_client::ImageServiceClient::new(common::connect(&socket).await);
            let spec = cri::ImageSpec { image: image.clone(), ..Default::default() };
            images
                .pull_image(cri::PullImageRequest { image: Some(spec), ..Default::default() })
                .await
                .expect("PullImage");
            let logs_dir = tempfile::tempdir().unwrap();
            let logs = logs_dir.path().to_path_buf();
            Target { socket, image, logs, _daemon: None, _logs_dir: Some(logs_dir) }
        }
    }
}

#[tokio::main]
async fn main() {
    common::require_root();
    let target = target().await;
    let rt = cri::runtime_service_client::RuntimeServiceClient::new(common::connect(&target.socket).await);
    let mut pods = Vec::new();
    for n in 0..PODS {
        let mut pod_config = sandbox_config(&format!("list-bench-{n}"), &target.logs.join(n.to_string()));
        // A cgroup parent per pod, as kubelet gives (containerd's pod stats need one).
        pod_config.linux.as_mut().unwrap().cgroup_parent = format!("/swapcri-list-bench/pod{n}");
        std::fs::create_dir_all(target.logs.join(n.to_string())).unwrap();
        let mut client = rt.clone();
        let reply = client
            .run_pod_sandbox(cri::RunPodSandboxRequest {
                config: Some(pod_config.clone()),
                runtime_handler: String::new(),
            })
            .await
            .expect("RunPodSandbox");
        let pod = reply.into_inner().pod_sandbox_id;
        let mut container = container_config("c", &["sleep", "600"]);
        // As kubelet names it (CRI-O checks the signature policy against the name asked for).
        container.image = Some(cri::ImageSpec {
            image: target.image.clone(),
            user_specified_image: target.image.clone(),
            ..Default::default()
        });
        let created = client
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: pod.clone(),
                config: Some(container),
                sandbox_config: Some(pod_config),
            })
            .await
            .expect("CreateContainer")
            .into_inner()
            .container_id;
        client.start_container(cri::StartContainerRequest { container_id: created }).await.expect("StartContainer");
        pods.push(pod);
    }
    println!("{PODS} running pods with a running container each, median of {} calls:", calls());
    // Times one list call and checks that it saw every pod; a failure is reported, and the
    // pods are removed all the same.
    macro_rules! list {
        ($name:literal, $target_ms:expr, $call:ident, $request:expr, $items:ident) => {{
            let took = median_of(|| {
                let mut rt = rt.clone();
                async move {
                    let reply = rt
                        .$call($request)
                        .await
                        .map_err(|e| format!("{} {}", e.code(), e.message().chars().take(200).collect::<String>()))?;
                    match reply.into_inner().$items.len() {
                        n if n >= PODS => Ok(()),
                        n => Err(format!("{n} items, not {PODS}")),
                    }
                }
            })
            .await;
            report($name, took, $target_ms);
        }};
    }
    list!("ListPodSandbox", 5.0, list_pod_sandbox, cri::ListPodSandboxRequest { filter: None }, items);
    list!("ListContainers", 5.0, list_containers, cri::ListContainersRequest { filter: None }, containers);
    list!("ListContainerStats", 20.0, list_container_stats, cri::ListContainerStatsRequest { filter: None }, stats);
    list!("ListPodSandboxStats", 10.0, list_pod_sandbox_stats, cri::ListPodSandboxStatsRequest { filter: None }, stats);
    let mut rt = rt.clone();
    for pod in pods {
        let request = cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() };
        rt.stop_pod_sandbox(request).await.unwrap();
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    }
    // The pods' parent, named by the requests as kubelet names its own: the runtime leaves it
    // (in each v1 hierarchy, or in the unified one).
    let hierarchies = std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten().map(|h| h.path());
    for parent in hierarchies.chain([std::path::PathBuf::from("/sys/fs/cgroup")]).map(|h| h.join("swapcri-list-bench"))
    {
        for pod in std::fs::read_dir(&parent).into_iter().flatten().flatten().filter(|e| e.path().is_dir()) {
            let _ = std::fs::remove_dir(pod.path());
        }
        let _ = std::fs::remove_dir(parent);
    }
}
