//! A service holding one sandbox and one container, its runtime the fake: what the
//! service-level tests start from.

use std::sync::Arc;

use crate::cri;

use crate::config::Config;
use crate::image::ImageStore;
use crate::model::container::{ContainerMeta, ContainerState, ContainerStatus};
use crate::model::ids::{ContainerId, SandboxId};
use crate::model::node::CgroupMode;
use crate::model::node::NodeFacts;
use crate::model::sandbox::{ProcessRef, SandboxMeta, SandboxState, SandboxStatus};
use crate::oci::fake::FakeRuntime;

use crate::service::owners::objects::{Container, Sandbox};
use crate::service::owners::runtimes;
use crate::service::pod_service::PodService;

pub(super) struct Fixture {
    pub _dir: tempfile::TempDir,
    pub service: PodService,
    pub fake: Arc<FakeRuntime>,
    pub id: ContainerId,
}

/// A service holding one sandbox and one container in `state`, its runtime the fake.
pub(super) fn fixture(state: ContainerState, stop_signal: &str, exit_on: &'static str, fail_update: bool) -> Fixture {
    fixture_with(state, stop_signal, exit_on, fail_update, |_| {})
}

pub(super) fn fixture_with(
    state: ContainerState,
    stop_signal: &str,
    exit_on: &'static str,
    fail_update: bool,
    configure: impl FnOnce(&mut Config),
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut config =
        Config { state_root: dir.path().join("state"), run_root: dir.path().join("run"), ..Config::default() };
    configure(&mut config);
    let owns_parent = config.memory_qos.reservation != crate::config::Reservation::FollowKubelet;
    let images = Arc::new(ImageStore::open(&config.image_root()).unwrap());
    let node = NodeFacts::fixture(CgroupMode::Unified);
    let config = Arc::new(config);
    let runtimes = Arc::new(runtimes::Runtimes::probe(&config));
    let mut service = PodService::new(config, node, images, runtimes).unwrap();
    let id = ContainerId::generate();
    let fake = Arc::new(FakeRuntime::new(exit_on, service.registry.exit_file(&id), fail_update));
    Arc::get_mut(&mut service.runtimes).expect("the service's own handlers").replace_runtimes(fake.clone());
    let sandbox_id = SandboxId::generate();
    let sandbox = Sandbox {
        meta: Arc::new(SandboxMeta {
            id: sandbox_id.clone(),
            name: "pod".into(),
            config: cri::PodSandboxConfig::default(),
            runtime_handler: "runc".into(),
            cgroup_parent: if owns_parent { "/swapcri/pod".into() } else { "/test".into() },
            owns_cgroup_parent: owns_parent,
            cgroup_driver: crate::config::CgroupDriver::Cgroupfs,
            created_at: 0,
            dir: dir.path().join("pod"),
        }),
        status: SandboxStatus {
            state: SandboxState::Ready,
            holder: None,
            addresses: None,
            resized: None,
            reason: None,
        },
    };
    // The test process stands in for a live monitor.
    let me = ProcessRef::of(std::process::id() as i32).unwrap();
    let mut status = ContainerStatus::created(me, 1, Some(cri::LinuxContainerResources::default()));
    status.state = state;
    let container = Container {
        meta: Arc::new(ContainerMeta {
            id: id.clone(),
            sandbox_id: sandbox_id.clone(),
            name: "c_0".into(),
            config: cri::ContainerConfig::default(),
            image_ref: "img".into(),
            image_id: serde_json::from_str(&format!("\"sha256:{}\"", "a".repeat(64))).unwrap(),
            log_path: String::new(),
            created_at: 0,
            stop_signal: stop_signal.into(),
            user: None,
            shared_binds: vec![],
            warnings: vec![],
            restore: None,
        }),
        status,
    };
    // Recorded as the service records them, on disk too.
    service.registry.add_sandbox((*sandbox.meta).clone(), sandbox.status).unwrap();
    service.registry.add_container((*container.meta).clone(), container.status).unwrap();
    Fixture { _dir: dir, service, fake, id }
}

pub(super) fn state_of(f: &Fixture) -> ContainerStatus {
    f.service.registry.find_container(f.id.as_str()).unwrap().status
}

/// Writes the container's bundle spec, which exec takes the process from.
pub(super) fn write_spec(f: &Fixture) {
    let bundle = f.service.registry.container_run_dir(&f.id).join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let spec = serde_json::json!({"process": {"args": ["sleep", "1"], "cwd": "/", "user": {"uid": 0, "gid": 0}}});
    std::fs::write(bundle.join("config.json"), spec.to_string()).unwrap();
}
