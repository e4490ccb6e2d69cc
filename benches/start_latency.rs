//! Pod + container start latency through the CRI (RunPodSandbox, CreateContainer,
//! StartContainer) against a bare `runc create` + `runc start` of the same bundle and a bare
//! `runc run` of the same root filesystem, the samples of each taken in turn, and CreateContainer with and
//! without spare monitors. Needs root.
//! SWAPCRI_BENCH_RUNC names the runc binary of both (default: runc on PATH).
//!   sudo hack/bench.sh

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::pods::*;
use common::Daemon;
use swapcri::cri;

const RUNS: usize = 20;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn runc() -> String {
    std::env::var("SWAPCRI_BENCH_RUNC").unwrap_or_else(|_| "runc".into())
}

fn handler_config() -> String {
    format!("[runtime.handlers.runc]\nbinary = \"{}\"\n", runc())
}

/// One start through the CRI: the whole pod + container start, and its CreateContainer and
/// StartContainer calls on their own.
#[derive(Default)]
struct CriStart {
    whole: Vec<Duration>,
    create: Vec<Duration>,
    start: Vec<Duration>,
}

impl CriStart {
    /// Starts pod `n` with one container (`host_network` pods skip CNI), then removes it.
    async fn sample(&mut self, daemon: &Daemon, tag: &str, n: usize, host_network: bool) {
        self.sample_then(daemon, tag, n, host_network, |_| {}).await
    }

    /// As `sample`, running `then` with the started container's id before the removal.
    async fn sample_then(&mut self, daemon: &Daemon, tag: &str, n: usize, host_network: bool, then: impl FnOnce(&str)) {
        let logs = daemon.dir.path().join("logs");
        let mut pod_config = sandbox_config(&format!("{tag}-{n}"), &logs);
        let mut ctr = container_config("c", &["sleep", "30"]);
        if host_network {
            let ns = pod_config.linux.as_mut().unwrap().security_context.as_mut().unwrap();
            ns.namespace_options.as_mut().unwrap().network = cri::NamespaceMode::Node as i32;
            ctr.linux.as_mut().unwrap().security_context.as_mut().unwrap().namespace_options =
                ns.namespace_options.clone();
        }
        let started = Instant::now();
        let pod = run_sandbox(daemon, pod_config.clone()).await;
        let mut rt = daemon.runtime().await;
        let creating = Instant::now();
        let request = cri::CreateContainerRequest {
            pod_sandbox_id: pod.clone(),
            config: Some(ctr),
            sandbox_config: Some(pod_config),
        };
        let id = rt.create_container(request).await.expect("CreateContainer").into_inner().container_id;
        let starting = Instant::now();
        rt.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.expect("StartContainer");
        self.start.push(starting.elapsed());
        self.create.push(starting - creating);
        self.whole.push(started.elapsed());
        then(&id);
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    }

    async fn of(daemon: &Daemon, tag: &str, host_network: bool) -> CriStart {
        let mut starts = CriStart::default();
        for n in 0..RUNS {
            starts.sample(daemon, tag, n, host_network).await;
        }
        starts
    }
}

/// A daemon whose pods join a bridge network (bridge + host-local + portmap).
fn bridge_daemon(bridge: &str, work: &std::path::Path, subnet: &str) -> Daemon {
    let dir = work;
    let conflist = serde_json::json!({
        "cniVersion": "1.0.0", "name": "bench",
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": true,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]], "dataDir": dir.join("ipam")}},
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    });
    std::fs::write(dir.join("10-bench.conflist"), conflist.to_string()).unwrap();
    Daemon::start(&format!("{}[network]\nconfig_dir = \"{}\"\n", handler_config(), dir.display()))
}

#[tokio::main]
async fn main() {
    common::require_root();
    let daemon = Daemon::start(&handler_config());
    import_busybox(&daemon);
    // The same daemon with every monitor started for its container, for the spares' share.
    let cold = Daemon::start(&format!("{}[runtime]\nspare_monitors = 0\n", handler_config()));
    import_busybox(&cold);
    let loopback = CriStart::of(&daemon, "lo", false).await;
    let bridge_name = format!("scbench{}", std::process::id() % 10_000);
    let bridged = {
        let work = tempfile::tempdir().unwrap();
        let subnet = common::subnet::free_subnet();
        let bridge_daemon = bridge_daemon(&bridge_name, work.path(), &subnet.cidr());
        import_busybox(&bridge_daemon);
        CriStart::of(&bridge_daemon, "br", false).await
    };
    let _ = Command::new("ip").args(["link", "del", &bridge_name]).output();

    // The same root filesystem (the image's one layer) under bare runc.
    let image = busybox_image();
    let layer = daemon.state_root().join("images/layers").join(&image.diff_ids[0]["sha256:".len()..]);
    let bundle = daemon.dir.path().join("bare");
    std::fs::create_dir_all(&bundle).unwrap();
    let spec = Command::new(runc()).arg("spec").current_dir(&bundle).status().unwrap();
    assert!(spec.success());
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    config["root"] = serde_json::json!({"path": layer, "readonly": true});
    config["process"]["terminal"] = serde_json::json!(false);
    config["process"]["args"] = serde_json::json!(["sleep", "30"]);
    std::fs::write(bundle.join("config.json"), serde_json::to_vec(&config).unwrap()).unwrap();
    let root = daemon.dir.path().join("bare-runc");
    let errors = daemon.dir.path().join("bare-runc.err");
    let runc_cmd = |args: &[&str]| {
        let out = Command::new(runc())
            .arg("--root")
            .arg(&root)
            .args(args)
            // The container inherits runc's stdio: a pipe would stay open for its lifetime.
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&errors).unwrap())
            .status()
            .unwrap();
        assert!(out.success(), "runc {args:?}: {}", std::fs::read_to_string(&errors).unwrap_or_default());
    };
    // Round by round, so that every kind of start sees the node as it is at that moment: the
    // host-network start through the CRI (with spare monitors and without); while that
    // container runs, the same two steps swapcri takes (CreateContainer runs `create`,
    // StartContainer `start`) under bare runc with that container's bundle (its spec, its
    // root filesystem, its pod's namespaces; a cgroup of its own); then a bare `runc run` of
    // the image's root filesystem with runc's default spec.
    let (mut host_network, mut without_spares) = (CriStart::default(), CriStart::default());
    let (mut split_create, mut split_start, mut bare_samples) = (Vec::new(), Vec::new(), Vec::new());
    let same_bundle = daemon.dir.path().join("same-bundle");
    std::fs::create_dir_all(&same_bundle).unwrap();
    for n in 0..RUNS {
        host_network
            .sample_then(&daemon, "host", n, true, |container| {
                let spec = daemon.dir.path().join("run/containers").join(container).join("bundle/config.json");
                let mut spec: serde_json::Value = serde_json::from_slice(&std::fs::read(spec).unwrap()).unwrap();
                let id = format!("split-{n}");
                spec["linux"]["cgroupsPath"] = serde_json::json!(format!("/swapcri-bench-bare/{id}"));
                std::fs::write(same_bundle.join("config.json"), serde_json::to_vec(&spec).unwrap()).unwrap();
                let creating = Instant::now();
                runc_cmd(&["create", "--bundle", same_bundle.to_str().unwrap(), &id]);
                let starting = Instant::now();
                runc_cmd(&["start", &id]);
                split_start.push(starting.elapsed());
                split_create.push(starting - creating);
                let _ = Command::new(runc()).arg("--root").arg(&root).args(["delete", "--force", &id]).output();
            })
            .await;
        without_spares.sample(&cold, "cold", n, true).await;
        let id = format!("bare-{n}");
        let started = Instant::now();
        runc_cmd(&["run", "--detach", "--bundle", bundle.to_str().unwrap(), &id]);
        bare_samples.push(started.elapsed());
        let _ = Command::new(runc()).arg("--root").arg(&root).args(["delete", "--force", &id]).output();
    }
    // The parent cgroup of the bare runs' own (runc removed theirs), in each hierarchy.
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
        let _ = std::fs::remove_dir(hierarchy.path().join("swapcri-bench-bare"));
    }
    let _ = std::fs::remove_dir("/sys/fs/cgroup/swapcri-bench-bare");
    let bare = median(bare_samples);
    let (split_create, split_start) = (median(split_create), median(split_start));
    let split = split_create + split_start;
    let (create, start) = (median(host_network.create.clone()), median(host_network.start.clone()));
    let cri = create + start;
    println!("start latency with {}, median of {RUNS} runs:", runc());
    println!("  RunPodSandbox + CreateContainer + StartContainer:");
    println!("    swapcri, host network (no CNI):                {}", ms(median(host_network.whole)));
    println!("    swapcri, CNI loopback only:                    {}", ms(median(loopback.whole)));
    println!("    swapcri, CNI bridge + host-local + portmap:    {}", ms(median(bridged.whole)));
    println!("  CreateContainer (host network):                  {}", ms(create));
    println!("  StartContainer (host network):                   {}", ms(start));
    println!("  CreateContainer without spare monitors:          {}", ms(median(without_spares.create)));
    println!("  StartContainer without spare monitors:           {}", ms(median(without_spares.start)));
    println!("  bare runc create (the same bundle):              {}", ms(split_create));
    println!("  bare runc start:                                 {}", ms(split_start));
    println!("  bare runc run --detach (runc's default spec):    {}", ms(bare));
    let ratio = cri.as_secs_f64() / split.as_secs_f64();
    println!(
        "  create + start / bare runc create + start: {ratio:.2} (target <= 1.0: {})",
        if ratio <= 1.0 { "ok" } else { "MISSED" }
    );
    println!("  create + start / bare runc run: {:.2}", cri.as_secs_f64() / bare.as_secs_f64());
}
