//! The adaptation against Rust plugins (the stub) over real sockets, with a fake runtime.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::stub::{Handler, Stub};
use super::*;
use crate::config::NriConfig;

struct FakeDomain {
    containers: usize,
    updated: Mutex<Vec<String>>,
}

#[async_trait]
impl Domain for FakeDomain {
    fn snapshot(&self) -> (Vec<api::PodSandbox>, Vec<api::Container>) {
        let pod = api::PodSandbox { id: "p".into(), ..Default::default() };
        let containers = (0..self.containers).map(|n| api::Container { id: format!("c{n}"), ..Default::default() });
        (vec![pod], containers.collect())
    }
    async fn update_container(&self, _plugin: &PluginId, update: &api::ContainerUpdate) -> Result<(), String> {
        self.updated.lock().unwrap().push(update.container_id.clone());
        Ok(())
    }
    async fn evict_container(&self, _plugin: &PluginId, _eviction: &api::ContainerEviction) -> Result<(), String> {
        Err("not here".into())
    }
}

/// Records what it sees in a log shared by every plugin of a test; adjusts `env:A`.
struct Recorder {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    synced: Mutex<usize>,
}

#[async_trait]
impl Handler for Recorder {
    async fn synchronize(
        &self,
        _p: Vec<api::PodSandbox>,
        c: Vec<api::Container>,
    ) -> Result<Vec<api::ContainerUpdate>, String> {
        *self.synced.lock().unwrap() = c.len();
        Ok(vec![api::ContainerUpdate { container_id: "c0".into(), ..Default::default() }])
    }
    async fn create_container(
        &self,
        _p: api::PodSandbox,
        _c: api::Container,
    ) -> Result<api::CreateContainerResponse, String> {
        self.log.lock().unwrap().push(format!("{}:CreateContainer", self.name));
        let env = vec![api::KeyValue { key: "A".into(), value: self.name.into() }];
        Ok(api::CreateContainerResponse {
            adjust: Some(api::ContainerAdjustment { env, ..Default::default() }),
            ..Default::default()
        })
    }
    async fn event(&self, method: &str, _p: Option<api::PodSandbox>, _c: Option<api::Container>) -> Result<(), String> {
        self.log.lock().unwrap().push(format!("{}:{method}", self.name));
        Ok(())
    }
}

/// The runtime lists a plugin once it has its last Synchronize answer, just after the
/// plugin has sent it.
async fn wait_for_plugins(nri: &Nri, count: usize) {
    for _ in 0..250 {
        if nri.plugin_names().len() == count {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{:?} plugins, not {count}", nri.plugin_names());
}

fn config(dir: &std::path::Path) -> NriConfig {
    NriConfig {
        enable: true,
        socket_path: dir.join("nri.sock"),
        plugin_path: dir.join("none"),
        plugin_config_path: dir.join("none"),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_are_synchronised_in_batches_called_in_index_order_and_conflicts_fail() {
    let dir = tempfile::tempdir().unwrap();
    let nri = Nri::new(config(dir.path()));
    let fake = Arc::new(FakeDomain { containers: 150, updated: Mutex::new(Vec::new()) });
    let domain: Arc<dyn Domain> = fake.clone();
    nri.start(Arc::downgrade(&domain)).await.unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let socket = dir.path().join("nri.sock");
    let b = Arc::new(Recorder { name: "b", log: log.clone(), synced: Mutex::new(0) });
    let stub_b = Stub::connect(&socket, "20", "b", b.clone()).await.unwrap();
    assert_eq!(*b.synced.lock().unwrap(), 150, "three batches, one list");
    let a = Arc::new(Recorder { name: "a", log: log.clone(), synced: Mutex::new(0) });
    let stub_a = Stub::connect(&socket, "10", "a", a.clone()).await.unwrap();
    wait_for_plugins(&nri, 2).await;
    assert_eq!(nri.plugin_names(), ["10-a", "20-b"]);
    // Each plugin's Synchronize answer is applied, just after it joins the list.
    for _ in 0..250 {
        if fake.updated.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(*fake.updated.lock().unwrap(), ["c0", "c0"]);
    let pod = api::PodSandbox { id: "p".into(), ..Default::default() };
    let container = api::Container { id: "new".into(), ..Default::default() };
    nri.run_pod_sandbox(&pod).await.unwrap();
    let err = nri.create_container(&pod, &container).await.unwrap_err();
    assert!(
        matches!(&err, NriError::Conflict { field, first, second } if field == "env:A" && first == "10-a" && second == "20-b"),
        "{err}"
    );
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen, ["a:RunPodSandbox", "b:RunPodSandbox", "a:CreateContainer", "b:CreateContainer"]);

    // With one plugin left, its adjustment stands, owned by it.
    drop(stub_b);
    wait_for_plugins(&nri, 1).await;
    let created = nri.create_container(&pod, &container).await.unwrap();
    assert_eq!(created.adjustment.env, [("A".to_string(), Some("a".to_string()))]);
    assert_eq!(created.adjustment.owners["env:A"], "10-a");
    let stats = nri.plugin_stats();
    let b_stats = stats.iter().find(|s| s.plugin == "20-b").unwrap();
    assert!(!b_stats.connected && b_stats.events["CreateContainer"].count == 1, "{b_stats:?}");

    // The same name and index again replaces the earlier connection: a plugin restarted
    // before the runtime saw its old connection close is not locked out.
    let again = Arc::new(Recorder { name: "a2", log: log.clone(), synced: Mutex::new(0) });
    let stub_again = Stub::connect(&socket, "10", "a", again.clone()).await.unwrap();
    assert_eq!(*again.synced.lock().unwrap(), 150);
    wait_for_plugins(&nri, 1).await;
    log.lock().unwrap().clear();
    nri.run_pod_sandbox(&pod).await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["a2:RunPodSandbox"]);
    drop(stub_again);
    drop(stub_a);
}

#[tokio::test]
async fn a_socket_another_runtime_serves_is_left_alone_and_a_stale_one_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nri/nri.sock");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let theirs = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let err = super::connect::bind(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{err}");
    std::os::unix::net::UnixStream::connect(&path).expect("theirs still answers");
    drop(theirs);
    // The file of a listener that is gone is stale: ours takes its place.
    let _ours = super::connect::bind(&path).unwrap();
    std::os::unix::net::UnixStream::connect(&path).expect("ours answers");
    // And a daemon whose socket is taken still starts, without it.
    let mut config = config(dir.path());
    config.socket_path = path.clone();
    let nri = Nri::new(config);
    let domain: Arc<dyn Domain> = Arc::new(FakeDomain { containers: 0, updated: Mutex::default() });
    nri.start(Arc::downgrade(&domain)).await.unwrap();
}

/// Hangs in StartContainer, well past the request timeout.
struct Hangs;

#[async_trait]
impl Handler for Hangs {
    async fn event(&self, method: &str, _p: Option<api::PodSandbox>, _c: Option<api::Container>) -> Result<(), String> {
        if method == "StartContainer" {
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn events_queued_behind_a_plugin_that_hangs_pass_it_over_once_it_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path());
    config.request_timeout_ms = 300;
    let nri = Arc::new(Nri::new(config));
    let domain: Arc<dyn Domain> = Arc::new(FakeDomain { containers: 0, updated: Mutex::default() });
    nri.start(Arc::downgrade(&domain)).await.unwrap();
    let _stub = Stub::connect(&dir.path().join("nri.sock"), "10", "hangs", Arc::new(Hangs)).await.unwrap();
    wait_for_plugins(&nri, 1).await;
    let pod = api::PodSandbox { id: "p".into(), ..Default::default() };
    let started = std::time::Instant::now();
    let starts = (0..3).map(|n| {
        let (nri, pod) = (nri.clone(), pod.clone());
        tokio::spawn(async move {
            let container = api::Container { id: format!("c{n}"), ..Default::default() };
            nri.start_container(&pod, &container).await
        })
    });
    let results: Vec<_> = futures::future::join_all(starts).await.into_iter().map(Result::unwrap).collect();
    let elapsed = started.elapsed();
    // The first call to go out times out and drops the plugin; the two that waited their
    // turn behind it pass it over instead of each waiting a timeout of their own.
    let timeouts = results.iter().filter(|r| matches!(r, Err(NriError::Timeout { .. }))).count();
    assert_eq!((timeouts, results.iter().filter(|r| r.is_ok()).count()), (1, 2), "{results:?}");
    assert!(elapsed < std::time::Duration::from_millis(900), "{elapsed:?}");
    assert!(nri.plugin_names().is_empty());
}
