//! How soon a pod whose PID-namespace holder is killed from outside is reported NotReady, and
//! how soon its containers are reported exited (one in the pod's PID namespace, one in its
//! own). The promise is one second for both. Needs root.
//!   sudo hack/bench.sh

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::Daemon;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use swapcri::cri;

const PODS: usize = 20;
const PROMISE: Duration = Duration::from_secs(1);

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (median, p95, max) =
        (samples[samples.len() / 2], samples[samples.len() * 95 / 100], samples[samples.len() - 1]);
    println!(
        "  {name:<26} median {:>7.1} ms  p95 {:>7.1} ms  max {:>7.1} ms   (promise <= {} ms: {})",
        ms(median),
        ms(p95),
        ms(max),
        PROMISE.as_millis(),
        if max <= PROMISE { "ok" } else { "MISSED" }
    );
}

#[tokio::main]
async fn main() {
    common::require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let (mut not_ready, mut exited) = (Vec::new(), Vec::new());
    let mut rt = daemon.runtime().await;
    for n in 0..PODS {
        let pod_config = with_pod_pid_namespace(sandbox_config(&format!("holder-loss-{n}"), &logs));
        let pod = run_sandbox(&daemon, pod_config.clone()).await;
        let shared = in_pod_pid_namespace(container_config("shared", &["sleep", "600"]));
        let containers = [
            start(&daemon, &pod, &pod_config, shared).await,
            start(&daemon, &pod, &pod_config, container_config("own", &["sleep", "600"])).await,
        ];
        let holder = holder_pid(&daemon, &pod).await;
        kill(Pid::from_raw(holder), Signal::SIGKILL).unwrap();
        let killed = Instant::now();
        let mut pod_seen = None;
        loop {
            assert!(killed.elapsed() < Duration::from_secs(30), "pod {pod} still ready 30 s after its holder died");
            if pod_seen.is_none()
                && verbose_pod_status(&daemon, &pod).await.0 == cri::PodSandboxState::SandboxNotready as i32
            {
                pod_seen = Some(killed.elapsed());
            }
            let mut all_exited = true;
            for c in &containers {
                all_exited &= status(&daemon, c).await.state == cri::ContainerState::ContainerExited as i32;
            }
            if let (Some(seen), true) = (pod_seen, all_exited) {
                not_ready.push(seen);
                exited.push(killed.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    }
    println!("{PODS} pods whose PID-namespace holder was killed (SIGKILL), one at a time:");
    report("pod NotReady", not_ready);
    report("both containers exited", exited);
}
