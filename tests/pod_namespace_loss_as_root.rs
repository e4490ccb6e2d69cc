//! A pod whose PID-namespace holder is killed from outside: NotReady, with the reason in the
//! verbose pod status and the log, its containers exited (those in the
//! pod's PID namespace and those in their own), no new container in it; and the same when
//! the holder dies while the daemon is down. The bound here only tells a watch from none
//! (nothing else ever turns the pod NotReady); benches/holder_loss.rs measures the latency.

mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::{require_root, scaled, Daemon};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use swapcri::cri;

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_whose_holder_is_killed_is_not_ready_at_once() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = with_pod_pid_namespace(sandbox_config("holderless", &logs));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let shared =
        start(&daemon, &pod, &pod_config, in_pod_pid_namespace(container_config("shared", &["sleep", "1000"]))).await;
    let own = start(&daemon, &pod, &pod_config, container_config("own", &["sleep", "1000"])).await;
    assert_eq!(verbose_pod_status(&daemon, &pod).await.0, cri::PodSandboxState::SandboxReady as i32);

    let holder = holder_pid(&daemon, &pod).await;
    kill(Pid::from_raw(holder), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    let within = scaled(Duration::from_secs(5));
    let (state, info) = loop {
        let (state, info) = verbose_pod_status(&daemon, &pod).await;
        if state == cri::PodSandboxState::SandboxNotready as i32 || killed.elapsed() > within {
            break (state, info);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let noticed = killed.elapsed();
    eprintln!("NotReady {noticed:?} after the holder was killed");
    assert_eq!(state, cri::PodSandboxState::SandboxNotready as i32, "the pod lost its PID namespace");
    assert!(noticed < within, "NotReady {noticed:?} after the holder was killed");
    let reason = info["notReadyReason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("PID namespace holder (pid {holder}) exited")), "{info}");
    assert!(info["pidNamespaceHolder"].is_null(), "{info}");

    // Both containers end: the kernel kills the pod's PID namespace, swapcri the other one.
    for id in [&shared, &own] {
        let left = within.saturating_sub(killed.elapsed());
        wait_exited(&daemon, id, left.max(Duration::from_millis(200))).await;
    }
    eprintln!("both containers exited {:?} after the holder was killed", killed.elapsed());
    assert!(daemon.log().contains(&format!("PID namespace holder (pid {holder}) exited")), "logged");

    let refused = daemon
        .runtime()
        .await
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(container_config("late", &["true"])),
            sandbox_config: Some(pod_config.clone()),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused:?}");

    // kubelet's next steps work as for any pod: stop, then remove.
    let mut rt = daemon.runtime().await;
    rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    assert!(mounts_under(daemon.dir.path()).is_empty(), "{:?}", mounts_under(daemon.dir.path()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_holder_lost_while_the_daemon_is_down_is_found_at_start() {
    require_root();
    let mut daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = with_pod_pid_namespace(sandbox_config("lost-holder", &logs));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let shared =
        start(&daemon, &pod, &pod_config, in_pod_pid_namespace(container_config("shared", &["sleep", "1000"]))).await;
    let holder = holder_pid(&daemon, &pod).await;

    daemon.stop_with(Signal::SIGKILL);
    kill(Pid::from_raw(holder), Signal::SIGKILL).unwrap();
    daemon.restart();

    let (state, info) = verbose_pod_status(&daemon, &pod).await;
    assert_eq!(state, cri::PodSandboxState::SandboxNotready as i32);
    assert!(info["notReadyReason"].as_str().unwrap_or_default().contains("while swapcri was not running"), "{info}");
    assert_eq!(wait_exited(&daemon, &shared, Duration::from_secs(5)).await.exit_code, 137);
    let mut rt = daemon.runtime().await;
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    assert!(mounts_under(daemon.dir.path()).is_empty(), "{:?}", mounts_under(daemon.dir.path()));
}
