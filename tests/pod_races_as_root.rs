//! CreateContainer racing StopPodSandbox on one pod: whichever comes first, a stopped pod
//! never holds a container that is created or running.

mod common;

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

const ROUNDS: usize = 8;

#[tokio::test(flavor = "multi_thread")]
async fn a_create_racing_a_pod_stop_leaves_nothing_running() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let (mut refused, mut stopped) = (0, 0);
    for n in 0..ROUNDS {
        let pod_config = sandbox_config(&format!("race-{n}"), &logs);
        let pod = run_sandbox(&daemon, pod_config.clone()).await;
        let (mut creator, mut stopper) = (daemon.runtime().await, daemon.runtime().await);
        let create = creator.create_container(cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(container_config("c", &["sleep", "600"])),
            sandbox_config: Some(pod_config.clone()),
        });
        let stop = stopper.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() });
        let (created, stop) = tokio::join!(create, stop);
        stop.expect("StopPodSandbox");
        match created {
            Ok(_) => stopped += 1,
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
                refused += 1;
            }
        }
        let mut rt = daemon.runtime().await;
        let filter = cri::ContainerFilter { pod_sandbox_id: pod.clone(), ..Default::default() };
        let listed = rt.list_containers(cri::ListContainersRequest { filter: Some(filter) }).await.unwrap();
        for c in listed.into_inner().containers {
            assert_eq!(c.state, cri::ContainerState::ContainerExited as i32, "container {} in a stopped pod", c.id);
        }
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    }
    eprintln!("{ROUNDS} races: {stopped} creates first (then stopped), {refused} refused after the stop");
    assert!(mounts_under(daemon.dir.path()).is_empty(), "{:?}", mounts_under(daemon.dir.path()));
}
