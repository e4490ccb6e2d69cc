//! The memory plan through the CRI on the node the test runs on: decided and shown on any
//! node; written into the cgroup v2 files, and read back, where the node has cgroup v2 and
//! swap; nothing swap-related written where the memory controller is on cgroup v1.

mod common;

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

const CONFIG: &str = "[swap]\nbehavior = \"LimitedSwap\"\n[memory_qos]\nthrottling_factor = 0.9\n";

use common::node::{self, meminfo};

async fn verbose_info(daemon: &Daemon, id: &str) -> serde_json::Value {
    let mut rt = daemon.runtime().await;
    let request = cri::ContainerStatusRequest { container_id: id.into(), verbose: true };
    let verbose = rt.container_status(request).await.unwrap().into_inner();
    serde_json::from_str(&verbose.info["info"]).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn plans_are_decided_shown_and_bad_annotations_refused() {
    require_root();
    let daemon = Daemon::start(CONFIG);
    import_busybox(&daemon);
    let mut rt = daemon.runtime().await;

    let status = rt.status(cri::StatusRequest { verbose: true }).await.unwrap().into_inner();
    let info: serde_json::Value = serde_json::from_str(&status.info["info"]).unwrap();
    assert_eq!(info["node"]["memory"]["mem_total"], meminfo("MemTotal"));
    assert_eq!(info["node"]["memory"]["swap_total"], meminfo("SwapTotal"));
    assert_eq!(info["swap"]["behavior"], "LimitedSwap");
    let facts = node::probe();
    assert_eq!(info["swap"]["limitsApplied"], facts.swap_limits_apply(), "{} on {facts:?}", info["swap"]);
    let why = info["swap"]["whyNot"].as_str().unwrap_or("");
    match (facts.cgroup_v2, facts.swap_total > 0) {
        (false, _) => assert!(why.contains("cgroup v1"), "{}", info["swap"]),
        (true, false) => assert!(why.contains("no swap"), "{}", info["swap"]),
        (true, true) => assert!(info["swap"]["whyNot"].is_null() || !facts.swap_accounting, "{}", info["swap"]),
    }

    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("plan", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let mut config = container_config("app", &["sleep", "30"]);
    config.annotations.insert("swapcri.io/memory-request".into(), "256Mi".into());
    let resources = config.linux.as_mut().unwrap().resources.get_or_insert_with(Default::default);
    resources.memory_limit_in_bytes = 512 << 20;
    resources.cpu_shares = 256;
    resources.unified.insert("memory.swap.max".into(), "0".into());
    let id = start(&daemon, &pod, &pod_config, config.clone()).await;
    let info = verbose_info(&daemon, &id).await;
    let plan = &info["memoryPlan"];
    assert_eq!(plan["qos_class"], "Burstable", "{plan}");
    assert_eq!(plan["request"]["low"], 256u64 << 20);
    assert_eq!(plan["request"]["source"], "annotation");
    assert_eq!(plan["limit"], 512u64 << 20);
    assert!(info["usage"]["memory"]["working_set_bytes"].as_u64().unwrap() > 0, "{}", info["usage"]);
    let spec = &info["runtimeSpec"]["linux"]["resources"];
    assert_eq!(spec["memory"]["limit"], 512u64 << 20);
    assert!(spec["memory"].get("swap").is_none(), "OCI memory.swap is memory plus swap: never used: {spec}");
    if facts.cgroup_v2 {
        // The plan's value, in the spec and in the kernel (whole pages).
        let planned = plan["swap_max"]["value"].as_str().expect("a swap decision on cgroup v2");
        assert_eq!(spec["unified"]["memory.swap.max"], planned, "{spec}");
        let cgroup = info["cgroup"].as_str().expect("the container's cgroup");
        let file = std::path::Path::new("/sys/fs/cgroup").join(cgroup.trim_start_matches('/')).join("memory.swap.max");
        let read = std::fs::read_to_string(&file).unwrap();
        let page_rounded = |v: &str| v.parse::<u64>().map(|b| (b / 4096 * 4096).to_string()).unwrap_or(v.to_string());
        assert_eq!(read.trim(), page_rounded(planned), "{}", file.display());
        assert_eq!(info["memoryMismatches"], serde_json::json!([]), "{info}");
    } else {
        assert_eq!(plan["swap_max"]["value"], serde_json::Value::Null);
        assert!(plan["swap_max"]["reason"].as_str().unwrap().contains("cgroup v1"), "{plan}");
        assert!(info["warnings"][0].as_str().unwrap().contains("memory.swap.max"), "{}", info["warnings"]);
        assert!(spec.get("unified").is_none(), "{spec}");
    }

    // Bad input: refused, nothing created.
    let mut bad = container_config("bad", &["true"]);
    bad.annotations.insert("swapcri.io/memory-request".into(), "a lot".into());
    let err = rt
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(bad),
            sandbox_config: Some(pod_config.clone()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("swapcri.io/memory-request"), "{}", err.message());
    let list = rt.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap().into_inner();
    assert_eq!(list.containers.len(), 1);

    // In-place resize recomputes the plan.
    let update = cri::LinuxContainerResources { memory_limit_in_bytes: 1 << 30, cpu_shares: 256, ..Default::default() };
    rt.update_container_resources(cri::UpdateContainerResourcesRequest {
        container_id: id.clone(),
        linux: Some(update),
        ..Default::default()
    })
    .await
    .unwrap();
    let info = verbose_info(&daemon, &id).await;
    assert_eq!(info["memoryPlan"]["limit"], 1u64 << 30);
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}

fn shm_options(daemon: &Daemon, pod: &str) -> String {
    let shm = daemon.dir.path().join("run/sandboxes").join(pod).join("shm");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let line = mounts.lines().find(|l| l.split(' ').nth(1) == Some(shm.to_str().unwrap())).expect("pod shm mounted");
    line.split(' ').nth(3).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn pod_tmpfs_is_kept_out_of_swap() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let mut rt = daemon.runtime().await;
    let status = rt.status(cri::StatusRequest { verbose: true }).await.unwrap().into_inner();
    let info: serde_json::Value = serde_json::from_str(&status.info["info"]).unwrap();
    let facts = node::probe();
    let noswap = &info["node"]["noswap"];
    if facts.kernel >= (6, 4) {
        // Decided by the version, no probe mount.
        assert_eq!(noswap["state"], "supported", "{noswap}");
        assert_eq!(noswap["decided_by"], "kernel-version");
    } else {
        assert_eq!(noswap["decided_by"], "mount-probe", "{noswap}");
    }
    let supported = noswap["state"] == "supported";

    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("shm", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let has_noswap = |options: String| options.split(',').any(|o| o == "noswap");
    assert_eq!(has_noswap(shm_options(&daemon, &pod)), supported, "{}", shm_options(&daemon, &pod));
    let id = start(&daemon, &pod, &pod_config, container_config("app", &["sleep", "30"])).await;
    let out = exec(&daemon, &id, &["cat", "/proc/mounts"], 10).await.unwrap();
    let mounts = String::from_utf8_lossy(&out.stdout).to_string();
    for target in ["/dev", "/dev/shm"] {
        let line = mounts.lines().find(|l| l.split(' ').nth(1) == Some(target)).unwrap();
        assert_eq!(line.contains("noswap"), supported, "{target}: {line}");
    }
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();

    // Forced off: no option.
    let off = Daemon::start("[runtime]\ntmpfs_noswap = \"off\"\n");
    let pod = run_sandbox(&off, sandbox_config("shm-off", &logs)).await;
    assert!(!shm_options(&off, &pod).contains("noswap"), "{}", shm_options(&off, &pod));
    off.runtime().await.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}
