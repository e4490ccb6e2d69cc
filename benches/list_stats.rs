//! Time to answer ListContainerStats with 10 and 100 running containers. Needs root.
//!   sudo hack/bench.sh

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::Daemon;
use swapcri::cri;

const CALLS: usize = 20;

#[tokio::main]
async fn main() {
    common::require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("stats-bench", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let mut rt = daemon.runtime().await;
    let mut running = 0;
    println!("ListContainerStats, median of {CALLS} calls:");
    for target in [10, 100] {
        while running < target {
            start(&daemon, &pod, &pod_config, container_config(&format!("c{running}"), &["sleep", "600"])).await;
            running += 1;
        }
        let mut samples: Vec<Duration> = Vec::new();
        for _ in 0..CALLS {
            let started = Instant::now();
            let stats = rt.list_container_stats(cri::ListContainerStatsRequest { filter: None }).await.unwrap();
            samples.push(started.elapsed());
            assert_eq!(stats.into_inner().stats.len(), target);
        }
        samples.sort();
        println!("  {target:>3} running containers: {:.2} ms", samples[CALLS / 2].as_secs_f64() * 1000.0);
    }
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}
