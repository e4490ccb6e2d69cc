//! kill -9 of the daemon with containers running: after a restart everything is listed as
//! before, running containers still run, exits that happened meanwhile are recorded, logs
//! have no gap, and half-created leftovers are cleaned up.

mod common;

use std::time::Duration;

use common::pods::*;
use common::{require_root, Daemon};
use nix::sys::signal::Signal;
use swapcri::cri;

#[tokio::test(flavor = "multi_thread")]
async fn containers_survive_a_daemon_crash() {
    require_root();
    let mut daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("survivor", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let counter = start(
        &daemon,
        &pod,
        &pod_config,
        container_config("counter", &["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done"]),
    )
    .await;
    let short = start(&daemon, &pod, &pod_config, container_config("short", &["sh", "-c", "sleep 2; exit 42"])).await;
    let created = {
        let mut rt = daemon.runtime().await;
        rt.create_container(cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(container_config("idle", &["true"])),
            sandbox_config: Some(pod_config.clone()),
        })
        .await
        .unwrap()
        .into_inner()
        .container_id
    };
    let before_containers =
        daemon.runtime().await.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner();
    let counter_pid = container_pid(&daemon, &counter).await;

    daemon.stop_with(Signal::SIGKILL);
    // While the daemon is down, the short container exits, and a crash leaves a
    // half-created container behind.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let half = "f".repeat(64);
    std::fs::create_dir_all(daemon.state_root().join("containers").join(&half)).unwrap();
    let broken = "e".repeat(64);
    std::fs::create_dir_all(daemon.state_root().join("containers").join(&broken)).unwrap();
    std::fs::write(
        daemon.state_root().join("containers").join(&broken).join("meta.json"),
        b"{\"version\":1,\"data\":{}}",
    )
    .unwrap();
    std::fs::create_dir_all(daemon.dir.path().join("run/containers").join(&half).join("rootfs")).unwrap();
    daemon.restart();

    let after =
        daemon.runtime().await.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner();
    assert_eq!(after.containers.len(), 3);
    let ids = |l: &cri::ListContainersResponse| {
        let mut v: Vec<String> = l.containers.iter().map(|c| c.id.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&after), ids(&before_containers));
    let counter_status = status(&daemon, &counter).await;
    assert_eq!(counter_status.state, cri::ContainerState::ContainerRunning as i32, "still running");
    assert!(std::path::Path::new(&format!("/proc/{counter_pid}")).exists(), "the same process");
    let short_status = status(&daemon, &short).await;
    assert_eq!(short_status.state, cri::ContainerState::ContainerExited as i32);
    assert_eq!(short_status.exit_code, 42, "exit recorded while the daemon was away");
    assert_eq!(status(&daemon, &created).await.state, cri::ContainerState::ContainerCreated as i32);
    let sandboxes =
        daemon.runtime().await.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await.unwrap().into_inner();
    assert_eq!(sandboxes.items.len(), 1);
    assert_eq!(sandboxes.items[0].state, cri::PodSandboxState::SandboxReady as i32);
    assert!(!daemon.state_root().join("containers").join(&half).exists(), "half-created container cleaned");
    assert!(!daemon.dir.path().join("run/containers").join(&half).exists());
    assert!(
        daemon.state_root().join("containers").join(format!("{broken}.corrupt")).exists(),
        "unreadable record kept aside"
    );

    // The counter's log has no gap across the crash; exec and start still work.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = std::fs::read_to_string(logs.join("counter.log")).unwrap();
    let ticks: Vec<u32> = log.lines().filter_map(|l| l.rsplit(' ').next()?.parse().ok()).collect();
    assert!(ticks.len() > 20, "{} ticks", ticks.len());
    assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "gap in the log: {ticks:?}");
    assert_eq!(exec(&daemon, &counter, &["echo", "alive"], 10).await.unwrap().stdout, b"alive\n");
    daemon.runtime().await.start_container(cri::StartContainerRequest { container_id: created.clone() }).await.unwrap();
    assert_eq!(wait_exited(&daemon, &created, Duration::from_secs(10)).await.exit_code, 0);

    daemon.runtime().await.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    assert!(mounts_under(daemon.dir.path()).is_empty());
}

/// The processes whose command line is swapcri's namespace helper for `pod`.
fn holders_of(pod: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.starts_with("swapcri\0sandbox-ns\0") && cmdline.contains(pod)
        })
        .filter(|pid| !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z "))
        .collect()
}

/// The RecordsReadable condition of Status: (status, message).
async fn records_condition(daemon: &Daemon) -> (bool, String) {
    let status = daemon.runtime().await.status(cri::StatusRequest { verbose: false }).await.unwrap().into_inner();
    let conditions = status.status.unwrap().conditions;
    let condition =
        conditions.into_iter().find(|c| c.r#type == "RecordsReadable").expect("a RecordsReadable condition");
    (condition.status, condition.message)
}

fn quarantine(daemon: &Daemon, args: &[&str]) -> String {
    let out = daemon.command().arg("quarantine").args(args).output().unwrap();
    assert!(out.status.success(), "quarantine {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Half-writes the pod's status record while the daemon is down; returns the whole bytes.
fn tear_status(daemon: &mut Daemon, pod: &str) -> Vec<u8> {
    daemon.stop_with(Signal::SIGKILL);
    let status_file = daemon.state_root().join("sandboxes").join(pod).join("status.json");
    let bytes = std::fs::read(&status_file).unwrap();
    std::fs::write(&status_file, &bytes[..bytes.len() / 2]).unwrap();
    daemon.restart();
    bytes
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_whose_record_is_unreadable_runs_on_until_adopted_or_released() {
    require_root();
    let mut daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = with_pod_pid_namespace(sandbox_config("lost", &logs));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let sleeper = in_pod_pid_namespace(container_config("sleeper", &["sleep", "1000"]));
    let sleeper = start(&daemon, &pod, &pod_config, sleeper).await;
    let pid = container_pid(&daemon, &sleeper).await;
    assert_eq!(holders_of(&pod).len(), 1, "the pod's PID namespace has a holder");
    let pod_run_dir = daemon.dir.path().join("run/sandboxes").join(&pod);
    let mounts = mounts_under(&pod_run_dir);
    assert!(!mounts.is_empty());
    assert!(records_condition(&daemon).await.0);

    let whole = tear_status(&mut daemon, &pod);
    let (pods, containers) = listed(&daemon).await;
    assert!(pods.is_empty() && containers.is_empty(), "{pods:?} {containers:?}");
    let aside = daemon.state_root().join("sandboxes").join(format!("{pod}.corrupt"));
    assert!(aside.exists(), "record kept aside");
    assert!(daemon.log().contains("unreadable sandbox record"), "logged");
    let (readable, message) = records_condition(&daemon).await;
    assert!(!readable && message.contains(&pod) && message.contains(&sleeper), "{message}");
    assert_eq!(holders_of(&pod).len(), 1, "the holder is left alone");
    assert_eq!(mounts_under(&pod_run_dir), mounts, "and the pinned namespaces");
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "and the container");
    assert!(quarantine(&daemon, &["list"]).contains(&pod));

    // Repaired, adopted and picked up by a restart: listed again, the container untouched.
    std::fs::write(aside.join("status.json"), &whole).unwrap();
    assert!(quarantine(&daemon, &["adopt", &pod[..12]]).contains("adopted"));
    daemon.stop_with(Signal::SIGTERM);
    daemon.restart();
    assert_eq!(verbose_pod_status(&daemon, &pod).await.0, cri::PodSandboxState::SandboxReady as i32);
    assert_eq!(status(&daemon, &sleeper).await.state, cri::ContainerState::ContainerRunning as i32);
    assert_eq!(container_pid(&daemon, &sleeper).await, pid, "the same process");
    assert!(records_condition(&daemon).await.0);

    // Unreadable again, then released: the next start takes down what the pod held.
    tear_status(&mut daemon, &pod);
    assert!(quarantine(&daemon, &["release", &pod]).contains("released"));
    daemon.stop_with(Signal::SIGTERM);
    daemon.restart();
    assert!(holders_of(&pod).is_empty(), "the holder is stopped");
    assert!(mounts_under(&pod_run_dir).is_empty() && !pod_run_dir.exists(), "pinned namespaces unmounted");
    let gone = || !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    assert!(gone(), "the container is stopped");
    assert!(records_condition(&daemon).await.0, "nothing is kept aside");
    assert!(quarantine(&daemon, &["list"]).is_empty());
    assert!(listed(&daemon).await.1.is_empty(), "its container went with it");
    assert!(mounts_under(daemon.dir.path()).is_empty(), "{:?}", mounts_under(daemon.dir.path()));
}
