//! The guard against a fake runtime (`Pods`) and a container's cgroup files in a temporary
//! directory: what a throttle writes, what it puts back, what it records and where.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;

use super::guard;
use super::pods::{ContainerFacts, Pods};
use super::supervisor::Supervisor;
use crate::config::{Config, GuardMode};
use crate::model::cgroup_files::{CPU_WEIGHT, IO_WEIGHT, MEMORY_SWAP_CURRENT, MEMORY_SWAP_HIGH};
use crate::model::ids::ContainerId;
use crate::model::memory::{MemoryPlan, QosClass};
use crate::store::Records;

#[derive(Default)]
struct FakePods {
    plan: Mutex<Option<MemoryPlan>>,
}

#[async_trait]
impl Pods for FakePods {
    fn running(&self) -> HashMap<ContainerId, PathBuf> {
        HashMap::new()
    }

    fn facts(&self, _: &ContainerId) -> Option<ContainerFacts> {
        Some(ContainerFacts { plan: self.plan.lock().unwrap().clone(), ..Default::default() })
    }

    async fn kill(&self, _: &ContainerId) -> Result<(), String> {
        Ok(())
    }
}

/// A container's cgroup files as a throttle finds them.
fn thrasher_cgroup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (file, value) in [
        (MEMORY_SWAP_CURRENT, "10000\n"),
        (MEMORY_SWAP_HIGH, "max\n"),
        (IO_WEIGHT, "default 100\n"),
        (CPU_WEIGHT, "100\n"),
    ] {
        std::fs::write(dir.path().join(file), value).unwrap();
    }
    dir
}

fn files(dir: &Path) -> Vec<String> {
    [MEMORY_SWAP_HIGH, IO_WEIGHT, CPU_WEIGHT].map(|f| std::fs::read_to_string(dir.join(f)).unwrap()).to_vec()
}

/// A supervisor whose containers' records are under `state`, with one record for `id`.
fn supervisor(state: &Path, mode: GuardMode, id: &ContainerId) -> Supervisor {
    let mut config = Config::default();
    config.guard.action = mode;
    let records = Records::open(&state.join("containers")).unwrap();
    std::fs::create_dir(records.dir(id.as_str())).unwrap();
    Supervisor::new(&config, true, records, None)
}

#[tokio::test]
async fn the_guard_lowers_only_and_puts_back_what_is_still_its_own() {
    let state = tempfile::tempdir().unwrap();
    let id = ContainerId::generate();
    let sup = supervisor(state.path(), GuardMode::Throttle, &id);
    let pods = FakePods::default();
    let cg = thrasher_cgroup();
    let untouched = files(cg.path());
    let record = state.path().join("containers").join(id.as_str()).join("guard.json");

    // Without a memory plan, and as Guaranteed, the container is left alone.
    assert_eq!(guard::engage(&sup, &pods, &id, cg.path()).await.0.action, "exempt");
    *pods.plan.lock().unwrap() = Some(MemoryPlan::of_class(QosClass::Guaranteed, None));
    assert_eq!(guard::engage(&sup, &pods, &id, cg.path()).await.0.action, "exempt");
    assert_eq!(files(cg.path()), untouched);

    *pods.plan.lock().unwrap() = Some(MemoryPlan::of_class(QosClass::Burstable, None));
    let (report, throttle) = guard::engage(&sup, &pods, &id, cg.path()).await;
    assert_eq!(report.action, "throttled", "{report:?}");
    assert_eq!(files(cg.path()), ["8192", "default 10", "10"]);
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(written["version"], 1, "recorded, versioned, before it was written: {written}");
    // kubelet resizes the container meanwhile: its cpu.weight is kept.
    std::fs::write(cg.path().join(CPU_WEIGHT), "39\n").unwrap();
    guard::release(&sup, &id, cg.path(), throttle.unwrap()).await;
    assert_eq!(files(cg.path()), ["max", "default 100", "39\n"]);
    assert!(!record.exists());

    // A daemon that stopped while a throttle held puts it back at its next start.
    let (_, throttle) = guard::engage(&sup, &pods, &id, cg.path()).await;
    assert!(throttle.is_some());
    let running = HashMap::from([(id.clone(), cg.path().to_path_buf())]);
    guard::restore_left_over(&sup, &running).await;
    assert_eq!(files(cg.path()), ["max", "default 100", "39"]);
    assert!(!record.exists());
    // So does one an earlier build recorded (a bare list of writes).
    std::fs::write(cg.path().join(CPU_WEIGHT), "10\n").unwrap();
    std::fs::write(&record, br#"[{"file":"cpu.weight","before":"100","written":"10"}]"#).unwrap();
    guard::restore_left_over(&sup, &running).await;
    assert_eq!(files(cg.path())[2], "100");
    assert!(!record.exists());
    // An unreadable record (torn) is set aside as every record is, and changes nothing.
    std::fs::write(cg.path().join(CPU_WEIGHT), "10\n").unwrap();
    std::fs::write(&record, b"{not json").unwrap();
    guard::restore_left_over(&sup, &running).await;
    assert!(!record.exists() && record.with_file_name("guard.json.corrupt").exists());
    assert_eq!(files(cg.path()), ["max", "default 100", "10\n"]);
    let counted = sup.counts();
    assert_eq!((counted.throttles, counted.restores, counted.kills), (2, 1, 0), "each action is counted");
}

#[tokio::test]
async fn observing_changes_nothing() {
    let state = tempfile::tempdir().unwrap();
    let id = ContainerId::generate();
    let sup = supervisor(state.path(), GuardMode::Observe, &id);
    let pods = FakePods::default();
    *pods.plan.lock().unwrap() = Some(MemoryPlan::of_class(QosClass::Burstable, None));
    let cg = thrasher_cgroup();
    let before = files(cg.path());
    let (report, throttle) = guard::engage(&sup, &pods, &id, cg.path()).await;
    assert_eq!((report.action, throttle.is_none()), ("observe", true));
    assert_eq!(files(cg.path()), before);
    assert!(!state.path().join("containers").join(id.as_str()).join("guard.json").exists());
}

#[tokio::test]
async fn a_pod_is_throttled_by_its_first_thrasher_and_put_back_after_its_last() {
    let state = tempfile::tempdir().unwrap();
    let (a, b) = (ContainerId::generate(), ContainerId::generate());
    let sup = supervisor(state.path(), GuardMode::Throttle, &a);
    std::fs::create_dir(state.path().join("containers").join(b.as_str())).unwrap();
    let pods = FakePods::default();
    *pods.plan.lock().unwrap() = Some(MemoryPlan::of_class(QosClass::Burstable, None));
    // The pod's group (named as kubelet names one) holds the two containers' groups.
    let root = thrasher_cgroup();
    let pod = root.path().join("pod1234");
    std::fs::create_dir(&pod).unwrap();
    for file in [MEMORY_SWAP_CURRENT, MEMORY_SWAP_HIGH, IO_WEIGHT, CPU_WEIGHT] {
        std::fs::copy(root.path().join(file), pod.join(file)).unwrap();
    }
    let (dir_a, dir_b) = (pod.join("a"), pod.join("b"));
    for dir in [&dir_a, &dir_b] {
        std::fs::create_dir(dir).unwrap();
        for file in [MEMORY_SWAP_CURRENT, MEMORY_SWAP_HIGH, IO_WEIGHT, CPU_WEIGHT] {
            std::fs::copy(pod.join(file), dir.join(file)).unwrap();
        }
    }
    let pod_weight = || std::fs::read_to_string(pod.join(IO_WEIGHT)).unwrap();
    let copy = |id: &ContainerId| state.path().join("containers").join(id.as_str()).join("guard-pod.json");
    let read =
        |id: &ContainerId| -> serde_json::Value { serde_json::from_slice(&std::fs::read(copy(id)).unwrap()).unwrap() };

    let (report, throttle_a) = guard::engage(&sup, &pods, &a, &dir_a).await;
    assert_eq!(pod_weight(), "default 10");
    assert!(report.detail.contains("pod io.weight: default 100 -> default 10"), "{report:?}");
    let (_, throttle_b) = guard::engage(&sup, &pods, &b, &dir_b).await;
    assert_eq!(read(&a), read(&b), "each holder keeps the same copy");
    assert_eq!(read(&a)["data"]["dir"], pod.to_str().unwrap());
    // The first one released leaves the pod to the other.
    guard::release(&sup, &a, &dir_a, throttle_a.unwrap()).await;
    assert_eq!(pod_weight(), "default 10");
    assert!(!copy(&a).exists() && copy(&b).exists());
    guard::release(&sup, &b, &dir_b, throttle_b.unwrap()).await;
    assert_eq!(pod_weight(), "default 100");
    assert!(!copy(&b).exists());

    // A daemon that stopped with the pod throttled puts it back at its next start, once,
    // from either copy, whether the containers still run or not.
    guard::engage(&sup, &pods, &a, &dir_a).await;
    guard::engage(&sup, &pods, &b, &dir_b).await;
    assert_eq!(pod_weight(), "default 10");
    let mut config = Config::default();
    config.guard.action = GuardMode::Throttle;
    let restarted = Supervisor::new(&config, true, Records::open(&state.path().join("containers")).unwrap(), None);
    guard::restore_left_over(&restarted, &HashMap::new()).await;
    assert_eq!(pod_weight(), "default 100");
    assert!(!copy(&a).exists() && !copy(&b).exists());

    // A container whose parent is no pod's group (one kubelet did not name, or the cgroup
    // root without an io.weight) throttles itself only.
    for parent in ["shared", "podnoweight"] {
        let inner = root.path().join(parent).join("c");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(inner.join(IO_WEIGHT), "default 100\n").unwrap();
        if parent == "shared" {
            std::fs::write(root.path().join(parent).join(IO_WEIGHT), "default 100\n").unwrap();
        }
        let (_, throttle) = guard::engage(&sup, &pods, &a, &inner).await;
        assert!(throttle.unwrap().pod.is_none() && !copy(&a).exists(), "{parent}");
        assert_eq!(std::fs::read_to_string(root.path().join(IO_WEIGHT)).unwrap(), "default 100\n");
    }
}
