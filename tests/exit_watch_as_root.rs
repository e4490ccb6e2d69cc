//! ListContainers and ContainerStatus answer from the records the exit watch keeps current:
//! during a burst of exits every container listed as exited has the exit its monitor
//! recorded, and they all end up exited with their own codes, list and status agreeing; a
//! container killed while the daemon is stopped is listed as exited by the first list after
//! the restart; one whose monitor is killed turns Unknown.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::pods::*;
use common::{require_root, Daemon};
use nix::sys::signal::Signal;
use swapcri::cri;

async fn list(daemon: &Daemon) -> Vec<cri::Container> {
    daemon.runtime().await.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner().containers
}

/// The exit code the monitor recorded for a container, when it has.
fn recorded_exit(daemon: &Daemon, id: &str) -> Option<i64> {
    let text = std::fs::read(daemon.state_root().join("containers").join(id).join("exit.json")).ok()?;
    serde_json::from_slice::<serde_json::Value>(&text).ok()?["exit_code"].as_i64()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_list_during_a_burst_of_exits_gives_each_container_its_true_state() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("burst", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let mut codes = HashMap::new();
    for i in 0..12 {
        // All of them end within a few hundred milliseconds of each other.
        let command = format!("sleep 1.{i}; exit {}", 10 + i);
        let id = start(&daemon, &pod, &pod_config, container_config(&format!("c{i}"), &["sh", "-c", &command])).await;
        codes.insert(id, 10 + i);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut lists, mut exited_seen) = (0, 0);
    loop {
        let containers = list(&daemon).await;
        lists += 1;
        assert_eq!(containers.len(), codes.len());
        let mut exited = 0;
        for c in &containers {
            if c.state == cri::ContainerState::ContainerExited as i32 {
                exited += 1;
                let status = status(&daemon, &c.id).await;
                assert_eq!(status.state, c.state, "{}: status and list agree", c.id);
                assert_eq!(status.exit_code, codes[&c.id], "{}: its own exit code", c.id);
                assert_eq!(
                    recorded_exit(&daemon, &c.id),
                    Some(codes[&c.id] as i64),
                    "{}: listed exited as recorded",
                    c.id
                );
            } else {
                assert_eq!(c.state, cri::ContainerState::ContainerRunning as i32, "{}: running or exited", c.id);
            }
        }
        exited_seen = exited_seen.max(exited);
        if exited == codes.len() {
            break;
        }
        assert!(Instant::now() < deadline, "{exited} of {} exited after 30 s", codes.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("{lists} lists during the burst");
    daemon.runtime().await.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn exits_while_the_daemon_is_stopped_and_lost_monitors_are_seen() {
    require_root();
    let mut daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("away", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let killed = start(&daemon, &pod, &pod_config, container_config("killed", &["sleep", "600"])).await;
    let orphaned = start(&daemon, &pod, &pod_config, container_config("orphaned", &["sleep", "600"])).await;
    let pid = container_pid(&daemon, &killed).await;

    daemon.stop_with(Signal::SIGTERM);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
    // The monitor records the exit while the daemon is away.
    let recorded = Instant::now() + Duration::from_secs(10);
    while recorded_exit(&daemon, &killed).is_none() {
        assert!(Instant::now() < recorded, "the monitor recorded no exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.restart();
    let first = list(&daemon).await;
    let listed = first.iter().find(|c| c.id == killed).unwrap();
    assert_eq!(listed.state, cri::ContainerState::ContainerExited as i32, "the first list after the restart");
    assert_eq!(status(&daemon, &killed).await.exit_code, 137);

    // A monitor killed outright records nothing: its end alone turns the container Unknown.
    let verbose = daemon
        .runtime()
        .await
        .container_status(cri::ContainerStatusRequest { container_id: orphaned.clone(), verbose: true })
        .await
        .unwrap()
        .into_inner();
    let info: serde_json::Value = serde_json::from_str(&verbose.info["info"]).unwrap();
    let monitor = info["monitor"]["pid"].as_i64().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(monitor as i32), Signal::SIGKILL).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let c = list(&daemon).await.into_iter().find(|c| c.id == orphaned).unwrap();
        if c.state == cri::ContainerState::ContainerUnknown as i32 {
            break;
        }
        assert!(Instant::now() < deadline, "still {:?} 15 s after its monitor was killed", c.state);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.runtime().await.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}
