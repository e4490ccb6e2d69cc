//! NRI through a real daemon and runc: a pre-installed plugin (examples/nri_swap_limiter)
//! sets swap and memory.high through the swap policy; a plugin that hangs is dropped after
//! the request timeout; one that dies mid-request fails that request only. Values the
//! policy applies only on cgroup v2 are asserted where the node has it.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::pods::*;
use common::{require_root, scaled, Daemon};
use swapcri::cri;
use swapcri::nri::api;
use swapcri::nri::stub::{Handler, Stub};

const MI: u64 = 1 << 20;

fn nri_config(dir: &std::path::Path, timeout_ms: u64, extra: &str) -> String {
    format!(
        "[swap]\nbehavior = \"LimitedSwap\"\n[nri]\nenable = true\nsocket_path = \"{d}/nri.sock\"\nplugin_path = \"{d}/plugins\"\nplugin_config_path = \"{d}/conf\"\nrequest_timeout_ms = {timeout_ms}\n{extra}",
        d = dir.display()
    )
}

async fn wait_for_log(daemon: &Daemon, needle: &str) {
    let deadline = Instant::now() + scaled(Duration::from_secs(20));
    while !daemon.log().contains(needle) {
        assert!(Instant::now() < deadline, "no {needle:?} in the log:\n{}", daemon.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn verbose_info(daemon: &Daemon, id: &str) -> serde_json::Value {
    let mut rt = daemon.runtime().await;
    let request = cri::ContainerStatusRequest { container_id: id.into(), verbose: true };
    let verbose = rt.container_status(request).await.unwrap().into_inner();
    serde_json::from_str(&verbose.info["info"]).unwrap()
}

async fn create(
    daemon: &Daemon,
    pod: &str,
    pod_config: &cri::PodSandboxConfig,
    config: cri::ContainerConfig,
) -> Result<String, tonic::Status> {
    let mut rt = daemon.runtime().await;
    let request = cri::CreateContainerRequest {
        pod_sandbox_id: pod.into(),
        config: Some(config),
        sandbox_config: Some(pod_config.clone()),
    };
    rt.create_container(request).await.map(|r| r.into_inner().container_id)
}

/// A Burstable container: 256 MiB request (annotation), 512 MiB limit.
fn burstable(name: &str, annotations: &[(&str, String)]) -> cri::ContainerConfig {
    let mut config = container_config(name, &["sleep", "30"]);
    config.annotations.insert("swapcri.io/memory-request".into(), "256Mi".into());
    for (k, v) in annotations {
        config.annotations.insert(k.to_string(), v.clone());
    }
    config.linux.as_mut().unwrap().resources.get_or_insert_with(Default::default).memory_limit_in_bytes = 512 << 20;
    config
}

fn example_plugin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_swapcri"));
    let path = bin.parent().unwrap().join("examples/nri_swap_limiter");
    assert!(path.exists(), "{} is missing: cargo test builds the examples (or cargo build --examples)", path.display());
    path
}

/// A daemon with the example plugin pre-installed and connected, and the busybox image.
async fn with_example_plugin() -> (tempfile::TempDir, Daemon) {
    let nri = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(nri.path().join("plugins")).unwrap();
    std::fs::copy(example_plugin(), nri.path().join("plugins/10-swap-limiter")).unwrap();
    let daemon = Daemon::start(&nri_config(nri.path(), 2000, ""));
    import_busybox(&daemon);
    wait_for_log(&daemon, "NRI plugin connected plugin=10-swap-limiter").await;
    (nri, daemon)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pre_installed_plugin_sets_swap_and_memory_high_through_the_swap_policy() {
    require_root();
    let (_nri, daemon) = with_example_plugin().await;
    let v2 = common::node::probe().cgroup_v2;

    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("nri", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    // Lowering swap to none and a memory.high above the request: allowed.
    let lowered = burstable(
        "lowered",
        &[("nri.swapcri.io/swap-max", "0".into()), ("nri.swapcri.io/memory-high", (300 * MI).to_string())],
    );
    let id = create(&daemon, &pod, &pod_config, lowered).await.expect("an adjustment the policy allows");
    let info = verbose_info(&daemon, &id).await;
    assert_eq!(info["nri"]["unified:memory.swap.max"], "10-swap-limiter", "{}", info["nri"]);
    assert_eq!(info["nri"]["unified:memory.high"], "10-swap-limiter", "{}", info["nri"]);
    let plan = &info["memoryPlan"];
    let spec = &info["runtimeSpec"]["linux"]["resources"];
    if v2 {
        assert_eq!(plan["swap_max"]["value"], "0", "{plan}");
        assert!(plan["swap_max"]["reason"].as_str().unwrap().contains("NRI plugin 10-swap-limiter"), "{plan}");
        assert_eq!(plan["high"]["value"], (300 * MI).to_string(), "{plan}");
        assert_eq!(spec["unified"]["memory.swap.max"], "0", "{spec}");
        assert_eq!(spec["unified"]["memory.high"], (300 * MI).to_string(), "{spec}");
    } else {
        let notes = plan["notes"].to_string();
        assert!(notes.contains("10-swap-limiter") && notes.contains("not applied"), "{plan}");
        assert!(spec.get("unified").is_none(), "{spec}");
    }
    let mut rt = daemon.runtime().await;
    rt.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.expect("StartContainer");

    // memory.high below the request: refused, nothing created.
    let low_high = burstable("low-high", &[("nri.swapcri.io/memory-high", (100 * MI).to_string())]);
    let err = create(&daemon, &pod, &pod_config, low_high).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("below the memory request"), "{}", err.message());
    // More swap than the policy gives: refused where the policy writes swap (cgroup v2).
    let raised = burstable("raised", &[("nri.swapcri.io/swap-max", (1u64 << 40).to_string())]);
    let result = create(&daemon, &pod, &pod_config, raised).await;
    if v2 {
        let err = result.unwrap_err();
        assert!(
            err.message().contains("above the swap policy") || err.message().contains("keeps off swap"),
            "{}",
            err.message()
        );
    } else {
        result.expect("checked and noted, not applied, on cgroup v1");
    }

    // Swap for a critical pod: refused on any node.
    let mut critical_config = sandbox_config("nri-critical", &logs);
    critical_config.annotations.insert("swapcri.io/critical".into(), "true".into());
    let critical = run_sandbox(&daemon, critical_config.clone()).await;
    let asks_swap = burstable("swapper", &[("nri.swapcri.io/swap-max", MI.to_string())]);
    let err = create(&daemon, &critical, &critical_config, asks_swap).await.unwrap_err();
    assert!(err.message().contains("critical pod"), "{}", err.message());
    let (_, containers) = listed(&daemon).await;
    // "lowered", and "raised" where it was only noted (cgroup v1).
    let expected = if v2 { 1 } else { 2 };
    assert_eq!(containers.len(), expected, "refused creates leave nothing: {containers:?}");
}

/// The kernel file a started container's cgroup holds.
async fn kernel_file(daemon: &Daemon, id: &str, file: &str) -> String {
    let info = verbose_info(daemon, id).await;
    let cgroup = info["cgroup"].as_str().expect("the container's cgroup").trim_start_matches('/').to_string();
    std::fs::read_to_string(std::path::Path::new("/sys/fs/cgroup").join(cgroup).join(file)).unwrap().trim().to_string()
}

/// What the kernel holds when the plugin lowers swap, and that what the policy refuses
/// (more swap than kubelet's share, swap for a Guaranteed or a critical pod) never reaches
/// it. Only a cgroup v2 node with swap writes swap: elsewhere there is nothing to read.
#[tokio::test(flavor = "multi_thread")]
async fn the_kernel_holds_only_what_the_swap_policy_lets_a_plugin_set() {
    require_root();
    if !common::node::probe().swap_limits_apply() {
        eprintln!("no swap limits on this node (cgroup v1, no swap or no swap accounting): nothing to read");
        return;
    }
    let (_nri, daemon) = with_example_plugin().await;
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("nri-kernel", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    // kubelet's share for this container, as the kernel holds it without a plugin.
    let plain = start(&daemon, &pod, &pod_config, burstable("plain", &[])).await;
    let share: u64 = kernel_file(&daemon, &plain, "memory.swap.max").await.parse().expect("a LimitedSwap share");
    assert!(share > MI, "share {share}");
    // Lowered: half the share, page-rounded, and none at all.
    let half = share / 2;
    let lowered =
        start(&daemon, &pod, &pod_config, burstable("half", &[("nri.swapcri.io/swap-max", half.to_string())])).await;
    assert_eq!(kernel_file(&daemon, &lowered, "memory.swap.max").await, (half / 4096 * 4096).to_string());
    let none = start(&daemon, &pod, &pod_config, burstable("none", &[("nri.swapcri.io/swap-max", "0".into())])).await;
    assert_eq!(kernel_file(&daemon, &none, "memory.swap.max").await, "0");
    // Raised past the share: refused, and nothing for the kernel to hold.
    let err = create(
        &daemon,
        &pod,
        &pod_config,
        burstable("raised", &[("nri.swapcri.io/swap-max", (share * 2).to_string())]),
    )
    .await
    .unwrap_err();
    assert!(err.message().contains("above the swap policy"), "{}", err.message());
    // Guaranteed: no swap of its own, and none the plugin could give it.
    let mut guaranteed = burstable("guaranteed", &[("swapcri.io/qos-class", "Guaranteed".into())]);
    guaranteed.annotations.remove("swapcri.io/memory-request");
    let g = start(&daemon, &pod, &pod_config, guaranteed.clone()).await;
    assert_eq!(kernel_file(&daemon, &g, "memory.swap.max").await, "0");
    guaranteed.metadata.as_mut().unwrap().name = "guaranteed-asks".into();
    guaranteed.annotations.insert("nri.swapcri.io/swap-max".into(), MI.to_string());
    let err = create(&daemon, &pod, &pod_config, guaranteed).await.unwrap_err();
    assert!(err.message().contains("a Guaranteed pod"), "{}", err.message());
    // A critical pod: no swap, and none the plugin could give it.
    let mut critical_config = sandbox_config("nri-kernel-critical", &logs);
    critical_config.annotations.insert("swapcri.io/critical".into(), "true".into());
    let critical = run_sandbox(&daemon, critical_config.clone()).await;
    let c = start(&daemon, &critical, &critical_config, burstable("critical", &[])).await;
    assert_eq!(kernel_file(&daemon, &c, "memory.swap.max").await, "0");
    let asks = burstable("critical-asks", &[("nri.swapcri.io/swap-max", MI.to_string())]);
    let err = create(&daemon, &critical, &critical_config, asks).await.unwrap_err();
    assert!(err.message().contains("critical pod"), "{}", err.message());
    let (_, containers) = listed(&daemon).await;
    assert_eq!(containers.len(), 5, "refused creates leave nothing: {containers:?}");
}

/// A plugin for the failure tests: CreateContainer hangs, or drops the connection.
struct Faulty {
    hang: bool,
    crash: tokio::sync::Notify,
}

#[async_trait]
impl Handler for Faulty {
    async fn configure(&self, _config: &str) -> Result<u32, String> {
        Ok(1 << (api::Event::CreateContainer as u32 - 1))
    }

    async fn create_container(
        &self,
        _pod: api::PodSandbox,
        _c: api::Container,
    ) -> Result<api::CreateContainerResponse, String> {
        if self.hang {
            tokio::time::sleep(Duration::from_secs(600)).await;
        }
        self.crash.notify_one();
        tokio::time::sleep(Duration::from_secs(600)).await;
        Ok(Default::default())
    }
}

/// Connects `handler` through a pipe the test can cut, as a plugin's death cuts its socket.
async fn connect_cuttable(socket: PathBuf, index: &str, name: &str, handler: Arc<Faulty>) -> Stub {
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    let mut runtime = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let cut = handler.clone();
    tokio::spawn(async move {
        let mut ours = ours;
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut ours, &mut runtime) => {}
            _ = cut.crash.notified() => {}
        }
    });
    Stub::start(theirs, index, name, handler).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_that_hangs_or_dies_fails_one_request_and_is_dropped() {
    require_root();
    let nri = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let metrics = format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n");
    // Long enough that a create's own work (slow under emulation) ends well within it.
    let timeout = scaled(Duration::from_secs(2));
    let daemon = Daemon::start(&nri_config(nri.path(), timeout.as_millis() as u64, &metrics));
    import_busybox(&daemon);
    let socket = nri.path().join("nri.sock");
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("nri-faults", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;

    for (index, name, hang) in [("20", "hanger", true), ("30", "crasher", false)] {
        let handler = Arc::new(Faulty { hang, crash: tokio::sync::Notify::new() });
        let stub = connect_cuttable(socket.clone(), index, name, handler).await;
        wait_for_log(&daemon, &format!("NRI plugin connected plugin={index}-{name}")).await;
        let started = Instant::now();
        let err = create(&daemon, &pod, &pod_config, container_config(name, &["sleep", "30"])).await.unwrap_err();
        let took = started.elapsed();
        let expected = if hang { tonic::Code::DeadlineExceeded } else { tonic::Code::Unavailable };
        assert_eq!(err.code(), expected, "{name}: {err:?}");
        assert!(err.message().contains(&format!("{index}-{name}")), "{}", err.message());
        if hang {
            assert!(took >= timeout && took < timeout + scaled(Duration::from_secs(3)), "{name}: {took:?}");
        } else {
            assert!(took < timeout, "a lost plugin fails at once, not at the timeout: {took:?}");
        }
        // The plugin is gone: the next create does not wait on it.
        let again = Instant::now();
        let id =
            create(&daemon, &pod, &pod_config, container_config(name, &["sleep", "30"])).await.expect("after the drop");
        assert!(again.elapsed() < scaled(Duration::from_secs(5)), "{:?}", again.elapsed());
        assert!(!id.is_empty());
        // The runtime lets the dropped plugin's connection go.
        let closed = tokio::time::timeout(scaled(Duration::from_secs(10)), stub.closed()).await;
        assert!(closed.is_ok(), "{name}: the runtime kept the connection of a dropped plugin");
    }
    let body = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    })
    .await
    .unwrap();
    for plugin in ["20-hanger", "30-crasher"] {
        let errors = format!("swapcri_nri_plugin_errors_total{{plugin=\"{plugin}\",event=\"CreateContainer\"}} 1");
        assert!(body.contains(&errors), "{errors} in\n{body}");
        let connected = format!("swapcri_nri_plugin_connected{{plugin=\"{plugin}\"}} 0");
        assert!(body.contains(&connected), "{connected} in\n{body}");
    }
}

/// Records what Synchronize brought.
#[derive(Default)]
struct Updater {
    synced: std::sync::Mutex<Vec<String>>,
}

#[async_trait]
impl Handler for Updater {
    async fn configure(&self, _config: &str) -> Result<u32, String> {
        Ok(1 << (api::Event::StopContainer as u32 - 1))
    }

    async fn synchronize(
        &self,
        _pods: Vec<api::PodSandbox>,
        containers: Vec<api::Container>,
    ) -> Result<Vec<api::ContainerUpdate>, String> {
        *self.synced.lock().unwrap() = containers.into_iter().map(|c| c.id).collect();
        Ok(Vec::new())
    }
}

fn update(id: &str, resources: api::LinuxResources) -> api::ContainerUpdate {
    api::ContainerUpdate {
        container_id: id.into(),
        linux: Some(api::LinuxContainerUpdate { resources: Some(resources) }),
        ignore_failure: false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_that_joins_late_is_synchronised_and_may_update_and_evict() {
    require_root();
    let nri = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(&nri_config(nri.path(), 2000, ""));
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("nri-late", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let id = start(&daemon, &pod, &pod_config, burstable("running", &[])).await;

    let updater = Arc::new(Updater::default());
    let stub = Stub::connect(&nri.path().join("nri.sock"), "40", "updater", updater.clone()).await.unwrap();
    assert_eq!(*updater.synced.lock().unwrap(), [id.clone()], "the running container is in the snapshot");

    // CPU shares: the plugin's, and shown as such.
    let shares = api::LinuxResources {
        cpu: Some(api::LinuxCpu { shares: Some(api::OptionalUInt64 { value: 512 }), ..Default::default() }),
        ..Default::default()
    };
    let failed = stub.update_containers(vec![update(&id, shares)], vec![]).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    let info = verbose_info(&daemon, &id).await;
    assert_eq!(info["nri"]["cpu.shares"], "40-updater", "{}", info["nri"]);
    // memory.high below the request: the policy refuses it, on any node; it comes back failed.
    let high =
        api::LinuxResources { unified: [("memory.high".to_string(), MI.to_string())].into(), ..Default::default() };
    let failed = stub.update_containers(vec![update(&id, high)], vec![]).await.unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(daemon.log().contains("below the memory request"), "the refusal is logged");

    // An eviction stops the container, and the plugin hears of the stop.
    let eviction = api::ContainerEviction { container_id: id.clone(), reason: "making room".into() };
    stub.update_containers(vec![], vec![eviction]).await.unwrap();
    let exited = wait_exited(&daemon, &id, scaled(Duration::from_secs(20))).await;
    assert_eq!(exited.state, cri::ContainerState::ContainerExited as i32);
    wait_for_log(&daemon, "NRI plugin evicts a container").await;
}
