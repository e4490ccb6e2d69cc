//! CRI additions a current kubelet uses, over the socket on real runc: supplemental groups
//! policies and ContainerStatus.user, RunAsGroup without a user, stop signals, the
//! `Stream*` list RPCs, UpdatePodSandboxResources, recursive read-only mounts as the
//! handler reports them, and mount propagation from container to host.

mod common;

use common::pods::*;
use common::{require_root, Daemon};
use futures::StreamExt;
use swapcri::cri;

fn stdout(r: &cri::ExecSyncResponse) -> String {
    String::from_utf8_lossy(&r.stdout).trim().to_string()
}

fn security(c: &mut cri::ContainerConfig) -> &mut cri::LinuxContainerSecurityContext {
    c.linux.get_or_insert_with(Default::default).security_context.get_or_insert_with(Default::default)
}

const FOREVER: [&str; 3] = ["sh", "-c", "while true; do sleep 1; done"];

#[tokio::test(flavor = "multi_thread")]
async fn groups_policies_users_and_stop_signals() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let pod_config = sandbox_config("groups", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;

    let runtime = daemon.runtime().await.status(cri::StatusRequest { verbose: false }).await.unwrap().into_inner();
    assert!(runtime.features.unwrap().supplemental_groups_policy);

    // Merge (default): the image's membership of "app" in wheel (10) joins the request's 1234.
    let mut merge = container_config("merge", &FOREVER);
    security(&mut merge).run_as_user = Some(cri::Int64Value { value: 1000 });
    security(&mut merge).supplemental_groups = vec![1234];
    merge.stop_signal = cri::Signal::Sigusr1 as i32;
    let merge = start(&daemon, &pod, &pod_config, merge).await;
    assert_eq!(stdout(&exec(&daemon, &merge, &["id", "-G"], 10).await.unwrap()), "1000 10 1234");
    let s = status(&daemon, &merge).await;
    let user = s.user.unwrap().linux.unwrap();
    assert_eq!((user.uid, user.gid, user.supplemental_groups), (1000, 1000, vec![1000, 10, 1234]));
    assert_eq!(s.stop_signal, cri::Signal::Sigusr1 as i32, "the request's stop signal wins");

    // Strict: the request's groups only.
    let mut strict = container_config("strict", &FOREVER);
    security(&mut strict).run_as_user = Some(cri::Int64Value { value: 1000 });
    security(&mut strict).supplemental_groups = vec![1234];
    security(&mut strict).supplemental_groups_policy = cri::SupplementalGroupsPolicy::Strict as i32;
    let strict = start(&daemon, &pod, &pod_config, strict).await;
    assert_eq!(stdout(&exec(&daemon, &strict, &["id", "-G"], 10).await.unwrap()), "1000 1234");
    let user = status(&daemon, &strict).await.user.unwrap().linux.unwrap();
    assert_eq!(user.supplemental_groups, vec![1000, 1234]);
    assert_eq!(status(&daemon, &strict).await.stop_signal, cri::Signal::Sigterm as i32, "the default");

    // RunAsGroup without a user is refused, and nothing is created.
    let mut group_only = container_config("group-only", &FOREVER);
    security(&mut group_only).run_as_group = Some(cri::Int64Value { value: 5 });
    let err = daemon
        .runtime()
        .await
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(group_only),
            sandbox_config: Some(pod_config.clone()),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    let listed = daemon.runtime().await.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap();
    assert_eq!(listed.into_inner().containers.len(), 2);

    // The Stream* RPCs send what the List* ones answer.
    let mut rt = daemon.runtime().await;
    let mut stream = rt.stream_containers(cri::StreamContainersRequest { filter: None }).await.unwrap().into_inner();
    let mut streamed = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch.unwrap();
        assert!(!batch.containers.is_empty(), "no empty batches");
        streamed.extend(batch.containers.into_iter().map(|c| c.id));
    }
    streamed.sort();
    let mut want = vec![merge.clone(), strict.clone()];
    want.sort();
    assert_eq!(streamed, want);
    let pods: Vec<_> = rt
        .stream_pod_sandboxes(cri::StreamPodSandboxesRequest { filter: None })
        .await
        .unwrap()
        .into_inner()
        .collect()
        .await;
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].as_ref().unwrap().pod_sandboxes[0].id, pod);
}

#[tokio::test(flavor = "multi_thread")]
async fn pod_resize_is_recorded() {
    require_root();
    let daemon = Daemon::start("");
    let pod_config = sandbox_config("resize", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config).await;
    let mut rt = daemon.runtime().await;
    let resources =
        cri::LinuxContainerResources { memory_limit_in_bytes: 256 << 20, cpu_shares: 512, ..Default::default() };
    rt.update_pod_sandbox_resources(cri::UpdatePodSandboxResourcesRequest {
        pod_sandbox_id: pod.clone(),
        overhead: None,
        resources: Some(resources),
    })
    .await
    .expect("UpdatePodSandboxResources");
    let status = rt
        .pod_sandbox_status(cri::PodSandboxStatusRequest { pod_sandbox_id: pod.clone(), verbose: true })
        .await
        .unwrap()
        .into_inner();
    let info: serde_json::Value = serde_json::from_str(&status.info["info"]).unwrap();
    assert_eq!(info["resized"]["resources"]["memory_limit_in_bytes"], 256 << 20, "{info}");
    assert!(status.timestamp > 0);
    let missing = rt
        .update_pod_sandbox_resources(cri::UpdatePodSandboxResourcesRequest {
            pod_sandbox_id: "nope".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
}

/// The handler's report decides: with `rro` a recursive read-only volume keeps a mount
/// below it read-only; without, the request is refused. Refusals apply either way.
#[tokio::test(flavor = "multi_thread")]
async fn recursive_read_only_follows_the_handler() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let status = daemon.runtime().await.status(cri::StatusRequest { verbose: false }).await.unwrap().into_inner();
    let rro = status
        .runtime_handlers
        .iter()
        .find(|h| h.name.is_empty())
        .unwrap()
        .features
        .unwrap()
        .recursive_read_only_mounts;
    let pod_config = sandbox_config("rro", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;

    // A host directory with a tmpfs mounted inside it.
    let host = daemon.dir.path().join("volume");
    let inner = host.join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    nix::mount::mount(Some("tmpfs"), &inner, Some("tmpfs"), nix::mount::MsFlags::empty(), None::<&str>).unwrap();
    let volume = |readonly, propagation: cri::MountPropagation| cri::Mount {
        container_path: "/vol".into(),
        host_path: host.display().to_string(),
        readonly,
        recursive_read_only: true,
        propagation: propagation as i32,
        ..Default::default()
    };
    let create = |name: &str, mount: cri::Mount| {
        let mut c = container_config(name, &FOREVER);
        c.mounts = vec![mount];
        cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(c),
            sandbox_config: Some(pod_config.clone()),
        }
    };
    let mut rt = daemon.runtime().await;
    for (name, mount) in [
        ("not-ro", volume(false, cri::MountPropagation::PropagationPrivate)),
        ("slave", volume(true, cri::MountPropagation::PropagationHostToContainer)),
        ("shared", volume(true, cri::MountPropagation::PropagationBidirectional)),
    ] {
        let err = rt.create_container(create(name, mount)).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{name}: {err:?}");
    }
    let made = rt.create_container(create("rro", volume(true, cri::MountPropagation::PropagationPrivate))).await;
    if rro {
        let id = made.expect("rro supported").into_inner().container_id;
        rt.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.unwrap();
        let touch = exec(&daemon, &id, &["touch", "/vol/inner/file"], 10).await.unwrap();
        assert_ne!(touch.exit_code, 0, "the mount below the volume is read-only too");
    } else {
        assert_eq!(made.unwrap_err().code(), tonic::Code::InvalidArgument);
    }
    let _ = nix::mount::umount2(&inner, nix::mount::MntFlags::MNT_DETACH);
}

/// A bidirectional volume: what the container mounts inside it appears on the host.
#[tokio::test(flavor = "multi_thread")]
async fn bidirectional_propagation_reaches_the_host() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let pod_config = sandbox_config("propagation", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let host = daemon.dir.path().join("shared-volume");
    std::fs::create_dir_all(host.join("target")).unwrap();
    let mut c = container_config("mounter", &FOREVER);
    security(&mut c).privileged = true;
    c.mounts = vec![cri::Mount {
        container_path: "/vol".into(),
        host_path: host.display().to_string(),
        propagation: cri::MountPropagation::PropagationBidirectional as i32,
        ..Default::default()
    }];
    let id = start(&daemon, &pod, &pod_config, c).await;
    let mounted = exec(&daemon, &id, &["mount", "-t", "tmpfs", "tmpfs", "/vol/target"], 10).await.unwrap();
    assert_eq!(mounted.exit_code, 0, "{}", String::from_utf8_lossy(&mounted.stderr));
    exec(&daemon, &id, &["sh", "-c", "echo from-container > /vol/target/note"], 10).await.unwrap();
    let seen = std::fs::read_to_string(host.join("target/note"));
    let _ = nix::mount::umount2(&host.join("target"), nix::mount::MntFlags::MNT_DETACH);
    assert_eq!(seen.expect("the container's mount is visible on the host").trim(), "from-container");
    // The bind mount that made the source shared goes with the container.
    let host_text = host.canonicalize().unwrap().display().to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let made = mounts.lines().any(|l| l.split(' ').nth(4) == Some(host_text.as_str()));
    let mut rt = daemon.runtime().await;
    rt.stop_container(cri::StopContainerRequest { container_id: id.clone(), timeout: 0 }).await.unwrap();
    rt.remove_container(cri::RemoveContainerRequest { container_id: id }).await.unwrap();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left = mounts.lines().any(|l| l.split(' ').nth(4) == Some(host_text.as_str()));
    let _ = nix::mount::umount2(&host, nix::mount::MntFlags::MNT_DETACH);
    assert!(!left, "made a bind mount: {made}; it must not outlive the container");
}

/// Image volumes: an image from the store mounted read-only, whole or a sub path, its
/// digest in ContainerStatus, the image kept while a container uses it, and the refusals.
#[tokio::test(flavor = "multi_thread")]
async fn image_volumes() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let archive = daemon.dir.path().join("multi.tar");
    common::images::multi_layer_image().write_layout_archive(&archive, "localhost/test/multi:v1");
    let out = daemon.command().args(["image", "import"]).arg(&archive).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut images = daemon.images().await;
    let multi_id = images
        .image_status(cri::ImageStatusRequest {
            image: Some(cri::ImageSpec { image: "localhost/test/multi:v1".into(), ..Default::default() }),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner()
        .image
        .unwrap()
        .id;

    let pod_config = sandbox_config("image-volumes", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let volume = |path: &str, image: &str, sub: &str, readonly: bool| cri::Mount {
        container_path: path.into(),
        readonly,
        image: Some(cri::ImageSpec { image: image.into(), ..Default::default() }),
        image_sub_path: sub.into(),
        ..Default::default()
    };
    let mut c = container_config("uses-volumes", &FOREVER);
    c.mounts = vec![
        volume("/multi", "localhost/test/multi:v1", "", true),
        volume("/one", IMAGE, "", true),
        volume("/etc-of-multi", &multi_id, "etc", true),
    ];
    let id = start(&daemon, &pod, &pod_config, c).await;
    let out = |cmd: &[&str]| {
        let (daemon, id) = (&daemon, id.clone());
        let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        async move {
            let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
            exec(daemon, &id, &refs, 10).await.unwrap()
        }
    };
    // Three layers stacked: whiteouts and opaque directories apply.
    assert_eq!(stdout(&out(&["cat", "/multi/etc/motd"]).await), "layer 3");
    assert_eq!(stdout(&out(&["ls", "/multi/data/old"]).await), "b");
    assert_ne!(out(&["cat", "/multi/etc/removed"]).await.exit_code, 0);
    // One layer, bound as it is; binaries in a volume run.
    assert_eq!(out(&["/one/bin/busybox", "true"]).await.exit_code, 0);
    // A sub path.
    assert_eq!(stdout(&out(&["cat", "/etc-of-multi/kept"]).await), "kept");
    // Read-only, all of them.
    for path in ["/multi/new", "/one/new", "/etc-of-multi/new"] {
        assert_ne!(out(&["touch", path]).await.exit_code, 0, "{path} is writable");
    }
    let s = status(&daemon, &id).await;
    let multi = s.mounts.iter().find(|m| m.container_path == "/multi").unwrap();
    assert_eq!(multi.image.as_ref().unwrap().image_ref, multi_id, "the digest of the image in use");

    // In use as a volume: not removable until the container is gone.
    let spec = cri::ImageSpec { image: "localhost/test/multi:v1".into(), ..Default::default() };
    let err = images.remove_image(cri::RemoveImageRequest { image: Some(spec.clone()) }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");

    // Refusals: writable, a missing or escaping sub path, a host path beside the image.
    let mut rt = daemon.runtime().await;
    let mut host_too = volume("/v", IMAGE, "", true);
    host_too.host_path = "/tmp".into();
    for (name, mount) in [
        ("writable", volume("/v", IMAGE, "", false)),
        ("missing-sub", volume("/v", IMAGE, "nope", true)),
        ("escaping-sub", volume("/v", IMAGE, "../..", true)),
        ("host-and-image", host_too),
    ] {
        let mut c = container_config(name, &FOREVER);
        c.mounts = vec![mount];
        let req = cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(c),
            sandbox_config: Some(pod_config.clone()),
        };
        let err = rt.create_container(req).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{name}: {err:?}");
    }

    rt.stop_container(cri::StopContainerRequest { container_id: id.clone(), timeout: 0 }).await.unwrap();
    rt.remove_container(cri::RemoveContainerRequest { container_id: id }).await.unwrap();
    images.remove_image(cri::RemoveImageRequest { image: Some(spec) }).await.expect("removable once unused");
}

/// GetContainerEvents: each step of a pod's and a container's life, including an exit
/// nobody asked for, with the pod's status in every event.
#[tokio::test(flavor = "multi_thread")]
async fn container_events() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let mut events = daemon.runtime().await.get_container_events(cri::GetEventsRequest {}).await.unwrap().into_inner();
    let pod_config = sandbox_config("events", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let id = start(&daemon, &pod, &pod_config, container_config("short", &["sh", "-c", "sleep 1"])).await;
    let mut rt = daemon.runtime().await;
    let mut seen = Vec::new();
    use cri::ContainerEventType::*;
    let mut next = async || {
        let e = tokio::time::timeout(std::time::Duration::from_secs(20), events.next())
            .await
            .expect("an event in time")
            .expect("stream open")
            .expect("no error");
        assert!(e.created_at > 0);
        (e.container_id.clone(), cri::ContainerEventType::try_from(e.container_event_type).unwrap(), e)
    };
    for _ in 0..5 {
        let (who, kind, e) = next().await;
        assert_eq!(e.pod_sandbox_status.as_ref().unwrap().id, pod, "the pod's status rides along");
        seen.push((who, kind));
    }
    let want = vec![
        (pod.clone(), ContainerCreatedEvent),
        (pod.clone(), ContainerStartedEvent),
        (id.clone(), ContainerCreatedEvent),
        (id.clone(), ContainerStartedEvent),
        (id.clone(), ContainerStoppedEvent),
    ];
    assert_eq!(seen, want, "the exit is reported without anyone asking for the container");
    rt.remove_container(cri::RemoveContainerRequest { container_id: id.clone() }).await.unwrap();
    let (who, kind, e) = next().await;
    assert_eq!((who, kind), (id.clone(), ContainerDeletedEvent));
    assert!(e.containers_statuses.is_empty(), "the container is gone from the pod's statuses");
    rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    assert_eq!(next().await.1, ContainerStoppedEvent);
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    let (who, kind, _) = next().await;
    assert_eq!((who, kind), (pod, ContainerDeletedEvent));
}

/// CRI metrics: cadvisor's names with the labels their descriptors declare, and figures
/// read from the container's cgroup.
#[tokio::test(flavor = "multi_thread")]
async fn cri_metrics() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let pod_config = sandbox_config("metrics", &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let id = start(&daemon, &pod, &pod_config, container_config("busy", &FOREVER)).await;
    let mut rt = daemon.runtime().await;
    let descriptors =
        rt.list_metric_descriptors(cri::ListMetricDescriptorsRequest {}).await.unwrap().into_inner().descriptors;
    let keys = |name: &str| descriptors.iter().find(|d| d.name == name).map(|d| d.label_keys.len());
    let all = rt.list_pod_sandbox_metrics(cri::ListPodSandboxMetricsRequest {}).await.unwrap().into_inner().pod_metrics;
    let ours = all.iter().find(|p| p.pod_sandbox_id == pod).expect("the pod's metrics");
    let container = ours.container_metrics.iter().find(|c| c.container_id == id).expect("the container's metrics");
    for m in ours.metrics.iter().chain(&container.metrics) {
        assert_eq!(Some(m.label_values.len()), keys(&m.name), "{} labels match its descriptor", m.name);
    }
    let value = |name: &str| container.metrics.iter().find(|m| m.name == name).map(|m| m.value.unwrap().value);
    assert!(value("container_memory_usage_bytes").unwrap() > 0);
    assert!(value("container_processes").unwrap() >= 1);
    assert!(value("container_threads").unwrap() >= 1);
    assert!(value("container_file_descriptors").unwrap() >= 1);
    assert!(value("container_start_time_seconds").unwrap() > 1_700_000_000);
    assert!(value("container_spec_cpu_shares").is_some());
    let names: Vec<&str> = container.metrics.iter().map(|m| m.name.as_str()).collect();
    if common::node::probe().swap_accounting {
        // cgroup v2 with swap accounting: swap in use and the limit (0: unlimited) are known.
        assert!(value("container_memory_swap").is_some(), "{names:?}");
        assert!(value("container_spec_memory_swap_limit_bytes").is_some(), "{names:?}");
    }
    let label = &container.metrics[0].label_values;
    assert_eq!(label[0], "busy", "{names:?}");
    assert_eq!(label[1], "metrics");
}
