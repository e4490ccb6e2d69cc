//! Requests that must be refused with the right code and change nothing (log paths that
//! would leave the pod's log directory among them).

mod common;

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let mut rt = daemon.runtime().await;

    let code = |r: Result<tonic::Response<cri::RunPodSandboxResponse>, tonic::Status>| r.unwrap_err().code();
    assert_eq!(code(rt.run_pod_sandbox(cri::RunPodSandboxRequest::default()).await), tonic::Code::InvalidArgument);
    let handler =
        cri::RunPodSandboxRequest { config: Some(sandbox_config("x", &logs)), runtime_handler: "kata".into() };
    assert_eq!(code(rt.run_pod_sandbox(handler).await), tonic::Code::InvalidArgument);
    assert!(rt.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await.unwrap().into_inner().items.is_empty());

    let pod_config = sandbox_config("pod", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let create = |sandbox: &str, config: cri::ContainerConfig| cri::CreateContainerRequest {
        pod_sandbox_id: sandbox.into(),
        config: Some(config),
        sandbox_config: Some(pod_config.clone()),
    };
    let err = rt.create_container(create("no-such-pod", container_config("c", &["true"]))).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let mut missing_image = container_config("c", &["true"]);
    missing_image.image = Some(cri::ImageSpec { image: "localhost/absent:1".into(), ..Default::default() });
    assert_eq!(rt.create_container(create(&pod, missing_image)).await.unwrap_err().code(), tonic::Code::NotFound);
    let mut relative_dir = container_config("c", &["true"]);
    relative_dir.working_dir = "relative/dir".into();
    let err = rt.create_container(create(&pod, relative_dir)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{}", err.message());
    let mut bad_cap = container_config("c", &["true"]);
    bad_cap.linux.as_mut().unwrap().security_context.as_mut().unwrap().capabilities =
        Some(cri::Capability { add_capabilities: vec!["NOT_A_CAP".into()], ..Default::default() });
    assert_eq!(rt.create_container(create(&pod, bad_cap)).await.unwrap_err().code(), tonic::Code::InvalidArgument);
    // A log path stays in the pod's log directory: by name, and through links inside it.
    std::fs::create_dir_all(&logs).unwrap();
    let outside = daemon.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, logs.join("link-dir")).unwrap();
    std::os::unix::fs::symlink(outside.join("file.log"), logs.join("link.log")).unwrap();
    let evil = daemon.dir.path().join("evil.log").display().to_string();
    for path in [evil.as_str(), "../../evil.log", "c/../../evil.log", "link-dir/c.log", "link.log"] {
        let mut c = container_config("c", &["true"]);
        c.log_path = path.into();
        let err = rt.create_container(create(&pod, c)).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{path}: {}", err.message());
    }
    assert!(std::fs::read_dir(&outside).unwrap().next().is_none(), "nothing written outside");
    // Resources out of their ranges, and a `unified` key that is a path.
    let resources = [
        cri::LinuxContainerResources { memory_limit_in_bytes: 1, ..Default::default() },
        cri::LinuxContainerResources { memory_limit_in_bytes: -5, ..Default::default() },
        cri::LinuxContainerResources { oom_score_adj: 5000, ..Default::default() },
        cri::LinuxContainerResources {
            unified: [("../../../etc/passwd".to_string(), "x".to_string())].into(),
            ..Default::default()
        },
    ];
    for r in resources {
        let mut c = container_config("c", &["true"]);
        c.linux.as_mut().unwrap().resources = Some(r.clone());
        let err = rt.create_container(create(&pod, c)).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{r:?}: {}", err.message());
    }
    assert!(!daemon.dir.path().join("evil.log").exists());
    let mut node_wide = sandbox_config("node-wide", &logs);
    node_wide.linux.as_mut().unwrap().sysctls = [("vm.swappiness".to_string(), "100".to_string())].into();
    let err = rt.run_pod_sandbox(cri::RunPodSandboxRequest { config: Some(node_wide), ..Default::default() }).await;
    assert_eq!(err.unwrap_err().code(), tonic::Code::InvalidArgument, "a sysctl no namespace of the pod isolates");
    let mut no_dir = sandbox_config("no-dir", &logs);
    no_dir.log_directory = "relative/logs".into();
    let err = rt.run_pod_sandbox(cri::RunPodSandboxRequest { config: Some(no_dir), ..Default::default() }).await;
    assert_eq!(err.unwrap_err().code(), tonic::Code::InvalidArgument);
    assert!(
        rt.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner().containers.is_empty(),
        "nothing created"
    );
    assert!(std::fs::read_dir(daemon.dir.path().join("run/containers")).map(|d| d.count()).unwrap_or(0) == 0);

    let id = start(&daemon, &pod, &pod_config, container_config("c", &["sleep", "30"])).await;
    let again = rt.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.unwrap_err();
    assert_eq!(again.code(), tonic::Code::FailedPrecondition);
    let taken = rt.create_container(create(&pod, container_config("c", &["true"]))).await.unwrap_err();
    assert_eq!(taken.code(), tonic::Code::AlreadyExists);
    assert_eq!(
        rt.start_container(cri::StartContainerRequest { container_id: String::new() }).await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );
    assert_eq!(
        rt.container_status(cri::ContainerStatusRequest { container_id: "0".repeat(64), verbose: false })
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );
    assert_eq!(
        rt.exec_sync(cri::ExecSyncRequest { container_id: id.clone(), cmd: vec![], timeout: 0 })
            .await
            .unwrap_err()
            .code(),
        tonic::Code::InvalidArgument
    );
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}
