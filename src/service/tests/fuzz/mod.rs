//! The CRI fuzzer: arbitrary messages for every RPC, built from the generated types with
//! `arbitrary`, driven in-process through the gRPC adapters and the services. Every side
//! effect on the node is a stand-in: the OCI runtime runs nothing, namespaces, mounts and
//! monitors are recorded (`FakeHost`), CNI has no configuration, pulls go to a closed
//! loopback port. The services run in a mount namespace of their own where everything but
//! the fuzzer's tmpfs is read-only, so a write outside the state, run and log roots fails
//! with EROFS and is reported.
//!
//! `cri_fuzz` (ignored by default) runs the worker in a child process for
//! `SWAPCRI_FUZZ_SECONDS` (default 60) or `SWAPCRI_FUZZ_INPUTS` inputs; `SWAPCRI_FUZZ_SEED`
//! picks the first input. Needs root (the mount namespace).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use async_trait::async_trait;

use crate::config::Config;
use crate::cri;
use crate::cri::image_service_server::ImageService as _;
use crate::cri::runtime_service_server::RuntimeService as _;
use crate::grpc::{ImageApi, RuntimeApi};
use crate::image::{ImageStore, Puller, Registries};
use crate::model::image::{Digest, ImageId, ImageRecord, LayerRecord};
use crate::model::node::{CgroupMode, NodeFacts};
use crate::model::sandbox::ProcessRef;
use crate::monitor::MonitorError;
use crate::oci::{CreateIo, ExecOutput, Features, OciError, OciRuntime, RuntimeState};
use crate::sandbox::{NsRequest, Shared};

use crate::service::image_service::ImageService;
use crate::service::owners::host::Host;
use crate::service::owners::objects;
use crate::service::owners::runtimes;
use crate::service::pod_service::PodService;
use crate::service::runtime_service::RuntimeService;
use crate::service::streaming_service::StreamingService;

mod stand_ins;
use stand_ins::{store_image, FakeHost, InertRuntime};

const IMAGE: &str = "fuzz.local/busybox:1";

/// Every RPC: the `Call` enum of requests, its names, and its dispatch to the adapters.
macro_rules! calls {
    ($($variant:ident($request:ty) => $api:ident.$method:ident),* $(,)?) => {
        /// One RPC with its request.
        #[derive(Debug, Arbitrary)]
        #[allow(clippy::large_enum_variant)]
        enum Call {
            $($variant($request)),*
        }

        impl Call {
            fn name(&self) -> &'static str {
                match self {
                    $(Call::$variant(_) => stringify!($variant)),*
                }
            }

            async fn run(self, apis: &Apis) -> Result<(), tonic::Status> {
                match self {
                    $(Call::$variant(r) => apis.$api.$method(tonic::Request::new(r)).await.map(drop)),*
                }
            }
        }
    };
}

calls! {
    Version(cri::VersionRequest) => runtime.version,
    RunPodSandbox(cri::RunPodSandboxRequest) => runtime.run_pod_sandbox,
    StopPodSandbox(cri::StopPodSandboxRequest) => runtime.stop_pod_sandbox,
    RemovePodSandbox(cri::RemovePodSandboxRequest) => runtime.remove_pod_sandbox,
    PodSandboxStatus(cri::PodSandboxStatusRequest) => runtime.pod_sandbox_status,
    ListPodSandbox(cri::ListPodSandboxRequest) => runtime.list_pod_sandbox,
    StreamPodSandboxes(cri::StreamPodSandboxesRequest) => runtime.stream_pod_sandboxes,
    CreateContainer(cri::CreateContainerRequest) => runtime.create_container,
    StartContainer(cri::StartContainerRequest) => runtime.start_container,
    StopContainer(cri::StopContainerRequest) => runtime.stop_container,
    RemoveContainer(cri::RemoveContainerRequest) => runtime.remove_container,
    ListContainers(cri::ListContainersRequest) => runtime.list_containers,
    StreamContainers(cri::StreamContainersRequest) => runtime.stream_containers,
    ContainerStatus(cri::ContainerStatusRequest) => runtime.container_status,
    UpdateContainerResources(cri::UpdateContainerResourcesRequest) => runtime.update_container_resources,
    ReopenContainerLog(cri::ReopenContainerLogRequest) => runtime.reopen_container_log,
    ExecSync(cri::ExecSyncRequest) => runtime.exec_sync,
    Exec(cri::ExecRequest) => runtime.exec,
    Attach(cri::AttachRequest) => runtime.attach,
    PortForward(cri::PortForwardRequest) => runtime.port_forward,
    ContainerStats(cri::ContainerStatsRequest) => runtime.container_stats,
    ListContainerStats(cri::ListContainerStatsRequest) => runtime.list_container_stats,
    StreamContainerStats(cri::StreamContainerStatsRequest) => runtime.stream_container_stats,
    PodSandboxStats(cri::PodSandboxStatsRequest) => runtime.pod_sandbox_stats,
    ListPodSandboxStats(cri::ListPodSandboxStatsRequest) => runtime.list_pod_sandbox_stats,
    StreamPodSandboxStats(cri::StreamPodSandboxStatsRequest) => runtime.stream_pod_sandbox_stats,
    UpdateRuntimeConfig(cri::UpdateRuntimeConfigRequest) => runtime.update_runtime_config,
    Status(cri::StatusRequest) => runtime.status,
    CheckpointContainer(cri::CheckpointContainerRequest) => runtime.checkpoint_container,
    GetContainerEvents(cri::GetEventsRequest) => runtime.get_container_events,
    ListMetricDescriptors(cri::ListMetricDescriptorsRequest) => runtime.list_metric_descriptors,
    ListPodSandboxMetrics(cri::ListPodSandboxMetricsRequest) => runtime.list_pod_sandbox_metrics,
    StreamPodSandboxMetrics(cri::StreamPodSandboxMetricsRequest) => runtime.stream_pod_sandbox_metrics,
    RuntimeConfig(cri::RuntimeConfigRequest) => runtime.runtime_config,
    UpdatePodSandboxResources(cri::UpdatePodSandboxResourcesRequest) => runtime.update_pod_sandbox_resources,
    ListImages(cri::ListImagesRequest) => images.list_images,
    StreamImages(cri::StreamImagesRequest) => images.stream_images,
    ImageStatus(cri::ImageStatusRequest) => images.image_status,
    PullImage(cri::PullImageRequest) => images.pull_image,
    RemoveImage(cri::RemoveImageRequest) => images.remove_image,
    ImageFsInfo(cri::ImageFsInfoRequest) => images.image_fs_info,
}

struct Apis {
    runtime: RuntimeApi,
    images: ImageApi,
}

struct Fuzzer {
    apis: Arc<Apis>,
    root: PathBuf,
    closed_port: u16,
    pods: Vec<String>,
    containers: Vec<String>,
    store: Arc<ImageStore>,
}

async fn fuzzer(root: &Path) -> Fuzzer {
    let config = Config {
        state_root: root.join("state"),
        run_root: root.join("run"),
        cgroup_root: root.join("cgroup"),
        network: crate::config::NetworkConfig {
            config_dir: root.join("net.d"),
            plugin_dirs: vec![root.join("cni")],
            ..Default::default()
        },
        ..Config::default()
    };
    for dir in [&config.state_root, &config.run_root, &config.cgroup_root, &config.network.config_dir] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let mut node = NodeFacts {
        held_capabilities: vec!["CAP_CHOWN".into(), "CAP_KILL".into()],
        ..NodeFacts::fixture(CgroupMode::Unified)
    };
    node.memory.swap_total = 4 << 30;
    node.memory.swap_accounting = true;
    let config = Arc::new(config);
    let store = Arc::new(ImageStore::open(&config.image_root()).unwrap());
    store_image(&store);
    let mut runtimes = runtimes::Runtimes::probe(&config);
    runtimes.replace_runtimes(Arc::new(InertRuntime { containers_dir: config.state_root.join("containers") }));
    let runtimes = Arc::new(runtimes);
    let host: Arc<dyn Host> = Arc::new(FakeHost::default());
    let mut pods = PodService::new(config.clone(), node.clone(), store.clone(), runtimes.clone()).unwrap();
    pods.host = host;
    let pods = Arc::new(pods);
    let puller = Arc::new(Puller::new(store.clone(), Arc::new(Registries::new(&config)), 2));
    let images = Arc::new(ImageService::new(store.clone(), puller, vec![], pods.clone()));
    let runtime = Arc::new(RuntimeService::new(config, node, runtimes));
    let metrics = crate::metrics::Metrics::new();
    let streaming_config = crate::config::StreamingConfig { address: "127.0.0.1:0".into(), ..Default::default() };
    let server = crate::streaming::StreamingServer::start(&streaming_config, None, metrics.streaming()).await.unwrap();
    let streaming = StreamingService::new(pods.clone(), server);
    let apis = Apis { runtime: RuntimeApi::new(runtime, pods, streaming), images: ImageApi::new(images) };
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    Fuzzer {
        apis: Arc::new(apis),
        root: root.to_path_buf(),
        closed_port,
        pods: Vec::new(),
        containers: Vec::new(),
        store,
    }
}

/// With probability 7/8, one of the ids the services handed out.
fn known_id(u: &mut Unstructured, known: &[String], id: &mut String) {
    aim(u, known, id, 7)
}

/// With probability `eighths`/8, one of the ids the services handed out.
fn aim(u: &mut Unstructured, known: &[String], id: &mut String, eighths: u8) {
    if !known.is_empty() && u.ratio(eighths, 8).unwrap_or(false) {
        let index = u.choose_index(known.len()).unwrap_or(0);
        *id = known[index].clone();
    }
}

/// A path from the input kept under `base` (its `..` and root dropped), for request fields
/// the CRI leaves to the caller, such as a pod's log directory.
fn under(base: &Path, path: &str) -> String {
    let kept: PathBuf = Path::new(path).components().filter(|c| matches!(c, std::path::Component::Normal(_))).collect();
    base.join(kept).display().to_string()
}

/// With probability 7/8, the fuzzer's image.
fn steer_image(u: &mut Unstructured, spec: &mut Option<cri::ImageSpec>) {
    if u.ratio(7, 8).unwrap_or(false) {
        spec.get_or_insert_with(Default::default).image = IMAGE.into();
    }
}

impl Fuzzer {
    /// Points the arbitrary request at what exists often enough to get past the lookups,
    /// and keeps what the CRI leaves to the caller (log directory, registry) on the
    /// fuzzer's ground. Everything else stays as generated.
    fn steer(&self, call: &mut Call, u: &mut Unstructured) {
        match call {
            Call::RunPodSandbox(r) => self.steer_run_pod(r, u),
            Call::CreateContainer(r) => self.steer_create_container(r, u),
            // Pods live long enough for containers to be made in them.
            Call::StopPodSandbox(r) => aim(u, &self.pods, &mut r.pod_sandbox_id, 1),
            Call::RemovePodSandbox(r) => aim(u, &self.pods, &mut r.pod_sandbox_id, 1),
            Call::PodSandboxStatus(r) => known_id(u, &self.pods, &mut r.pod_sandbox_id),
            Call::PodSandboxStats(r) => known_id(u, &self.pods, &mut r.pod_sandbox_id),
            Call::PortForward(r) => known_id(u, &self.pods, &mut r.pod_sandbox_id),
            Call::UpdatePodSandboxResources(r) => known_id(u, &self.pods, &mut r.pod_sandbox_id),
            Call::StartContainer(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::StopContainer(r) => {
                known_id(u, &self.containers, &mut r.container_id);
                r.timeout = r.timeout.rem_euclid(3);
            }
            Call::RemoveContainer(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::ContainerStatus(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::UpdateContainerResources(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::ReopenContainerLog(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::ExecSync(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::Exec(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::Attach(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::ContainerStats(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::CheckpointContainer(r) => known_id(u, &self.containers, &mut r.container_id),
            Call::ImageStatus(r) => steer_image(u, &mut r.image),
            Call::RemoveImage(r) if u.ratio(1, 8).unwrap_or(false) => {
                r.image.get_or_insert_with(Default::default).image = IMAGE.into();
            }
            Call::PullImage(r) => {
                // Only ever the fuzzer's closed port: a pull must not leave the machine.
                let spec = r.image.get_or_insert_with(Default::default);
                let path: String =
                    spec.image.chars().filter(|c| c.is_ascii_alphanumeric() || "/:@._-".contains(*c)).collect();
                spec.image = format!("127.0.0.1:{}/{}", self.closed_port, path.trim_start_matches('/'));
            }
            _ => {}
        }
    }

    /// A pod with its names filled in, often on the host's network (no CNI here), its
    /// log directory under the fuzzer's.
    fn steer_run_pod(&self, r: &mut cri::RunPodSandboxRequest, u: &mut Unstructured) {
        r.runtime_handler.clear();
        if u.ratio(3, 4).unwrap_or(false) {
            let config = r.config.get_or_insert_with(Default::default);
            let metadata = config.metadata.get_or_insert_with(Default::default);
            for field in [&mut metadata.name, &mut metadata.namespace, &mut metadata.uid] {
                if field.is_empty() {
                    field.push('x');
                }
            }
            let linux = config.linux.get_or_insert_with(Default::default);
            if u.ratio(1, 2).unwrap_or(false) {
                linux.cgroup_parent.clear();
            }
            let context = linux.security_context.get_or_insert_with(Default::default);
            let options = context.namespace_options.get_or_insert_with(Default::default);
            if u.ratio(3, 4).unwrap_or(false) {
                options.network = cri::NamespaceMode::Node as i32;
            }
        }
        if let Some(config) = &mut r.config {
            if !config.log_directory.is_empty() {
                config.log_directory = under(&self.root.join("logs"), &config.log_directory);
            }
        }
    }

    /// A container in a known pod, of the fuzzer's image, its resources often left out.
    fn steer_create_container(&self, r: &mut cri::CreateContainerRequest, u: &mut Unstructured) {
        known_id(u, &self.pods, &mut r.pod_sandbox_id);
        if u.ratio(7, 8).unwrap_or(false) {
            let config = r.config.get_or_insert_with(Default::default);
            config.metadata.get_or_insert_with(Default::default).name.push('c');
            steer_image(u, &mut config.image);
            // Arbitrary numbers are almost never in range: let some requests past.
            if u.ratio(1, 4).unwrap_or(false) {
                config.linux = None;
            } else if let Some(linux) = config.linux.as_mut().filter(|_| u.ratio(1, 2).unwrap_or(false)) {
                linux.resources = None;
            }
        }
        if let Some(config) = r.sandbox_config.as_mut() {
            config.log_directory = under(&self.root.join("logs"), &config.log_directory);
        }
    }

    /// Removes every pod through the CRI (and so its containers), as kubelet would.
    async fn clear(&mut self) -> Result<(), String> {
        let listed = self.apis.runtime.list_pod_sandbox(tonic::Request::new(Default::default())).await;
        let items = listed.map_err(|e| format!("ListPodSandbox: {e}"))?.into_inner().items;
        for pod in items {
            let request = tonic::Request::new(cri::RemovePodSandboxRequest { pod_sandbox_id: pod.id.clone() });
            self.apis
                .runtime
                .remove_pod_sandbox(request)
                .await
                .map_err(|e| format!("RemovePodSandbox {}: {e}", pod.id))?;
        }
        let left = self.apis.runtime.list_containers(tonic::Request::new(Default::default())).await;
        for container in left.map_err(|e| format!("ListContainers: {e}"))?.into_inner().containers {
            let request = tonic::Request::new(cri::RemoveContainerRequest { container_id: container.id.clone() });
            self.apis.runtime.remove_container(request).await.map_err(|e| format!("RemoveContainer: {e}"))?;
        }
        self.pods.clear();
        self.containers.clear();
        store_image(&self.store);
        Ok(())
    }

    /// Learns the ids a call handed out, to aim later calls at them.
    async fn learn(&mut self) {
        if let Ok(r) = self.apis.runtime.list_pod_sandbox(tonic::Request::new(Default::default())).await {
            self.pods = r.into_inner().items.into_iter().map(|p| p.id).collect();
        }
        if let Ok(r) = self.apis.runtime.list_containers(tonic::Request::new(Default::default())).await {
            self.containers = r.into_inner().containers.into_iter().map(|c| c.id).collect();
        }
    }
}

/// splitmix64: the input bytes for one seed.
fn input_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        bytes.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// Every mount read-only in a mount namespace of this thread's own (inherited by the
/// threads it starts), then a writable tmpfs at `root`.
fn confine(root: &Path) -> std::io::Result<()> {
    use nix::mount::{mount, MsFlags};
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)?;
    let attr =
        nix::libc::mount_attr { attr_set: nix::libc::MOUNT_ATTR_RDONLY, attr_clr: 0, propagation: 0, userns_fd: 0 };
    // SAFETY: mount_setattr with a valid path and attribute struct of the size passed.
    let rc = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_mount_setattr,
            nix::libc::AT_FDCWD,
            c"/".as_ptr(),
            nix::libc::AT_RECURSIVE as nix::libc::c_uint,
            &attr as *const nix::libc::mount_attr,
            std::mem::size_of::<nix::libc::mount_attr>(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    mount(Some("tmpfs"), root, Some("tmpfs"), MsFlags::empty(), Some("size=512m"))?;
    Ok(())
}

#[derive(Default)]
struct Tally {
    inputs: u64,
    by_code: BTreeMap<String, u64>,
    by_rpc_ok: BTreeMap<&'static str, u64>,
    /// The latest refusal of each RPC, to tell why one never succeeds.
    last_refusal: BTreeMap<&'static str, String>,
    /// Internal errors (bad input should not cause one), a few of each RPC.
    internal: BTreeMap<&'static str, Vec<String>>,
}

async fn run_fuzzer(root: &Path, seed: u64, inputs: u64, budget: Duration) -> Result<Tally, String> {
    let mut fuzzer = fuzzer(root).await;
    let mut tally = Tally::default();
    let started = Instant::now();
    let mut last_report = Instant::now();
    let readonly = "Read-only file system";
    for n in 0.. {
        if (inputs > 0 && n >= inputs) || (inputs == 0 && started.elapsed() >= budget) {
            break;
        }
        let input = seed.wrapping_add(n);
        let bytes = input_bytes(input, 2048);
        let mut u = Unstructured::new(&bytes);
        let Ok(mut call) = Call::arbitrary(&mut u) else { continue };
        // Steering draws from bytes of its own: the message may have used up the input.
        let steering = input_bytes(!input, 64);
        fuzzer.steer(&mut call, &mut Unstructured::new(&steering));
        let name = call.name();
        let described = format!("{call:?}");
        let apis = fuzzer.apis.clone();
        let task = tokio::spawn(async move { call.run(&apis).await });
        let outcome = match tokio::time::timeout(Duration::from_secs(30), task).await {
            Err(_) => return Err(format!("input {input} ({name}) did not answer within 30 s: {described}")),
            Ok(Err(e)) if e.is_panic() => return Err(format!("input {input} ({name}) panicked: {e}: {described}")),
            Ok(Err(e)) => return Err(format!("input {input} ({name}): task failed: {e}")),
            Ok(Ok(outcome)) => outcome,
        };
        tally.inputs += 1;
        match outcome {
            Ok(()) => {
                *tally.by_code.entry("Ok".into()).or_default() += 1;
                *tally.by_rpc_ok.entry(name).or_default() += 1;
            }
            Err(status) => {
                if status.message().contains(readonly) {
                    return Err(format!(
                        "input {input} ({name}) wrote outside its roots: {}: {described}",
                        status.message()
                    ));
                }
                *tally.by_code.entry(format!("{:?}", status.code())).or_default() += 1;
                tally.last_refusal.insert(name, format!("{:?}: {}", status.code(), status.message()));
                let internal = tally.internal.entry(name).or_default();
                if status.code() == tonic::Code::Internal && internal.len() < 3 {
                    internal.push(status.message().to_string());
                }
            }
        }
        if matches!(name, "RunPodSandbox" | "CreateContainer" | "RemovePodSandbox" | "RemoveContainer") {
            fuzzer.learn().await;
        }
        if name == "RemoveImage" {
            store_image(&fuzzer.store);
        }
        if n % 512 == 511 {
            fuzzer.clear().await.map_err(|e| format!("clearing after input {input}: {e}"))?;
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            last_report = Instant::now();
            let rate = tally.inputs as f64 / started.elapsed().as_secs_f64();
            eprintln!("fuzz: {} inputs, {rate:.0}/s, outcomes {:?}", tally.inputs, tally.by_code);
        }
    }
    fuzzer.clear().await.map_err(|e| format!("final clearing: {e}"))?;
    Ok(tally)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The worker: runs in a process of its own (started by `cri_fuzz`), as its mount
/// namespace is not undone.
#[test]
#[ignore = "started by cri_fuzz"]
fn cri_fuzz_worker() {
    let Some(root) = std::env::var_os("SWAPCRI_FUZZ_ROOT").map(PathBuf::from) else { return };
    confine(&root).expect("a private read-only mount namespace (needs root)");
    let outside = root.parent().unwrap().join(format!("swapcri-fuzz-probe-{}", std::process::id()));
    let probe = std::fs::write(&outside, b"x").map_err(|e| e.raw_os_error());
    assert_eq!(probe, Err(Some(nix::libc::EROFS)), "a write outside the fuzzer's roots must fail");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (seed, inputs) = (env_u64("SWAPCRI_FUZZ_SEED", 1), env_u64("SWAPCRI_FUZZ_INPUTS", 0));
    let budget = Duration::from_secs(env_u64("SWAPCRI_FUZZ_SECONDS", 60));
    let started = Instant::now();
    let tally = runtime.block_on(run_fuzzer(&root, seed, inputs, budget)).unwrap_or_else(|e| panic!("{e}"));
    let elapsed = started.elapsed().as_secs_f64();
    let leftovers: Vec<_> = walkdir::WalkDir::new(root.join("run"))
        .min_depth(2)
        .into_iter()
        .flatten()
        .filter(|e| !e.path().starts_with(root.join("run/sock")) && !e.path().starts_with(root.join("run/runc")))
        .map(|e| e.path().display().to_string())
        .collect();
    eprintln!(
        "fuzz: {} inputs from seed {seed} in {elapsed:.0} s ({:.0}/s), no panic, no hang, nothing written outside the fuzzer's roots",
        tally.inputs,
        tally.inputs as f64 / elapsed
    );
    eprintln!("fuzz: outcomes {:?}", tally.by_code);
    eprintln!("fuzz: RPCs answered Ok {:?}", tally.by_rpc_ok);
    for (rpc, messages) in tally.internal.iter().filter(|(_, m)| !m.is_empty()) {
        eprintln!("fuzz: {rpc} answered Internal, e.g. {messages:?}");
    }
    assert!(leftovers.is_empty(), "run directories left after every pod was removed: {leftovers:?}");
    for rpc in ["RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer", "ExecSync"] {
        if !tally.by_rpc_ok.contains_key(rpc) {
            eprintln!("fuzz: {rpc} never succeeded; its last refusal: {:?}", tally.last_refusal.get(rpc));
        }
        assert!(
            tally.by_rpc_ok.get(rpc).copied().unwrap_or(0) > 0 || tally.inputs < 5_000,
            "no {rpc} succeeded: the steering is off"
        );
    }
}

/// `SWAPCRI_FUZZ_SECONDS=60 cargo test --lib cri_fuzz -- --ignored --nocapture`
#[test]
#[ignore = "run by hack/test.sh for a minute; see docs/testing.md"]
fn cri_fuzz() {
    if std::env::var_os("SWAPCRI_FUZZ_ROOT").is_some() {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("cri_fuzz needs root (a private mount namespace); skipped");
        return;
    }
    let root = tempfile::Builder::new().prefix("swapcri-fuzz-").tempdir().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "service::tests::fuzz::cri_fuzz_worker", "--ignored", "--nocapture", "--test-threads=1"])
        .env("SWAPCRI_FUZZ_ROOT", root.path())
        .status()
        .unwrap();
    assert!(status.success(), "the fuzz worker failed: {status}");
}
