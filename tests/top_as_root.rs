//! `swapcri top --once` as an operator runs it: one line per running container with its pod,
//! QoS class, priority and swap figures, its swap state where thrash detection runs, and the
//! swap guard's action (none while it does not thrash).

mod common;

use common::pods::*;
use common::{require_root, Daemon};

#[tokio::test(flavor = "multi_thread")]
async fn top_once_lists_running_containers() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let mut pod_config = sandbox_config("web", &daemon.dir.path().join("logs"));
    pod_config.annotations.insert("swapcri.io/priority".into(), "-7".into());
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    start(&daemon, &pod, &pod_config, container_config("app", &["sleep", "60"])).await;
    let exited = start(&daemon, &pod, &pod_config, container_config("done", &["true"])).await;
    wait_exited(&daemon, &exited, std::time::Duration::from_secs(10)).await;

    let out = daemon.command().args(["top", "--once", "--interval", "0.5"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "the header and the one running container:\n{text}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["POD", "CONTAINER", "QOS", "CRIT", "PRIO", "SWAP", "LIMIT", "PEAK", "SWAPIN/S", "PSI10", "STATE", "GUARD"]
    );
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&cells[..5], ["default/web", "app", "BestEffort", "-", "-7"], "{text}");
    let facts = common::node::probe();
    let swap_accounted = facts.cgroup_v2 && facts.swap_accounting;
    assert_eq!(cells[5] != "-", swap_accounted, "swap used where swap is accounted: {text}");
    let detection = facts.cgroup_v2 && std::path::Path::new("/proc/pressure/memory").exists();
    assert_eq!(cells[10], if detection { "normal" } else { "-" }, "{text}");
    assert_eq!(cells[11], "-", "{text}");
}
