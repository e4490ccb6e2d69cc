//! CRI statistics of running containers on the node the test runs on: swap figures where the
//! memory controller is on cgroup v2, none where it is on v1 (the VM tests also check swap
//! against a container that really swaps).

mod common;

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

#[tokio::test(flavor = "multi_thread")]
async fn stats_of_running_containers_and_pods() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("stats", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    // One container burns CPU and writes to its writable layer; one sleeps.
    let busy = start(
        &daemon,
        &pod,
        &pod_config,
        container_config("busy", &["sh", "-c", "head -c 3000000 /dev/zero > /blob; while :; do :; done"]),
    )
    .await;
    let idle = start(&daemon, &pod, &pod_config, container_config("idle", &["sleep", "60"])).await;
    let mut rt = daemon.runtime().await;
    let list = |rt: &mut swapcri::cri::runtime_service_client::RuntimeServiceClient<_>| {
        let mut rt = rt.clone();
        async move {
            rt.list_container_stats(cri::ListContainerStatsRequest { filter: None }).await.unwrap().into_inner().stats
        }
    };
    let first = list(&mut rt).await;
    assert_eq!(first.len(), 2);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let second = list(&mut rt).await;
    let find = |stats: &[cri::ContainerStats], id: &str| {
        stats.iter().find(|s| s.attributes.as_ref().unwrap().id == id).cloned().unwrap()
    };
    let b = find(&second, &busy);
    assert_eq!(b.attributes.as_ref().unwrap().metadata.as_ref().unwrap().name, "busy");
    // Pressure stall information where the node has it (cgroup v2 with PSI), else unset
    // rather than zero; a busy loop in its own cgroup shows CPU pressure there.
    let psi = facts_psi();
    assert_eq!(b.cpu.as_ref().unwrap().psi.is_some(), psi, "{:?}", b.cpu);
    assert_eq!(b.memory.as_ref().unwrap().psi.is_some(), psi, "{:?}", b.memory);
    assert_eq!(b.io.as_ref().is_some_and(|io| io.psi.is_some()), psi, "{:?}", b.io);
    let cpu = b.cpu.unwrap();
    let cores = cpu.usage_nano_cores.expect("rate from the previous sample").value;
    assert!(cores > 300_000_000, "a busy loop uses most of a core: {cores}");
    assert!(cpu.usage_core_nano_seconds.unwrap().value > 0);
    let memory = b.memory.unwrap();
    assert!(memory.working_set_bytes.unwrap().value > 0);
    assert!(memory.usage_bytes.unwrap().value >= memory.working_set_bytes.unwrap().value);
    // A listing reports the writable layer as walked in the background (at most 10 s old);
    // the stats of one container walk it now.
    let one = rt
        .container_stats(cri::ContainerStatsRequest { container_id: busy.clone() })
        .await
        .unwrap()
        .into_inner()
        .stats
        .unwrap();
    let layer = one.writable_layer.unwrap();
    assert!(layer.used_bytes.unwrap().value >= 3_000_000, "{layer:?}");
    assert!(layer.inodes_used.unwrap().value >= 2);
    let facts = common::node::probe();
    if facts.cgroup_v2 && facts.swap_accounting {
        let swap = b.swap.as_ref().expect("swap figures on cgroup v2");
        assert!(swap.swap_usage_bytes.is_some(), "{swap:?}");
    } else {
        assert!(b.swap.is_none(), "cgroup v1 memory: no swap figures");
    }
    let i = find(&second, &idle);
    assert!(i.cpu.unwrap().usage_nano_cores.unwrap().value < cores);

    // Filters and single lookups.
    let filtered = rt
        .list_container_stats(cri::ListContainerStatsRequest {
            filter: Some(cri::ContainerStatsFilter { id: idle.clone(), ..Default::default() }),
        })
        .await
        .unwrap()
        .into_inner()
        .stats;
    assert_eq!(filtered.len(), 1);
    let one = rt.container_stats(cri::ContainerStatsRequest { container_id: busy.clone() }).await.unwrap().into_inner();
    assert_eq!(one.stats.unwrap().attributes.unwrap().id, busy);

    let pods = rt.list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest { filter: None }).await.unwrap().into_inner();
    assert_eq!(pods.stats.len(), 1);
    let linux = pods.stats[0].linux.clone().unwrap();
    assert_eq!(linux.containers.len(), 2);
    assert!(linux.memory.unwrap().working_set_bytes.unwrap().value > 0, "pod cgroup memory");
    // What kubelet takes from the CRI alone for a runtime cAdvisor has no plugin for: the
    // pod's process count and its network (here loopback only, which is left out).
    let process = linux.process.expect("the pod's processes");
    assert!(process.process_count.unwrap().value >= 2, "two running containers: {process:?}");
    let network = linux.network.expect("the pod's network");
    assert!(network.interfaces.iter().all(|i| i.name != "lo"), "{network:?}");
    let pod_one = rt.pod_sandbox_stats(cri::PodSandboxStatsRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    assert_eq!(pod_one.into_inner().stats.unwrap().attributes.unwrap().id, pod);
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}

/// The node reports pressure per cgroup: cgroup v2 with PSI enabled in the kernel.
fn facts_psi() -> bool {
    common::node::probe().cgroup_v2 && std::path::Path::new("/proc/pressure/cpu").exists()
}
