//! Time to answer the list calls kubelet makes every few seconds, on a node at kubelet's
//! default maximum of 110 running pods (one running container each). Needs root.
//!   sudo hack/bench.sh

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::Daemon;
use swapcri::cri;

const CALLS: usize = 20;
const PODS: usize = 110;

async fn median_of<F, Fut>(mut call: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::new();
    for _ in 0..CALLS {
        let started = Instant::now();
        call().await;
        samples.push(started.elapsed());
    }
    samples.sort();
    samples[CALLS / 2]
}

fn report(name: &str, took: Duration, target_ms: f64) {
    let ms = took.as_secs_f64() * 1000.0;
    println!(
        "  {name:<22} {ms:>7.2} ms   (target <= {target_ms} ms: {})",
        if ms <= target_ms { "ok" } else { "MISSED" }
    );
}

#[tokio::main]
async fn main() {
    common::require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let mut pods = Vec::new();
    for n in 0..PODS {
        let pod_config = sandbox_config(&format!("list-bench-{n}"), &logs);
        let pod = run_sandbox(&daemon, pod_config.clone()).await;
        start(&daemon, &pod, &pod_config, container_config("c", &["sleep", "600"])).await;
        pods.push(pod);
    }
    let rt = daemon.runtime().await;
    println!("{PODS} running pods with a running container each, median of {CALLS} calls:");
    // Times one list call and checks that it saw every pod.
    macro_rules! list {
        ($name:literal, $target_ms:expr, $call:ident, $request:expr, $items:ident) => {{
            let took = median_of(|| {
                let mut rt = rt.clone();
                async move {
                    let reply = rt.$call($request).await.unwrap().into_inner();
                    assert_eq!(reply.$items.len(), PODS);
                }
            })
            .await;
            report($name, took, $target_ms);
        }};
    }
    list!("ListPodSandbox", 5.0, list_pod_sandbox, cri::ListPodSandboxRequest { filter: None }, items);
    list!("ListContainers", 5.0, list_containers, cri::ListContainersRequest { filter: None }, containers);
    list!("ListContainerStats", 20.0, list_container_stats, cri::ListContainerStatsRequest { filter: None }, stats);
    list!("ListPodSandboxStats", 20.0, list_pod_sandbox_stats, cri::ListPodSandboxStatsRequest { filter: None }, stats);
    let mut rt = rt.clone();
    for pod in pods {
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    }
}
