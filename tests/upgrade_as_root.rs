//! Live upgrade and downgrade under running pods (long form: `sudo hack/upgrade-test.sh`,
//! which builds the binaries this test names):
//!   SWAPCRI_UPGRADE_FROM  an earlier release's swapcri (the pods start under it);
//!   SWAPCRI_UPGRADE_NEXT  a build whose CRI has a field more in PodSandboxConfig and
//!                         ContainerConfig (the next Kubernetes' CRI).
//! The pods start under FROM; the daemon moves to this build with SIGTERM, to NEXT with
//! SIGKILL, back to this build with SIGTERM (a downgrade from NEXT's records). After each
//! move every container keeps its process, exec and logs work, exit codes are kept; at the
//! end removal through the CRI leaves nothing behind.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::pods::*;
use common::{require_root, Daemon};
use nix::sys::signal::Signal;
use swapcri::cri;

struct Pods {
    app: String,
    app_config: cri::PodSandboxConfig,
    host: String,
    /// (container id, its pid) of the running containers.
    running: Vec<(String, i64)>,
    /// (container id, exit code) of the exited ones.
    exited: Vec<(String, i32)>,
}

fn binary(var: &str) -> PathBuf {
    let path = PathBuf::from(std::env::var(var).unwrap_or_else(|_| panic!("{var} names a swapcri binary")));
    assert!(path.exists(), "{}", path.display());
    path
}

async fn start_pods(daemon: &Daemon) -> Pods {
    let logs = daemon.dir.path().join("logs");
    let app_config = with_pod_pid_namespace(sandbox_config("upgrade-app", &logs));
    let app = run_sandbox(daemon, app_config.clone()).await;
    let ticker = ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"];
    let ticker = start(daemon, &app, &app_config, in_pod_pid_namespace(container_config("ticker", &ticker))).await;
    let job = start(daemon, &app, &app_config, container_config("job", &["sh", "-c", "exit 3"])).await;
    assert_eq!(wait_exited(daemon, &job, Duration::from_secs(10)).await.exit_code, 3);

    let mut host_config = sandbox_config("upgrade-host", &logs);
    let context = host_config.linux.as_mut().unwrap().security_context.as_mut().unwrap();
    context.namespace_options.as_mut().unwrap().network = cri::NamespaceMode::Node as i32;
    let host = run_sandbox(daemon, host_config.clone()).await;
    let agent = start(daemon, &host, &host_config, container_config("agent", &["sleep", "3600"])).await;
    let mut running = Vec::new();
    for id in [ticker, agent] {
        running.push((id.clone(), container_pid(daemon, &id).await));
    }
    Pods { app, app_config, host, running, exited: vec![(job, 3)] }
}

/// What must hold after every move of the daemon.
async fn check(daemon: &Daemon, pods: &Pods, step: &str) {
    for pod in [&pods.app, &pods.host] {
        let state = verbose_pod_status(daemon, pod).await.0;
        assert_eq!(state, cri::PodSandboxState::SandboxReady as i32, "{step}: pod {pod} ready");
    }
    for (id, pid) in &pods.running {
        let status = status(daemon, id).await;
        assert_eq!(status.state, cri::ContainerState::ContainerRunning as i32, "{step}: {id} runs");
        assert_eq!(container_pid(daemon, id).await, *pid, "{step}: {id} keeps its process");
        let out = exec(daemon, id, &["echo", "still here"], 10).await.unwrap_or_else(|e| panic!("{step}: exec: {e}"));
        assert_eq!((out.exit_code, String::from_utf8_lossy(&out.stdout).trim()), (0, "still here"), "{step}");
    }
    for (id, code) in &pods.exited {
        let status = status(daemon, id).await;
        assert_eq!((status.state, status.exit_code), (cri::ContainerState::ContainerExited as i32, *code), "{step}");
    }
    // The ticker's log keeps growing across the move.
    let log = daemon.dir.path().join("logs/ticker.log");
    let before = std::fs::metadata(&log).unwrap().len();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(std::fs::metadata(&log).unwrap().len() > before, "{step}: the log grows");
    assert!(!daemon.log().contains("kept aside"), "{step}: nothing quarantined:\n{}", daemon.log());
}

fn move_to(daemon: &mut Daemon, binary: PathBuf, signal: Signal) {
    daemon.stop_with(signal);
    daemon.binary = binary;
    daemon.restart();
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "long form: sudo hack/upgrade-test.sh builds the earlier and the next binaries"]
async fn pods_survive_upgrades_and_a_downgrade() {
    require_root();
    let this = PathBuf::from(env!("CARGO_BIN_EXE_swapcri"));
    let mut daemon = Daemon::configure("");
    daemon.binary = binary("SWAPCRI_UPGRADE_FROM");
    daemon.restart();
    import_busybox(&daemon);
    let mut pods = start_pods(&daemon).await;
    check(&daemon, &pods, "under the earlier release").await;

    move_to(&mut daemon, this.clone(), Signal::SIGTERM);
    check(&daemon, &pods, "upgraded with SIGTERM").await;

    move_to(&mut daemon, binary("SWAPCRI_UPGRADE_NEXT"), Signal::SIGKILL);
    check(&daemon, &pods, "upgraded to the next CRI with SIGKILL").await;
    // A container the next build creates (its record carries the new field).
    let late = container_config("late", &["sleep", "3600"]);
    let late = start(&daemon, &pods.app, &pods.app_config, late).await;
    pods.running.push((late.clone(), container_pid(&daemon, &late).await));

    move_to(&mut daemon, this, Signal::SIGTERM);
    check(&daemon, &pods, "downgraded from the next CRI with SIGTERM").await;

    let mut rt = daemon.runtime().await;
    for pod in [&pods.app, &pods.host] {
        rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    }
    for (_, pid) in &pods.running {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(stat.is_empty() || stat.contains(") Z "), "process {pid} is gone");
    }
    assert!(mounts_under(daemon.dir.path()).is_empty(), "{:?}", mounts_under(daemon.dir.path()));
    assert!(runc_list(&daemon).is_empty(), "runc still lists containers");
    for kind in ["sandboxes", "containers"] {
        let left: Vec<_> = std::fs::read_dir(daemon.state_root().join(kind)).unwrap().collect();
        assert!(left.is_empty(), "{kind} records left: {left:?}");
    }
}
