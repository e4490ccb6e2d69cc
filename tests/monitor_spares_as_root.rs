//! Spare monitors on real runc: a create hands its container to a monitor started ahead, a
//! spare that died is replaced by a monitor started for the container, and a stopped
//! daemon's spares exit.

mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

/// A process's parent and session, from /proc/PID/stat (after the command's parenthesis).
fn parent_and_session(pid: i32) -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((fields.get(1)?.parse().ok()?, fields.get(3)?.parse().ok()?))
}

/// The daemon's spare monitors: its children running `swapcri monitor -` that are not yet
/// in a session of their own (a monitor handed a container makes one).
fn idle_spares(daemon: u32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline != b"swapcri\0monitor\0-\0" {
            continue;
        }
        if parent_and_session(pid).is_some_and(|(parent, session)| parent == daemon as i32 && session != pid) {
            found.push(pid);
        }
    }
    found
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + common::scaled(Duration::from_secs(10));
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_gone(pid: i32) -> bool {
    // A zombie has no command line left.
    std::fs::read(format!("/proc/{pid}/cmdline")).map_or(true, |c| c.is_empty())
}

#[tokio::test(flavor = "multi_thread")]
async fn creates_take_spares_and_survive_losing_them() {
    require_root();
    let mut daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("spares", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let sleeper = |name: &str| container_config(name, &["sleep", "600"]);

    // The first create starts its monitor; a spare is started after it.
    let first = start(&daemon, &pod, &pod_config, sleeper("first")).await;
    wait_for("a spare monitor after the first create", || idle_spares(daemon.pid()).len() == 1);
    let spare = idle_spares(daemon.pid())[0];

    // The next create hands its container to that spare, which becomes its monitor (a
    // session of its own, the container's init its child); another spare follows.
    let second = start(&daemon, &pod, &pod_config, sleeper("second")).await;
    assert_eq!(parent_and_session(spare).map(|(_, session)| session), Some(spare), "the spare took the container");
    let children = std::fs::read_to_string(format!("/proc/{spare}/task/{spare}/children")).unwrap();
    assert!(!children.trim().is_empty(), "the container's init is the spare's child");
    wait_for("a new spare after the second create", || idle_spares(daemon.pid()).iter().any(|&p| p != spare));

    // A spare killed while it waits: the next create starts a monitor of its own.
    let lost = idle_spares(daemon.pid())[0];
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(lost), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_for("the killed spare gone", || is_gone(lost));
    let third = start(&daemon, &pod, &pod_config, sleeper("third")).await;
    for id in [&first, &second, &third] {
        assert_eq!(status(&daemon, id).await.state, cri::ContainerState::ContainerRunning as i32, "{id}");
    }
    wait_for("a spare again after the third create", || !idle_spares(daemon.pid()).is_empty());

    // The containers are stopped and removed as any others; a stopped daemon's spares exit.
    let mut rt = daemon.runtime().await;
    rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    let waiting = idle_spares(daemon.pid());
    assert!(!waiting.is_empty());
    assert!(daemon.stop_with(nix::sys::signal::Signal::SIGTERM).success());
    wait_for("the spares exit with their daemon", || waiting.iter().all(|&p| is_gone(p)));
}
