//! A call whose client gives up (a deadline that passes, as kubelet's does under load) ends
//! the client's wait, not the work: the pod or container is made whole, kubelet's retry with
//! the same name gets it, a pod stop cut short still leaves the pod NotReady (never Ready
//! without its namespaces), and removing it through the CRI leaves nothing behind.

mod common;

use std::time::Duration;

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

/// Deadlines from "gone before the handler starts" to "gone half way through".
const DEADLINES_MS: [u64; 8] = [1, 2, 5, 10, 20, 40, 80, 160];

/// Waits until `done` says the work of a call cut short is there; false if it never comes.
/// Only a call whose request never wholly reached the daemon (the client's timer fired
/// before its message was sent, as a 1 ms deadline on a loaded node allows) may show that:
/// the tests below then check that nothing was half made, and that most calls did finish.
async fn appeared<Fut: std::future::Future<Output = bool>>(mut done: impl FnMut() -> Fut) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done().await {
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Whether the call ended before its answer: at its deadline, or at the client's own timer
/// (Cancelled), which may end the wait first.
fn cut_short<T>(answer: &Result<T, tonic::Status>) -> bool {
    let Err(status) = answer else { return false };
    assert!(matches!(status.code(), tonic::Code::DeadlineExceeded | tonic::Code::Cancelled), "{status:?}");
    true
}

async fn ready_pods_named(daemon: &Daemon, name: &str) -> bool {
    let pods = daemon.runtime().await.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await.unwrap();
    let ready = cri::PodSandboxState::SandboxReady as i32;
    pods.into_inner().items.iter().any(|p| p.state == ready && p.metadata.as_ref().is_some_and(|m| m.name == name))
}

async fn has_containers(daemon: &Daemon, pod: &str) -> bool {
    let filter = cri::ContainerFilter { pod_sandbox_id: pod.into(), ..Default::default() };
    let listed = daemon.runtime().await.list_containers(cri::ListContainersRequest { filter: Some(filter) }).await;
    !listed.unwrap().into_inner().containers.is_empty()
}

fn with_deadline<T>(message: T, ms: u64) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(Duration::from_millis(ms));
    request
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_past_their_deadline_still_finish_their_work() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let mut rt = daemon.runtime().await;
    let (mut cuts, mut finished) = (0, 0);
    for (n, ms) in DEADLINES_MS.into_iter().enumerate() {
        let pod_config = with_pod_pid_namespace(sandbox_config(&format!("cancelled-{n}"), &logs));
        let run = cri::RunPodSandboxRequest { config: Some(pod_config.clone()), runtime_handler: String::new() };
        let first = rt.run_pod_sandbox(with_deadline(run, ms)).await;
        if cut_short(&first) {
            cuts += 1;
            let name = format!("cancelled-{n}");
            finished += appeared(|| ready_pods_named(&daemon, &name)).await as usize;
        }
        // kubelet retries with the same config: it gets the pod the first call made.
        let pod = run_sandbox(&daemon, pod_config.clone()).await;
        if let Ok(answer) = first {
            assert_eq!(answer.into_inner().pod_sandbox_id, pod);
        }
        let create = cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(container_config("c", &["sleep", "600"])),
            sandbox_config: Some(pod_config.clone()),
        };
        let first = rt.create_container(with_deadline(create.clone(), ms)).await;
        if cut_short(&first) {
            cuts += 1;
            finished += appeared(|| has_containers(&daemon, &pod)).await as usize;
        }
        let container = rt.create_container(create).await.expect("CreateContainer again").into_inner().container_id;
        if let Ok(answer) = first {
            assert_eq!(answer.into_inner().container_id, container);
        }
        rt.start_container(cri::StartContainerRequest { container_id: container.clone() }).await.unwrap();
    }
    assert!(cuts > 0, "no call was cut short: the deadlines were too long to test anything");
    // The longer deadlines end after the request is in: their work must be done.
    assert!(finished > 0, "none of {cuts} calls cut short finished its work");

    // One pod per name, one running container per pod: nothing half made, nothing twice.
    let pods = rt.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await.unwrap().into_inner().items;
    assert_eq!(pods.len(), DEADLINES_MS.len());
    assert!(pods.iter().all(|p| p.state == cri::PodSandboxState::SandboxReady as i32));
    let containers = rt.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap().into_inner();
    assert_eq!(containers.containers.len(), DEADLINES_MS.len());
    assert!(containers.containers.iter().all(|c| c.state == cri::ContainerState::ContainerRunning as i32));

    let (stop_cuts, stops_finished) = stop_with_deadlines(&daemon, &pods).await;
    eprintln!(
        "{} of {} calls ended at their deadline; {} of them finished their work",
        cuts + stop_cuts,
        DEADLINES_MS.len() * 3,
        finished + stops_finished
    );
    for pod in pods {
        rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.id.clone() }).await.unwrap();
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod.id }).await.unwrap();
    }
    assert!(mounts_under(daemon.dir.path()).is_empty(), "{:?}", mounts_under(daemon.dir.path()));
    let left = std::fs::read_dir(daemon.state_root().join("containers")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "container records left");
}

/// A StopPodSandbox cut short still ends with the pod NotReady: never a Ready pod whose
/// PID-namespace holder and namespaces are gone. Returns how many stops were cut short and
/// how many of those were seen through.
async fn stop_with_deadlines(daemon: &Daemon, pods: &[cri::PodSandbox]) -> (usize, usize) {
    let (mut cuts, mut finished) = (0, 0);
    for (pod, ms) in pods.iter().zip(DEADLINES_MS) {
        let stop = cri::StopPodSandboxRequest { pod_sandbox_id: pod.id.clone() };
        if cut_short(&daemon.runtime().await.stop_pod_sandbox(with_deadline(stop, ms)).await) {
            cuts += 1;
            let not_ready = cri::PodSandboxState::SandboxNotready as i32;
            if appeared(|| async { verbose_pod_status(daemon, &pod.id).await.0 == not_ready }).await {
                finished += 1;
            } else {
                // The stop never reached the daemon: the pod is whole, its holder alive.
                let holder = holder_pid(daemon, &pod.id).await;
                assert!(std::path::Path::new(&format!("/proc/{holder}")).exists(), "a Ready pod lost its holder");
            }
        }
    }
    (cuts, finished)
}
