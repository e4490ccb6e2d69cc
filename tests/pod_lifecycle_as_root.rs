//! A pod and its containers through their whole life on real runc: exit codes, CRI logs,
//! stop escalation, ExecSync, and nothing left behind.

mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

#[tokio::test(flavor = "multi_thread")]
async fn lifecycle_logs_exit_codes_and_cleanup() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("web", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    // The same request again (kubelet retrying) gets the same sandbox.
    assert_eq!(run_sandbox(&daemon, pod_config.clone()).await, pod);

    let id = start(
        &daemon,
        &pod,
        &pod_config,
        container_config("job", &["sh", "-c", "echo hello; echo oops >&2; hostname; exit 3"]),
    )
    .await;
    let exited = wait_exited(&daemon, &id, Duration::from_secs(20)).await;
    assert_eq!(exited.exit_code, 3);
    assert_eq!(exited.reason, "Error");
    assert!(exited.started_at > 0 && exited.finished_at >= exited.started_at);
    // It has a PID namespace of its own: the exit was recorded before the runtime's delete,
    // whose success the monitor then marks beside the record.
    let mark = daemon.state_root().join("containers").join(&id).join("runtime-deleted");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mark.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(mark.exists(), "the monitor marks its done delete: {}", mark.display());
    let log = std::fs::read_to_string(logs.join("job.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let stream_line = |stream: &str, text: &str| lines.iter().any(|l| l.ends_with(&format!(" {stream} F {text}")));
    assert!(stream_line("stdout", "hello"), "{log}");
    assert!(stream_line("stderr", "oops"), "{log}");
    assert!(stream_line("stdout", "web"), "the pod's hostname: {log}");
    for line in &lines {
        let ts = line.split(' ').next().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "timestamp {ts}");
    }

    // A long-running container: ExecSync, then stop with escalation.
    let sleeper = start(
        &daemon,
        &pod,
        &pod_config,
        container_config("sleeper", &["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]),
    )
    .await;
    let out = exec(&daemon, &sleeper, &["sh", "-c", "echo out; echo err >&2; exit 7"], 10).await.unwrap();
    assert_eq!((out.stdout.as_slice(), out.stderr.as_slice(), out.exit_code), (&b"out\n"[..], &b"err\n"[..], 7));
    let started = Instant::now();
    let err = exec(&daemon, &sleeper, &["sh", "-c", "sleep 30 & sleep 30"], 1).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded);
    assert!(started.elapsed() < Duration::from_secs(10));
    let started = Instant::now();
    daemon
        .runtime()
        .await
        .stop_container(cri::StopContainerRequest { container_id: sleeper.clone(), timeout: 1 })
        .await
        .unwrap();
    let stopped = status(&daemon, &sleeper).await;
    assert_eq!(stopped.state, cri::ContainerState::ContainerExited as i32);
    assert_eq!(stopped.exit_code, 137, "SIGKILL after the ignored SIGTERM");
    assert!(started.elapsed() >= Duration::from_secs(1), "waited for the timeout");
    // Stop is idempotent.
    daemon
        .runtime()
        .await
        .stop_container(cri::StopContainerRequest { container_id: sleeper.clone(), timeout: 1 })
        .await
        .unwrap();

    let listed =
        daemon.runtime().await.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.containers.len(), 2);

    // The image is in use: RemoveImage refuses.
    let err = daemon
        .images()
        .await
        .remove_image(cri::RemoveImageRequest {
            image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);

    // Remove everything: no mounts, no records, no cgroups, no monitors left.
    let mut rt = daemon.runtime().await;
    rt.remove_container(cri::RemoveContainerRequest { container_id: id.clone() }).await.unwrap();
    rt.remove_container(cri::RemoveContainerRequest { container_id: id.clone() }).await.unwrap();
    rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    assert!(rt
        .list_containers(cri::ListContainersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .containers
        .is_empty());
    assert!(rt.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await.unwrap().into_inner().items.is_empty());
    assert_eq!(mounts_under(daemon.dir.path()), Vec::<String>::new());
    let hierarchies: &[&str] = if common::node::probe().cgroup_v2 { &[""] } else { &["memory", "pids", "cpu"] };
    for hierarchy in hierarchies {
        let dir = std::path::Path::new("/sys/fs/cgroup").join(hierarchy).join("swapcri").join(&pod);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    let ps = std::process::Command::new("ps").args(["-eo", "pid,ppid,stat,args"]).output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    let dir = daemon.dir.path().display().to_string();
    // Zombies the daemon left unreaped are its children; one reparented to the node's init is
    // the init's to reap (some inits reap late).
    let daemon_pid = daemon.pid().to_string();
    let leftovers: Vec<&str> = ps
        .lines()
        .filter(|l| {
            let ppid = l.split_whitespace().nth(1).unwrap_or_default();
            (l.contains(" monitor ") || l.contains("sandbox-ns")) && l.contains(&dir)
                || l.contains("<defunct>") && ppid == daemon_pid
        })
        .collect();
    assert!(leftovers.is_empty(), "processes left: {leftovers:#?}");
    daemon
        .images()
        .await
        .remove_image(cri::RemoveImageRequest {
            image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        })
        .await
        .unwrap();
}
