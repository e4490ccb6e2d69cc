//! Pod-level sharing and container options on real runc: IPC and /dev/shm shared by a
//! pod's containers, a shared PID namespace, users, read-only root filesystems, the
//! RuntimeDefault seccomp profile, log reopening and OOM kills.

mod common;

use std::time::Duration;

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

fn stdout(r: &cri::ExecSyncResponse) -> String {
    String::from_utf8_lossy(&r.stdout).trim().to_string()
}

fn security(c: &mut cri::ContainerConfig) -> &mut cri::LinuxContainerSecurityContext {
    c.linux.get_or_insert_with(Default::default).security_context.get_or_insert_with(Default::default)
}

#[tokio::test(flavor = "multi_thread")]
async fn containers_share_ipc_and_shm_and_options_apply() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("shared", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let forever = ["sh", "-c", "while true; do sleep 1; done"];
    let a = start(&daemon, &pod, &pod_config, container_config("a", &forever)).await;
    let mut b_config = container_config("b", &forever);
    security(&mut b_config).run_as_user = Some(cri::Int64Value { value: 1000 });
    security(&mut b_config).readonly_rootfs = true;
    security(&mut b_config).seccomp = Some(cri::SecurityProfile {
        profile_type: cri::security_profile::ProfileType::RuntimeDefault as i32,
        ..Default::default()
    });
    let b = start(&daemon, &pod, &pod_config, b_config).await;

    // Same IPC and network namespaces, separate PID namespaces.
    let ns = |id: String, kind: &'static str| {
        let daemon = &daemon;
        async move { stdout(&exec(daemon, &id, &["readlink", &format!("/proc/self/ns/{kind}")], 10).await.unwrap()) }
    };
    assert_eq!(ns(a.clone(), "ipc").await, ns(b.clone(), "ipc").await);
    assert_eq!(ns(a.clone(), "net").await, ns(b.clone(), "net").await);
    assert_ne!(ns(a.clone(), "pid").await, ns(b.clone(), "pid").await);
    // /dev/shm is the pod's: what one writes, the other reads.
    exec(&daemon, &a, &["sh", "-c", "echo from-a > /dev/shm/note"], 10).await.unwrap();
    assert_eq!(stdout(&exec(&daemon, &b, &["cat", "/dev/shm/note"], 10).await.unwrap()), "from-a");
    let mounts = stdout(&exec(&daemon, &a, &["cat", "/proc/mounts"], 10).await.unwrap());
    assert!(mounts.lines().any(|l| l.contains(" /dev/shm tmpfs ")), "{mounts}");

    // User, read-only root filesystem and seccomp in b.
    assert_eq!(stdout(&exec(&daemon, &b, &["id", "-u"], 10).await.unwrap()), "1000");
    let touch = exec(&daemon, &b, &["touch", "/newfile"], 10).await.unwrap();
    assert_ne!(touch.exit_code, 0, "read-only root filesystem");
    // The RuntimeDefault profile lets ordinary work through.
    assert_eq!(stdout(&exec(&daemon, &b, &["sh", "-c", "seq 3 | wc -l"], 10).await.unwrap()), "3");
    let status = daemon
        .runtime()
        .await
        .container_status(cri::ContainerStatusRequest { container_id: b.clone(), verbose: true })
        .await
        .unwrap()
        .into_inner();
    let info: serde_json::Value = serde_json::from_str(&status.info["info"]).unwrap();
    assert_eq!(info["runtimeSpec"]["linux"]["seccomp"]["defaultAction"], "SCMP_ACT_ERRNO");
    assert!(info["pid"].as_i64().unwrap() > 0);

    // Log rotation: kubelet renames the file and asks for a reopen.
    let mut logger_config =
        container_config("logger", &["sh", "-c", "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.05; done"]);
    logger_config.log_path = "logger.log".into();
    let logger = start(&daemon, &pod, &pod_config, logger_config).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::rename(logs.join("logger.log"), logs.join("logger.log.1")).unwrap();
    daemon
        .runtime()
        .await
        .reopen_container_log(cri::ReopenContainerLogRequest { container_id: logger.clone() })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let old = std::fs::read_to_string(logs.join("logger.log.1")).unwrap();
    let new = std::fs::read_to_string(logs.join("logger.log")).unwrap();
    let numbers =
        |text: &str| text.lines().filter_map(|l| l.rsplit(' ').next()?.parse::<u32>().ok()).collect::<Vec<_>>();
    let (old, new) = (numbers(&old), numbers(&new));
    assert!(!old.is_empty() && !new.is_empty());
    assert_eq!(new[0], old.last().unwrap() + 1, "no line lost or repeated across the reopen");

    daemon.runtime().await.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    assert!(mounts_under(daemon.dir.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_pid_namespace_and_oom_kill() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let mut pod_config = sandbox_config("pidshare", &logs);
    let ns = pod_config.linux.as_mut().unwrap().security_context.as_mut().unwrap().namespace_options.as_mut().unwrap();
    ns.pid = cri::NamespaceMode::Pod as i32;
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let forever = ["sh", "-c", "while true; do sleep 1; done"];
    let shared = |name: &str| {
        let mut c = container_config(name, &forever);
        security(&mut c).namespace_options.as_mut().unwrap().pid = cri::NamespaceMode::Pod as i32;
        c
    };
    let a = start(&daemon, &pod, &pod_config, shared("a")).await;
    let b = start(&daemon, &pod, &pod_config, shared("b")).await;
    let ps = stdout(&exec(&daemon, &b, &["ps", "-o", "pid,args"], 10).await.unwrap());
    let sleepers = ps.lines().filter(|l| l.contains("while true")).count();
    assert_eq!(sleepers, 2, "b sees a's process too:\n{ps}");
    assert!(ps.lines().any(|l| l.trim_start().starts_with("1 ")), "the pod's init holds pid 1:\n{ps}");
    let _ = a;

    // A container that allocates past its memory limit is OOM-killed and says so.
    let mut hog = container_config("hog", &["sh", "-c", "dd if=/dev/zero of=/dev/null bs=256M count=1"]);
    hog.linux.as_mut().unwrap().resources =
        Some(cri::LinuxContainerResources { memory_limit_in_bytes: 64 * 1024 * 1024, ..Default::default() });
    security(&mut hog).namespace_options.as_mut().unwrap().pid = cri::NamespaceMode::Container as i32;
    let hog = start(&daemon, &pod, &pod_config, hog).await;
    let exited = wait_exited(&daemon, &hog, Duration::from_secs(30)).await;
    assert_eq!(exited.reason, "OOMKilled", "exit {} {}", exited.exit_code, exited.message);
    assert_eq!(exited.exit_code, 137);

    daemon.runtime().await.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    assert!(mounts_under(daemon.dir.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn tty_updates_v1_notes_and_monitor_cgroup() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("misc", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;

    // A tty container: output comes through the pty into the log.
    let mut tty = container_config("tty", &["sh", "-c", "tty; echo on-a-terminal"]);
    tty.tty = true;
    let tty = start(&daemon, &pod, &pod_config, tty).await;
    assert_eq!(wait_exited(&daemon, &tty, Duration::from_secs(20)).await.exit_code, 0);
    let log = std::fs::read_to_string(logs.join("tty.log")).unwrap();
    assert!(log.contains("stdout F /dev/pts/"), "{log}");
    assert!(log.contains("on-a-terminal"), "{log}");

    // cgroup v2 values cannot apply on this node's v1 memory controller: dropped, noted.
    // kubelet names every huge page size the kernel has (limit 0: none); a node whose hugetlb
    // controller is not where runc looks still starts the container.
    let hugepage_limits = std::fs::read_dir("/sys/kernel/mm/hugepages")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| {
                    let kb: u64 =
                        e.file_name().to_str()?.strip_prefix("hugepages-")?.strip_suffix("kB")?.parse().ok()?;
                    let page_size =
                        if kb.is_multiple_of(1 << 20) { format!("{}GB", kb >> 20) } else { format!("{}MB", kb >> 10) };
                    Some(cri::HugepageLimit { page_size, limit: 0 })
                })
                .collect()
        })
        .unwrap_or_default();
    // kubelet creates containers by image id and passes the pod's own name for the image:
    // statuses and listings give that name (kubelet compares it with the pod's spec).
    let image_id = daemon
        .images()
        .await
        .image_status(cri::ImageStatusRequest {
            image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner()
        .image
        .unwrap()
        .id;
    let mut worker = container_config("worker", &["sh", "-c", "while true; do sleep 1; done"]);
    worker.image = Some(cri::ImageSpec {
        image: image_id.clone(),
        user_specified_image: "test/busybox".into(),
        ..Default::default()
    });
    worker.linux.as_mut().unwrap().resources = Some(cri::LinuxContainerResources {
        memory_limit_in_bytes: 128 * 1024 * 1024,
        unified: [("memory.swap.max".to_string(), "0".to_string())].into(),
        hugepage_limits,
        ..Default::default()
    });
    let worker = start(&daemon, &pod, &pod_config, worker).await;
    let verbose = daemon
        .runtime()
        .await
        .container_status(cri::ContainerStatusRequest { container_id: worker.clone(), verbose: true })
        .await
        .unwrap()
        .into_inner();
    let shown = verbose.status.as_ref().unwrap().image.as_ref().unwrap();
    assert_eq!((shown.image.as_str(), shown.user_specified_image.as_str()), ("test/busybox", "test/busybox"));
    assert_eq!(verbose.status.as_ref().unwrap().image_ref, image_id);
    let listed = daemon
        .runtime()
        .await
        .list_containers(cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter { id: worker.clone(), ..Default::default() }),
        })
        .await
        .unwrap()
        .into_inner()
        .containers;
    assert_eq!(listed[0].image.as_ref().unwrap().image, "test/busybox");
    // By id alone (crictl): the image's tag.
    let mut by_id = container_config("by-id", &["true"]);
    by_id.image = Some(cri::ImageSpec { image: image_id.clone(), ..Default::default() });
    let by_id = start(&daemon, &pod, &pod_config, by_id).await;
    assert_eq!(status(&daemon, &by_id).await.image.unwrap().image, IMAGE);
    let info: serde_json::Value = serde_json::from_str(&verbose.info["info"]).unwrap();
    let v1_host = !std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    if v1_host {
        assert!(info["warnings"].to_string().contains("memory.swap.max"), "{}", info["warnings"]);
    }

    // In-place update: the new limit reaches the cgroup and the status reports it.
    daemon
        .runtime()
        .await
        .update_container_resources(cri::UpdateContainerResourcesRequest {
            container_id: worker.clone(),
            linux: Some(cri::LinuxContainerResources {
                memory_limit_in_bytes: 256 * 1024 * 1024,
                cpu_shares: 256,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let updated = status(&daemon, &worker).await;
    assert_eq!(updated.resources.unwrap().linux.unwrap().memory_limit_in_bytes, 256 * 1024 * 1024);
    let pid = info["pid"].as_i64().unwrap();
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let memory_dir = if v1_host {
        let rel = cgroups
            .lines()
            .find(|l| l.split(':').nth(1).is_some_and(|c| c.split(',').any(|x| x == "memory")))
            .unwrap()
            .splitn(3, ':')
            .nth(2)
            .unwrap()
            .to_string();
        format!("/sys/fs/cgroup/memory{rel}/memory.limit_in_bytes")
    } else {
        format!(
            "/sys/fs/cgroup{}/memory.max",
            cgroups.lines().find(|l| l.starts_with("0::")).unwrap().trim_start_matches("0::")
        )
    };
    assert_eq!(std::fs::read_to_string(&memory_dir).unwrap().trim(), (256 * 1024 * 1024).to_string(), "{memory_dir}");

    // The monitor lives outside the daemon's cgroup (moved there right after it started).
    let monitor = info["monitor"]["pid"].as_i64().unwrap();
    let in_monitor_cgroup = |text: &str| text.lines().any(|l| l.starts_with("0::") && l.contains("swapcri-monitors"));
    let mut monitor_cgroup = String::new();
    for _ in 0..200 {
        monitor_cgroup = std::fs::read_to_string(format!("/proc/{monitor}/cgroup")).unwrap();
        if in_monitor_cgroup(&monitor_cgroup) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(in_monitor_cgroup(&monitor_cgroup), "{monitor_cgroup}");

    daemon.runtime().await.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}
