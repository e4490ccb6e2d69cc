//! The records a released swapcri wrote stay readable by every later build, and by a build
//! whose CRI has fields more or fewer: tests/fixtures/records/<release>/ holds the sandbox and
//! container records of a node with a running pod (a running and an exited container, a
//! shared PID namespace) and a host-network pod, as that release wrote them.
//!
//! Writing a new set (root, the build to capture):
//!   cargo test --test record_fixtures -- --ignored write_fixtures
//! with SWAPCRI_FIXTURE_NAME naming the set.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;
use swapcri::model::container::{ContainerMeta, ContainerState, ContainerStatus};
use swapcri::model::sandbox::{SandboxMeta, SandboxState, SandboxStatus};
use swapcri::store::Records;

const FUTURE_FIELD: &str = "zzFieldOfALaterRelease";

fn fixture_sets() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/records");
    let mut sets: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    sets.sort();
    assert!(!sets.is_empty(), "no fixture sets under {}", root.display());
    sets
}

fn copy_tree(from: &Path, to: &Path, edit: &dyn Fn(Value) -> Value) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target, edit);
        } else {
            let json: Value = serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).unwrap();
            std::fs::write(target, serde_json::to_vec(&edit(json)).unwrap()).unwrap();
        }
    }
}

/// What a build whose CRI and records have one field more wrote: every message gains a field.
/// Objects of strings only (or empty) are maps (labels, annotations, sysctls): they gain nothing.
fn with_future_fields(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let is_map = map.values().all(Value::is_string);
            let mut map: serde_json::Map<String, Value> =
                map.into_iter().map(|(k, v)| (k, with_future_fields(v))).collect();
            if !is_map {
                map.insert(FUTURE_FIELD.into(), serde_json::json!({"nested": [1, 2, 3]}));
            }
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(with_future_fields).collect()),
        other => other,
    }
}

/// What a build that had fewer fields wrote: every optional field below the record's own
/// level is gone (the envelope, the ids, the pod's directory and the configs' presence stay).
fn without_optional_fields(value: Value) -> Value {
    const KEPT: &[&str] = &["version", "data", "id", "sandbox_id", "config", "dir", "metadata", "labels"];
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| KEPT.contains(&k.as_str()))
                .map(|(k, v)| (k, without_optional_fields(v)))
                .collect(),
        ),
        other => other,
    }
}

struct Node {
    sandboxes: Vec<(SandboxMeta, SandboxStatus)>,
    containers: Vec<(ContainerMeta, ContainerStatus)>,
}

fn load(dir: &Path) -> Node {
    let sandboxes = Records::open(&dir.join("sandboxes")).unwrap().load::<SandboxMeta, SandboxStatus>().unwrap();
    let containers = Records::open(&dir.join("containers")).unwrap().load::<ContainerMeta, ContainerStatus>().unwrap();
    for (what, quarantined) in [("sandbox", &sandboxes.quarantined), ("container", &containers.quarantined)] {
        assert!(quarantined.is_empty(), "{} unreadable {what} records: {quarantined:?}", quarantined.len());
    }
    assert!(sandboxes.incomplete.is_empty() && containers.incomplete.is_empty());
    Node { sandboxes: sandboxes.complete, containers: containers.complete }
}

fn sorted_ids(node: &Node) -> (Vec<String>, Vec<String>) {
    let mut pods: Vec<String> = node.sandboxes.iter().map(|(m, _)| m.id.to_string()).collect();
    let mut containers: Vec<String> = node.containers.iter().map(|(m, _)| m.id.to_string()).collect();
    pods.sort();
    containers.sort();
    (pods, containers)
}

#[test]
fn every_released_record_set_loads_with_what_kubelet_and_recovery_need() {
    for set in fixture_sets() {
        let node = load(&set);
        assert_eq!(node.sandboxes.len(), 2, "{}", set.display());
        assert_eq!(node.containers.len(), 3, "{}", set.display());
        for (meta, status) in &node.sandboxes {
            assert_eq!(status.state, SandboxState::Ready, "{}", meta.name);
            assert!(meta.config.metadata.as_ref().is_some_and(|m| !m.uid.is_empty()));
            assert!(meta.dir.ends_with(meta.id.as_str()));
        }
        let states: Vec<ContainerState> = node.containers.iter().map(|(_, s)| s.state).collect();
        assert_eq!(states.iter().filter(|s| **s == ContainerState::Running).count(), 2, "{states:?}");
        for (meta, status) in &node.containers {
            assert!(node.sandboxes.iter().any(|(s, _)| s.id == meta.sandbox_id), "a container's pod is in the set");
            assert!(meta.config.metadata.is_some() && !meta.stop_signal.is_empty() && !meta.log_path.is_empty());
            if status.state == ContainerState::Running {
                assert!(status.monitor.is_some() && status.pid.is_some(), "{}", meta.name);
            }
        }
    }
}

#[test]
fn records_with_a_field_more_or_fewer_load_the_same_objects() {
    for set in fixture_sets() {
        let expected = sorted_ids(&load(&set));
        let newer = tempfile::tempdir().unwrap();
        copy_tree(&set, newer.path(), &with_future_fields);
        let node = load(newer.path());
        assert_eq!(sorted_ids(&node), expected, "written by a later release: {}", set.display());
        let original = load(&set);
        for (meta, _) in &node.containers {
            let before = original.containers.iter().find(|(m, _)| m.id == meta.id).unwrap();
            assert_eq!(meta.config.labels, before.0.config.labels, "kubelet finds its containers by their labels");
        }

        let older = tempfile::tempdir().unwrap();
        copy_tree(&set, older.path(), &without_optional_fields);
        let node = load(older.path());
        assert_eq!(sorted_ids(&node), expected, "written by an earlier release: {}", set.display());
        for (meta, status) in &node.containers {
            assert_eq!(meta.stop_signal, "SIGTERM", "the default stop signal");
            assert_eq!(status.state, ContainerState::Unknown, "a state in doubt is unknown");
        }
        assert!(node.sandboxes.iter().all(|(_, s)| s.state == SandboxState::NotReady), "a pod in doubt is not ready");
    }
}

#[test]
fn a_state_this_build_does_not_know_reads_as_in_doubt() {
    let container: ContainerState = serde_json::from_str("\"Paused\"").unwrap();
    let sandbox: SandboxState = serde_json::from_str("\"Hibernating\"").unwrap();
    assert_eq!((container, sandbox), (ContainerState::Unknown, SandboxState::NotReady));
}

#[tokio::test]
#[ignore = "writes a fixture set from the running build; run by hand when a release changes the records"]
async fn write_fixtures() {
    use common::pods::*;
    use swapcri::cri;
    common::require_root();
    let name = std::env::var("SWAPCRI_FIXTURE_NAME").expect("SWAPCRI_FIXTURE_NAME names the set");
    let daemon = common::Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let mut rt = daemon.runtime().await;

    let mut app = with_pod_pid_namespace(sandbox_config("fixture-app", &logs));
    app.labels.insert("io.kubernetes.pod.uid".into(), "uid-fixture-app".into());
    let app_id = run_sandbox(&daemon, app.clone()).await;
    let mut running = in_pod_pid_namespace(container_config("server", &["sleep", "3600"]));
    running.labels.insert("io.kubernetes.pod.uid".into(), "uid-fixture-app".into());
    start(&daemon, &app_id, &app, running).await;
    let mut job = container_config("job", &["sh", "-c", "exit 3"]);
    job.labels.insert("io.kubernetes.pod.uid".into(), "uid-fixture-app".into());
    let job_id = start(&daemon, &app_id, &app, job).await;
    wait_exited(&daemon, &job_id, std::time::Duration::from_secs(10)).await;

    let mut host = sandbox_config("fixture-host", &logs);
    let options = host.linux.as_mut().unwrap().security_context.as_mut().unwrap().namespace_options.as_mut().unwrap();
    options.network = cri::NamespaceMode::Node as i32;
    let host_id = run_sandbox(&daemon, host.clone()).await;
    start(&daemon, &host_id, &host, container_config("agent", &["sleep", "3600"])).await;

    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/records").join(name);
    for kind in ["sandboxes", "containers"] {
        for entry in std::fs::read_dir(daemon.state_root().join(kind)).unwrap() {
            let entry = entry.unwrap();
            let to = target.join(kind).join(entry.file_name());
            std::fs::create_dir_all(&to).unwrap();
            // The records only (a container's directory also holds its writable layer).
            for file in std::fs::read_dir(entry.path()).unwrap() {
                let file = file.unwrap();
                if !file.file_type().unwrap().is_file() || !file.file_name().to_string_lossy().ends_with(".json") {
                    continue;
                }
                std::fs::copy(file.path(), to.join(file.file_name())).unwrap();
            }
        }
    }
    for pod in [app_id, host_id] {
        rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    }
}
