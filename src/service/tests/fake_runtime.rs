//! Service-level behaviour against a fake OCI runtime: what the services ask of the runtime
//! and how they react to its answers, without runc.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cri;

use crate::error::{Error, ErrorKind};
use crate::model::container::{ContainerMeta, ContainerState, ContainerStatus};
use crate::model::ids::ContainerId;
use crate::model::sandbox::ProcessRef;

use super::fixture::{fixture, fixture_with, state_of, write_spec, Fixture};

#[tokio::test]
async fn stop_sends_the_stop_signal_and_returns_when_the_container_exits() {
    for signal in ["SIGTERM", "SIGQUIT"] {
        let f = fixture(ContainerState::Running, signal, signal, false);
        f.service.stop_container(f.id.as_str(), Duration::from_secs(30)).await.unwrap();
        assert_eq!(f.fake.calls(), vec![format!("kill {signal}")]);
        let status = state_of(&f);
        assert_eq!((status.state, status.exit_code), (ContainerState::Exited, 143));
    }
}

#[tokio::test]
async fn the_stop_signal_goes_to_the_live_init_without_the_runtime() {
    // Not SIGINT or SIGQUIT: a shell's background job starts with both ignored, and a
    // non-interactive shell cannot trap a signal ignored on entry.
    let f = fixture(ContainerState::Running, "SIGUSR1", "", false);
    // The test process stands in for the monitor, a child of it for the container's init: a
    // shell that says which signal reached it. Other tests of this process reap any child
    // (the monitor's reaper), so the child's end is watched in /proc, not waited for.
    let dir = tempfile::tempdir().unwrap();
    let said = dir.path().join("signal");
    let ready = dir.path().join("ready");
    let script = format!(
        "trap 'echo USR1 > {0}; exit 0' USR1; trap 'echo TERM > {0}; exit 0' TERM; : > {1}; while :; do sleep 0.05; done",
        said.display(),
        ready.display()
    );
    let init = std::process::Command::new("sh").arg("-c").arg(script).spawn().unwrap();
    // Signalled before its traps are set, the shell would die of the signal and say nothing.
    while !ready.exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = init.id() as i32;
    let mut status = state_of(&f);
    status.pid = Some(pid);
    f.service.registry.save_container_status(&f.id, status).unwrap();
    let fake = f.fake.clone();
    let watcher = std::thread::spawn(move || {
        let init_ref = ProcessRef::of(pid).unwrap();
        while init_ref.is_alive() {
            std::thread::sleep(Duration::from_millis(5));
        }
        fake.exit(0, 1);
        drop(init);
    });
    f.service.stop_container(f.id.as_str(), Duration::from_secs(30)).await.unwrap();
    watcher.join().unwrap();
    assert_eq!(std::fs::read_to_string(&said).unwrap().trim(), "USR1");
    assert!(f.fake.calls().is_empty(), "{:?}", f.fake.calls());
}

#[tokio::test]
async fn a_container_that_exits_during_start_finishes_after_it_started() {
    let f = fixture(ContainerState::Created, "SIGTERM", "start", false);
    f.service.start_container(f.id.as_str()).await.unwrap();
    let status = state_of(&f);
    assert_eq!(status.state, ContainerState::Exited);
    assert!(status.started_at > 0, "{status:?}");
    assert!(status.finished_at >= status.started_at, "{status:?}");
}

/// The exit watch picking the exit up while the start is being recorded (it reads the record
/// as Created, the start saves Running) never leaves a record without its start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exit_the_watch_picks_up_during_the_start_keeps_the_start() {
    for round in 0..100 {
        let f = fixture(ContainerState::Created, "SIGTERM", "start", false);
        let done = std::sync::atomic::AtomicBool::new(false);
        crate::blocking::run(|| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        f.service.registry.refresh(&f.id);
                    }
                });
                let started = tokio::runtime::Handle::current().block_on(f.service.start_container(f.id.as_str()));
                done.store(true, std::sync::atomic::Ordering::Relaxed);
                started.unwrap();
            })
        });
        let status = state_of(&f);
        assert_eq!(status.state, ContainerState::Exited, "round {round}");
        assert!(status.started_at > 0 && status.finished_at >= status.started_at, "round {round}: {status:?}");
        let loaded =
            crate::blocking::run(|| f.service.registry.container_records().load::<ContainerMeta, ContainerStatus>())
                .unwrap();
        let on_disk = &loaded.complete.iter().find(|(m, _)| m.id == f.id).expect("the record").1;
        assert_eq!((on_disk.state, on_disk.started_at), (status.state, status.started_at), "round {round}");
    }
}

/// A save of a live status taken from a copy read before the exit was picked up (a start's,
/// an update's) keeps the exit: the container stays exited, with what the save brought (the
/// start time), and no Started event follows its Stopped.
#[tokio::test]
async fn a_stale_live_save_keeps_the_exit_picked_up_meanwhile() {
    use crate::service::owners::events::EventKind;
    let f = fixture(ContainerState::Running, "SIGTERM", "", false);
    let mut events = f.service.subscribe_events();
    let mut stale = state_of(&f);
    f.fake.exit(3, 1_000);
    assert_eq!(state_of(&f).state, ContainerState::Exited, "the exit is picked up");
    stale.started_at = 2_000;
    f.service.registry.save_container_status(&f.id, stale).unwrap();
    let status = state_of(&f);
    assert_eq!((status.state, status.exit_code), (ContainerState::Exited, 3), "{status:?}");
    assert_eq!((status.started_at, status.finished_at), (2_000, 2_000), "never finished before it started");
    let mut kinds = Vec::new();
    while let Ok(event) = events.try_recv() {
        kinds.push(event.kind);
    }
    assert_eq!(kinds, vec![EventKind::Stopped], "{kinds:?}");
}

#[tokio::test]
async fn stop_escalates_to_sigkill_of_every_process_after_the_timeout() {
    let f = fixture(ContainerState::Running, "SIGTERM", "SIGKILL", false);
    let started = Instant::now();
    f.service.stop_container(f.id.as_str(), Duration::from_millis(200)).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(f.fake.calls(), vec!["kill SIGTERM", "kill SIGKILL all"]);
    assert_eq!(state_of(&f).exit_code, 137);
}

#[tokio::test]
async fn stop_with_zero_timeout_kills_at_once() {
    let f = fixture(ContainerState::Running, "SIGTERM", "SIGKILL", false);
    f.service.stop_container(f.id.as_str(), Duration::ZERO).await.unwrap();
    assert_eq!(f.fake.calls(), vec!["kill SIGKILL all"]);
}

/// A running container whose cgroup is `/pods/c` under a cgroup v2 root of its own (the
/// temporary directory returned); the fake runtime ends it on `exit_on`.
fn in_cgroup(exit_on: &'static str) -> (tempfile::TempDir, Fixture) {
    let root = tempfile::tempdir().unwrap();
    let cgroup_root = root.path().to_path_buf();
    let f = fixture_with(ContainerState::Running, "SIGTERM", exit_on, false, |c| c.cgroup_root = cgroup_root);
    let mut status = state_of(&f);
    status.cgroup = Some("/pods/c".into());
    f.service.registry.save_container_status(&f.id, status).unwrap();
    (root, f)
}

#[tokio::test]
async fn a_kill_of_every_process_writes_cgroup_kill_and_execs_no_runtime() {
    let (root, f) = in_cgroup("");
    let kill_file = root.path().join("pods/c/cgroup.kill");
    std::fs::create_dir_all(kill_file.parent().unwrap()).unwrap();
    std::fs::write(&kill_file, "").unwrap();
    // The kernel's part: the write ends the processes, the monitor records the exit.
    let fake = f.fake.clone();
    let watched = kill_file.clone();
    let kernel = std::thread::spawn(move || {
        while std::fs::read_to_string(&watched).unwrap() != "1" {
            std::thread::sleep(Duration::from_millis(1));
        }
        fake.exit(137, 1);
    });
    f.service.stop_container(f.id.as_str(), Duration::ZERO).await.unwrap();
    kernel.join().unwrap();
    assert!(f.fake.calls().is_empty(), "{:?}", f.fake.calls());
    assert_eq!(state_of(&f).exit_code, 137);
}

#[tokio::test]
async fn a_cgroup_that_cannot_kill_leaves_the_kill_to_the_runtime() {
    // No cgroup.kill there: a kernel before 5.14.
    let (root, f) = in_cgroup("SIGKILL");
    f.service.stop_container(f.id.as_str(), Duration::ZERO).await.unwrap();
    assert_eq!(f.fake.calls(), vec!["kill SIGKILL all"]);
    assert!(!root.path().join("pods/c/cgroup.kill").exists());
}

#[tokio::test]
async fn a_kill_of_every_process_that_misses_is_followed_by_a_kill_of_the_init() {
    let f = fixture(ContainerState::Running, "SIGTERM", "SIGKILL init", false);
    f.service.stop_container(f.id.as_str(), Duration::ZERO).await.unwrap();
    assert_eq!(f.fake.calls(), vec!["kill SIGKILL all", "kill SIGKILL"]);
    assert_eq!(state_of(&f).exit_code, 137);
}

#[tokio::test]
async fn stop_of_an_exited_or_unknown_container_does_nothing() {
    let f = fixture(ContainerState::Exited, "SIGTERM", "SIGTERM", false);
    f.service.stop_container(f.id.as_str(), Duration::from_secs(1)).await.unwrap();
    f.service.stop_container(&"b".repeat(64), Duration::from_secs(1)).await.unwrap();
    assert!(f.fake.calls().is_empty());
}

#[tokio::test]
async fn update_sends_only_the_given_values_and_records_them() {
    let f = fixture(ContainerState::Running, "SIGTERM", "", false);
    let resources = cri::LinuxContainerResources {
        cpu_shares: 512,
        memory_limit_in_bytes: 1 << 30,
        unified: [("memory.high".to_string(), "900000000".to_string())].into(),
        ..Default::default()
    };
    f.service.update_container(f.id.as_str(), Some(resources.clone())).await.unwrap();
    let calls = f.fake.calls();
    let sent: serde_json::Value = serde_json::from_str(calls[0].strip_prefix("update ").unwrap()).unwrap();
    assert_eq!(
        sent,
        serde_json::json!({"cpu": {"shares": 512}, "memory": {"limit": 1073741824}, "unified": {"memory.high": "900000000"}})
    );
    assert_eq!(state_of(&f).resources, Some(resources));
}

#[tokio::test]
async fn update_of_an_exited_container_is_refused_and_changes_nothing() {
    let f = fixture(ContainerState::Exited, "SIGTERM", "", false);
    let resources = cri::LinuxContainerResources { cpu_shares: 2, ..Default::default() };
    let err = f.service.update_container(f.id.as_str(), Some(resources)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    assert!(f.fake.calls().is_empty());
    assert_eq!(state_of(&f).resources, Some(cri::LinuxContainerResources::default()));
}

#[tokio::test]
async fn a_runtime_refusing_an_update_keeps_the_old_resources() {
    let f = fixture(ContainerState::Running, "SIGTERM", "", true);
    let resources = cri::LinuxContainerResources { cpu_shares: 2, ..Default::default() };
    let err: Error = f.service.update_container(f.id.as_str(), Some(resources)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Internal);
    assert_eq!(state_of(&f).resources, Some(cri::LinuxContainerResources::default()));
}

#[tokio::test]
async fn owned_pods_carry_the_sum_of_their_containers_reservations() {
    use crate::model::memory::MemoryPlan;
    let cgroot = tempfile::tempdir().unwrap();
    let f = reservation_fixture(cgroot.path());
    let plan = |min: u64| -> MemoryPlan {
        let json = serde_json::json!({
            "qos_class": "Burstable", "qos_source": "annotation", "request": null, "limit": 0, "critical": null,
            "swap_max": {"value": null, "reason": ""}, "min": {"value": min.to_string(), "reason": ""},
            "low": {"value": null, "reason": ""}, "high": {"value": null, "reason": ""},
        });
        serde_json::from_value(json).unwrap()
    };
    // The running container holds 1 MiB; a new one asks for 2 MiB more.
    let mut status = state_of(&f);
    status.memory_plan = Some(plan(1 << 20));
    f.service.registry.save_container_status(&f.id, status).unwrap();
    let sandbox = f
        .service
        .registry
        .find_sandbox(f.service.registry.find_container(f.id.as_str()).unwrap().meta.sandbox_id.as_str())
        .unwrap();
    assert_eq!(plan(2 << 20).reserved(), (2 << 20, 0));
    f.service
        .memory
        .apply_pod_reservations(&sandbox, &f.service.registry.owned_pod_reservations(), Some(&plan(2 << 20)))
        .await
        .unwrap();
    let read = |p: &str| std::fs::read_to_string(cgroot.path().join(p)).unwrap();
    assert_eq!(read("swapcri/pod/memory.min"), (3u64 << 20).to_string());
    assert_eq!(read("swapcri/memory.min"), (3u64 << 20).to_string(), "the common parent covers every pod");
    assert_eq!(read("swapcri/pod/memory.low"), "0");
    assert_eq!(read("cgroup.subtree_control"), "+memory");
    // Once the container has exited, only live containers count.
    let mut status = state_of(&f);
    status.state = ContainerState::Exited;
    f.service.registry.save_container_status(&f.id, status).unwrap();
    fresh_reservation_files(cgroot.path());
    f.service
        .memory
        .apply_pod_reservations(&sandbox, &f.service.registry.owned_pod_reservations(), None)
        .await
        .unwrap();
    assert_eq!(read("swapcri/pod/memory.min"), "0");
}

/// Live (not zombie) processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) && !stat.contains(") Z ") {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn exec_sync_runs_through_the_runtime() {
    let f = fixture(ContainerState::Running, "SIGTERM", "", false);
    write_spec(&f);
    let cmd = ["sh", "-c", "echo out; echo err >&2; exit 3"].map(String::from).to_vec();
    let out = f.service.exec_sync(f.id.as_str(), cmd, None).await.unwrap();
    assert_eq!((out.stdout.as_slice(), out.stderr.as_slice(), out.exit_code), (&b"out\n"[..], &b"err\n"[..], 3));
    assert_eq!(f.fake.calls(), [format!("exec {}", f.id)]);
}

#[tokio::test]
async fn an_exec_that_could_not_join_a_stopping_container_is_the_stops_doing() {
    let f = fixture(ContainerState::Running, "SIGTERM", "", false);
    write_spec(&f);
    // A live init under the (stand-in) monitor: the container is not stopping.
    let mut init = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let mut status = state_of(&f);
    status.pid = Some(init.id() as i32);
    f.service.registry.save_container_status(&f.id, status).unwrap();
    let cmd = vec!["true".to_string()];
    f.fake.exec_setns_failures.store(1, std::sync::atomic::Ordering::Relaxed);
    let err = f.service.exec_sync(f.id.as_str(), cmd.clone(), None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Internal, "a running container's exec failure is the runtime's: {err}");
    // Its init gone: the container is stopping, and the failure is the stop's doing.
    init.kill().unwrap();
    init.wait().unwrap();
    f.fake.exec_setns_failures.store(1, std::sync::atomic::Ordering::Relaxed);
    let err = f.service.exec_sync(f.id.as_str(), cmd, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition, "{err}");
    assert_eq!(f.fake.calls().len(), 2, "never tried twice: {:?}", f.fake.calls());
}

#[tokio::test]
async fn exec_sync_timeout_kills_the_command_and_its_children_first() {
    let f = fixture(ContainerState::Running, "SIGTERM", "", false);
    write_spec(&f);
    let marker = format!("27.{}", std::process::id());
    let cmd = vec!["sh".into(), "-c".into(), format!("sleep {marker} & sleep {marker}")];
    let timeout = Some(std::time::Duration::from_millis(300));
    let err = f.service.exec_sync(f.id.as_str(), cmd, timeout).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded, "{err}");
    // Nothing the command started outlives the call (critest checks with pgrep right after).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !processes_with(&marker).is_empty() {
        assert!(std::time::Instant::now() < deadline, "still running: {:?}", processes_with(&marker));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[tokio::test]
async fn an_exec_timing_out_before_the_runtime_started_it_is_killed_once_it_starts() {
    let f = fixture(ContainerState::Running, "SIGTERM", "", false);
    write_spec(&f);
    f.fake.exec_setup_ms.store(800, std::sync::atomic::Ordering::Relaxed);
    let marker = format!("29.{}", std::process::id());
    let cmd = vec!["sleep".into(), marker.clone()];
    let timeout = Some(std::time::Duration::from_millis(200));
    let err = f.service.exec_sync(f.id.as_str(), cmd, timeout).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded, "{err}");
    assert!(processes_with(&marker).is_empty(), "still running: {:?}", processes_with(&marker));
    // Nothing starts later either.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert!(processes_with(&marker).is_empty(), "started after the timeout: {:?}", processes_with(&marker));
}

#[tokio::test]
async fn exec_sync_of_a_stopped_container_is_refused_before_the_runtime() {
    let f = fixture(ContainerState::Exited, "SIGTERM", "", false);
    write_spec(&f);
    let err = f.service.exec_sync(f.id.as_str(), vec!["true".into()], None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    assert!(f.fake.calls().is_empty());
}

/// The pod reservation files of a temporary cgroup root, as the kernel would have them:
/// libcgroups writes into existing files, at their start. The kernel replaces a value on
/// each write; emptying the files first does that for plain files, and leaves them empty
/// where nothing is written.
fn fresh_reservation_files(cgroot: &std::path::Path) {
    std::fs::write(cgroot.join("cgroup.controllers"), "cpu io memory pids\n").unwrap();
    for dir in ["swapcri", "swapcri/pod"] {
        std::fs::create_dir_all(cgroot.join(dir)).unwrap();
        for file in ["memory.min", "memory.low"] {
            std::fs::write(cgroot.join(dir).join(file), "").unwrap();
        }
    }
}

/// A fixture with reservation "min" on a temporary cgroup root.
fn reservation_fixture(cgroot: &std::path::Path) -> Fixture {
    std::fs::write(cgroot.join("cgroup.subtree_control"), "").unwrap();
    fresh_reservation_files(cgroot);
    let root = cgroot.to_path_buf();
    fixture_with(ContainerState::Running, "SIGTERM", "", false, |c| {
        c.memory_qos.reservation = crate::config::Reservation::Min;
        c.cgroup_root = root;
    })
}

/// Resources that say the container's memory request is `request` (kubelet's memory.min).
fn resources_requesting(request: u64) -> cri::LinuxContainerResources {
    cri::LinuxContainerResources {
        memory_limit_in_bytes: 1 << 30,
        unified: [("memory.min".to_string(), request.to_string())].into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_resize_refreshes_the_reservations_of_a_pod_swapcri_owns() {
    let cgroot = tempfile::tempdir().unwrap();
    let f = reservation_fixture(cgroot.path());
    let read = |p: &str| std::fs::read_to_string(cgroot.path().join(p)).unwrap();
    f.service.update_container(f.id.as_str(), Some(resources_requesting(64 << 20))).await.unwrap();
    assert_eq!(read("swapcri/pod/memory.min"), (64u64 << 20).to_string());
    assert_eq!(read("swapcri/memory.min"), (64u64 << 20).to_string());
    // Shrinking the request shrinks the sums: nothing stale stays behind.
    fresh_reservation_files(cgroot.path());
    f.service.update_container(f.id.as_str(), Some(resources_requesting(16 << 20))).await.unwrap();
    assert_eq!(read("swapcri/pod/memory.min"), (16u64 << 20).to_string());
    assert_eq!(read("swapcri/memory.min"), (16u64 << 20).to_string());
}

#[tokio::test]
async fn a_resize_leaves_kubelets_pod_cgroup_alone() {
    // Under kubelet the reservation design is kubelet's ("follow-kubelet"): it writes the pod
    // and QoS parents itself.
    let cgroot = tempfile::tempdir().unwrap();
    let root = cgroot.path().to_path_buf();
    let f = fixture_with(ContainerState::Running, "SIGTERM", "", false, |c| c.cgroup_root = root);
    {
        let mut state = f.service.registry.write();
        let sandbox = state.sandboxes.values_mut().next().unwrap();
        let mut meta = (*sandbox.meta).clone();
        meta.owns_cgroup_parent = false;
        meta.cgroup_parent = "/kubepods/burstable/pod1".into();
        sandbox.meta = Arc::new(meta);
    }
    f.service.update_container(f.id.as_str(), Some(resources_requesting(64 << 20))).await.unwrap();
    assert!(!cgroot.path().join("kubepods").exists(), "kubelet's pod cgroup is kubelet's to write");
    assert!(!cgroot.path().join("swapcri").exists());
    assert_eq!(state_of(&f).memory_plan.unwrap().reserved(), (64 << 20, 0), "the plan itself follows the resize");
}

#[tokio::test]
async fn removal_deletes_from_the_runtime_only_what_the_monitor_did_not() {
    // In the record (written after the delete), marked beside it (the record written
    // before), or not at all.
    for (in_record, marked) in [(true, false), (false, true), (false, false)] {
        let monitor_deleted = in_record || marked;
        let cgroot = tempfile::tempdir().unwrap();
        let root = cgroot.path().to_path_buf();
        let f = fixture_with(ContainerState::Exited, "SIGTERM", "", false, |c| c.cgroup_root = root);
        // The monitor recorded the exit and has ended (a process that no longer runs).
        let gone = ProcessRef { pid: std::process::id() as i32, start_time: 0 };
        f.service.registry.write().containers.get_mut(&f.id).unwrap().status.monitor = Some(gone);
        let record = crate::model::container::ExitRecord {
            exit_code: 0,
            finished_at: 1,
            oom_killed: false,
            runtime_deleted: in_record,
        };
        let exit_file = f.service.registry.exit_file(&f.id);
        std::fs::create_dir_all(exit_file.parent().unwrap()).unwrap();
        std::fs::write(&exit_file, serde_json::to_vec(&record).unwrap()).unwrap();
        if marked {
            std::fs::write(crate::model::container::runtime_deleted_mark(&exit_file), b"").unwrap();
        }
        f.service.remove_container(f.id.as_str()).await.unwrap();
        let expected = if monitor_deleted { vec![] } else { vec![format!("delete {}", f.id)] };
        assert_eq!(f.fake.calls(), expected, "monitor deleted: {monitor_deleted}");
        assert!(f.service.registry.find_container(f.id.as_str()).is_err());
    }
}

#[tokio::test]
async fn recovery_leaves_a_container_whose_record_is_unreadable_as_it_is_until_released() {
    let f = fixture(ContainerState::Running, "SIGTERM", "", false);
    let records = f.service.registry.container_records();
    // One container record that no longer parses, with a run directory of its own.
    let lost = ContainerId::generate();
    std::fs::create_dir_all(records.dir(lost.as_str())).unwrap();
    crate::blocking::run(|| records.write_status(lost.as_str(), &serde_json::json!({}))).unwrap();
    std::fs::write(records.dir(lost.as_str()).join("meta.json"), b"{\"truncated\":").unwrap();
    let run_dir = f.service.config.run_root.join("containers").join(lost.as_str());
    std::fs::create_dir_all(run_dir.join("rootfs")).unwrap();

    for start in 0..2 {
        f.service.recover().unwrap();
        assert!(f.fake.calls().is_empty(), "start {start}: the runtime is not asked to touch it: {:?}", f.fake.calls());
        assert!(run_dir.exists(), "start {start}: its run directory stays");
        assert!(records.dir(&format!("{lost}.corrupt")).exists(), "the record is kept aside");
        assert!(f.service.registry.find_container(lost.as_str()).is_err(), "and it is not listed");
        let condition = f.service.records_condition();
        assert!(!condition.status && condition.message.contains(lost.as_str()), "{condition:?}");
    }

    // The operator releases it: the next start removes it from the runtime and forgets it.
    crate::service::quarantine::release(f.service.config.state_root.as_path(), lost.as_str()).unwrap();
    f.service.recover().unwrap();
    assert_eq!(f.fake.calls(), vec![format!("delete {lost}")]);
    assert!(!run_dir.exists(), "its run directory is gone");
    assert!(!records.dir(&format!("{lost}.release")).exists(), "the record is gone");
    assert!(f.service.records_condition().status, "nothing is kept aside any more");
}

#[tokio::test]
async fn recovery_deletes_what_the_runtime_holds_and_no_record_names() {
    let f = fixture(ContainerState::Running, "SIGTERM", "", false);
    let orphan = ContainerId::generate();
    let run_dir = f.service.config.run_root.join("containers").join(orphan.as_str());
    std::fs::create_dir_all(&run_dir).unwrap();
    // The pod's recorded container, one no record names, and one not of swapcri's form.
    *f.fake.listed.lock().unwrap() = vec![f.id.to_string(), orphan.to_string(), "someone-elses".into()];
    f.service.recover().unwrap();
    assert_eq!(f.fake.calls(), vec![format!("delete {orphan}")]);
    assert!(!run_dir.exists(), "its run directory is gone");
    assert!(f.service.registry.find_container(f.id.as_str()).is_ok(), "the recorded one stays");
}

#[tokio::test]
async fn a_container_the_guard_ends_reports_swap_thrashing() {
    use crate::policy::guard::Candidate;
    use crate::policy::thrash::Figures;
    let Fixture { _dir, service, fake, id } = fixture(ContainerState::Running, "SIGTERM", "SIGKILL", false);
    let service = Arc::new(service);
    let victim = Candidate { key: id.clone(), priority: -5, beyond_request: 96 << 20, swapins_per_second: 11_800.0 };
    let figures = Figures { some_percent: 57.0, full_percent: 41.25, swapins_per_second: 11_800.0 };
    let state = crate::policy::thrash::ThrashState::Thrashing;
    let pods: Arc<dyn crate::swap::Pods> = service.clone();
    crate::swap::guard::kill(service.swap.clone(), pods, victim, state, Duration::from_secs(31), figures).await;
    assert_eq!(fake.calls(), vec!["kill SIGKILL all"]);
    use crate::metrics::MetricsSource;
    assert_eq!(service.swap_actions().kills, 1, "the metrics count the kill");
    let status = service.registry.find_container(id.as_str()).unwrap().status;
    assert_eq!(
        (status.state, status.exit_code, status.reason.as_str()),
        (ContainerState::Exited, 137, "SwapThrashing")
    );
    assert_eq!(
        status.message,
        "ended by the swap guard: still thrashing 31 s after its throttle (memory some 57.0%, full 41.2%, 11800 swap-ins/s; priority -5, 96.0 MiB beyond its request)"
    );
}
