//! Many clients at once, random interleavings of pod and container RPCs on shared pods, each
//! call with a random deadline or none (a deadline that passes cancels the client's wait, not
//! the work). No answer may be Internal or Unknown; once the calls have settled, the
//! daemon's list and the OCI runtime's agree; removing everything through the CRI leaves no
//! mount, process, runtime container, record or run directory.
//!   SWAPCRI_FUZZ_SEED (default: from the clock, printed), SWAPCRI_FUZZ_OPS per client (40).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

const CLIENTS: u64 = 4;

const POD_NAMES: u64 = 3;

/// xorshift64*: small, seedable, good enough to pick calls.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }

    fn pick(&mut self, ids: &[String]) -> String {
        if ids.is_empty() {
            return "0".repeat(64); // an id nobody has: NotFound is a fine answer
        }
        ids[self.below(ids.len() as u64) as usize].clone()
    }
}

fn request<T>(message: T, dice: &mut Dice) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if dice.below(2) == 0 {
        request.set_timeout(Duration::from_millis(1 + dice.below(400)));
    }
    request
}

/// An answer the fuzzer accepts: success, or an error that names the caller's problem or
/// the race it lost; never an internal failure.
fn acceptable(status: &tonic::Status) -> bool {
    use tonic::Code::*;
    [NotFound, FailedPrecondition, DeadlineExceeded, Cancelled, AlreadyExists, InvalidArgument, Unavailable]
        .contains(&status.code())
}

/// The 64-hex ids a text names.
fn ids_in(text: &str) -> BTreeSet<&str> {
    text.split(|c: char| !c.is_ascii_hexdigit()).filter(|w| w.len() == 64).collect()
}

/// The daemon's log lines that name an id the failure names, or the pod of one, to tell
/// the race it lost.
fn log_of_ids_in(daemon: &Daemon, message: &str) -> String {
    let log = daemon.log();
    let named = ids_in(message);
    let mut ids = named.clone();
    log.lines().filter(|l| named.iter().any(|id| l.contains(id))).for_each(|l| ids.extend(ids_in(l)));
    log.lines().filter(|l| ids.iter().any(|id| l.contains(id))).collect::<Vec<_>>().join("\n")
}

/// The pods, and the containers in each state, as the daemon lists them.
struct Listed {
    pods: Vec<String>,
    ready: Vec<String>,
    created: Vec<String>,
    running: Vec<String>,
    all: Vec<String>,
}

async fn list(daemon: &Daemon) -> Listed {
    let mut rt = daemon.runtime().await;
    let pods = rt.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await.unwrap().into_inner().items;
    let containers = rt.list_containers(cri::ListContainersRequest::default()).await.unwrap().into_inner().containers;
    let in_state = |state: cri::ContainerState| {
        containers.iter().filter(|c| c.state == state as i32).map(|c| c.id.clone()).collect::<Vec<_>>()
    };
    let ready = cri::PodSandboxState::SandboxReady as i32;
    Listed {
        ready: pods.iter().filter(|p| p.state == ready).map(|p| p.id.clone()).collect(),
        pods: pods.into_iter().map(|p| p.id).collect(),
        created: in_state(cri::ContainerState::ContainerCreated),
        running: in_state(cri::ContainerState::ContainerRunning),
        all: containers.iter().map(|c| c.id.clone()).collect(),
    }
}

async fn one_call(
    daemon: &Daemon,
    dice: &mut Dice,
    logs: &Path,
    exec: bool,
) -> Result<&'static str, (&'static str, tonic::Status)> {
    let mut rt = daemon.runtime().await;
    let Listed { pods, ready, created, running, all: containers } = list(daemon).await;
    // Mostly calls that can succeed, sometimes any id: a start or exec that loses a race.
    let (ready, created, running) =
        if dice.below(4) == 0 { (&pods, &containers, &containers) } else { (&ready, &created, &running) };
    let pod_config = with_pod_pid_namespace(sandbox_config(&format!("fuzz-{}", dice.below(POD_NAMES)), logs));
    // Weighted so that pods live long enough for containers to run in them.
    let weights: [u64; 9] = [6, 3, 2, 10, 8, 4, 3, if exec { 8 } else { 0 }, 4];
    let mut roll = dice.below(weights.iter().sum());
    let choice = weights
        .iter()
        .position(|w| {
            roll < *w || {
                roll -= w;
                false
            }
        })
        .unwrap();
    match choice {
        0 => {
            let run = cri::RunPodSandboxRequest { config: Some(pod_config), runtime_handler: String::new() };
            named("RunPodSandbox", rt.run_pod_sandbox(request(run, dice)).await)
        }
        1 => {
            let stop = cri::StopPodSandboxRequest { pod_sandbox_id: dice.pick(&pods) };
            named("StopPodSandbox", rt.stop_pod_sandbox(request(stop, dice)).await)
        }
        2 => {
            let remove = cri::RemovePodSandboxRequest { pod_sandbox_id: dice.pick(&pods) };
            named("RemovePodSandbox", rt.remove_pod_sandbox(request(remove, dice)).await)
        }
        3 => {
            let name = format!("c{}", dice.below(3));
            let shared = dice.below(2) == 0;
            let config = container_config(&name, &["sleep", "600"]);
            let config = if shared { in_pod_pid_namespace(config) } else { config };
            let create = cri::CreateContainerRequest {
                pod_sandbox_id: dice.pick(ready),
                config: Some(config),
                sandbox_config: Some(pod_config),
            };
            named("CreateContainer", rt.create_container(request(create, dice)).await)
        }
        4 => {
            let start = cri::StartContainerRequest { container_id: dice.pick(created) };
            named("StartContainer", rt.start_container(request(start, dice)).await)
        }
        5 => {
            let stop =
                cri::StopContainerRequest { container_id: dice.pick(&containers), timeout: dice.below(2) as i64 };
            named("StopContainer", rt.stop_container(request(stop, dice)).await)
        }
        6 => {
            let remove = cri::RemoveContainerRequest { container_id: dice.pick(&containers) };
            named("RemoveContainer", rt.remove_container(request(remove, dice)).await)
        }
        7 => {
            let cmd = vec!["true".to_string()];
            let exec = cri::ExecSyncRequest { container_id: dice.pick(running), cmd, timeout: 5 };
            named("ExecSync", rt.exec_sync(request(exec, dice)).await)
        }
        _ => {
            let status = cri::PodSandboxStatusRequest { pod_sandbox_id: dice.pick(&pods), verbose: true };
            named("PodSandboxStatus", rt.pod_sandbox_status(request(status, dice)).await)
        }
    }
}

/// An answer with the name of the call that got it.
fn named<T>(
    call: &'static str,
    answer: Result<T, tonic::Status>,
) -> Result<&'static str, (&'static str, tonic::Status)> {
    answer.map(|_| call).map_err(|e| (call, e))
}

/// The daemon's list and the runtime's agree once the calls cut short have finished.
async fn lists_agree(daemon: &Daemon) {
    let deadline = Instant::now() + common::scaled(Duration::from_secs(30));
    loop {
        let listed = list(daemon).await;
        let ours: BTreeSet<String> = listed.created.into_iter().chain(listed.running).collect();
        let runc = runc_list(daemon);
        if ours == runc {
            return;
        }
        assert!(Instant::now() < deadline, "listed live {ours:?}, the runtime holds {runc:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A bridge network of the test's own (host-local addresses in `data_dir`), so that every
/// pod takes an address and a veth that its removal must give back.
fn bridge_conflist(bridge: &str, data_dir: &Path, subnet: &str) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "swapcri-fuzz",
        "plugins": [{
            "type": "bridge",
            "bridge": bridge,
            "ipMasq": false,
            "ipam": { "type": "host-local", "ranges": [[{ "subnet": subnet }]], "dataDir": data_dir },
        }],
    })
    .to_string()
}

/// What the run left on the node: each kind with what remains of it.
fn leftovers(daemon: &Daemon, bridge: &str, ipam: &Path, ids: &BTreeSet<String>) -> Vec<(&'static str, Vec<String>)> {
    let root = daemon.dir.path();
    let entries = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default()
    };
    let mut left = vec![
        ("runtime containers", runc_list(daemon).into_iter().collect()),
        ("mounts", mounts_under(root)),
        ("addresses", entries(&ipam.join("swapcri-fuzz")).into_iter().filter(|n| n.starts_with("10.")).collect()),
        ("veths", {
            let out = std::process::Command::new("ip").args(["-o", "link", "show", "master", bridge]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect()
        }),
        ("processes", processes_naming(root, daemon.pid())),
        ("cgroups", cgroups_named(ids)),
    ];
    for dir in ["state/sandboxes", "state/containers", "state/cni", "run/sandboxes", "run/containers"] {
        left.push((dir, entries(&root.join(dir)).into_iter().filter(|n| !n.starts_with('.')).collect()));
    }
    left.retain(|(_, what)| !what.is_empty());
    left
}

/// Processes other than the daemon whose command line names its directory (monitors,
/// namespace holders, runtime calls).
fn processes_naming(dir: &Path, daemon: u32) -> Vec<String> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if pid != daemon && pid != std::process::id() && cmdline.contains(&needle) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

/// Cgroup directories (any hierarchy, a few levels down) whose name holds one of `ids`.
fn cgroups_named(ids: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![(std::path::PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if ids.iter().any(|id| name.contains(id.as_str())) {
                found.push(entry.path().display().to_string());
            } else if depth < 5 {
                dirs.push((entry.path(), depth + 1));
            }
        }
    }
    found
}

/// Cleaning up: a removal cut short at its deadline may still be finishing, so NotFound is
/// its doing; anything else is a failure.
fn gone_meanwhile<T>(answer: Result<T, tonic::Status>) {
    if let Err(e) = answer.as_ref().map(|_| ()) {
        assert_eq!(e.code(), tonic::Code::NotFound, "cleaning up: {e:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_calls_with_random_cancellation_keep_the_node_whole() {
    require_root();
    assert!(Path::new("/usr/lib/cni/bridge").exists(), "install containernetworking-plugins");
    let seed = std::env::var("SWAPCRI_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    let ops: u64 = std::env::var("SWAPCRI_FUZZ_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    eprintln!("concurrent fuzzer: SWAPCRI_FUZZ_SEED={seed}, {CLIENTS} clients x {ops} calls");
    let work = tempfile::tempdir().unwrap();
    let bridge = Bridge(format!("scfz{}", std::process::id() % 100_000));
    let subnet = common::subnet::free_subnet();
    let (net_d, ipam) = (work.path().join("net.d"), work.path().join("ipam"));
    std::fs::create_dir_all(&net_d).unwrap();
    std::fs::write(net_d.join("10-fuzz.conflist"), bridge_conflist(&bridge.0, &ipam, &subnet.cidr())).unwrap();
    let daemon = Daemon::start(&format!("[network]\nconfig_dir = \"{}\"\n", net_d.display()));
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let (daemon, logs) = (&daemon, &logs);
    // An exec killed half-way into a container that is being stopped is handed to PID 1 of
    // the node; until PID 1 reaps it, the container's PID namespace (its init with it) cannot
    // finish exiting. Where PID 1 does not reap, the run leaves ExecSync out.
    let exec = common::node::init_reaps_orphans();
    if !exec {
        eprintln!("PID 1 of this node does not reap orphans: ExecSync left out");
    }
    // One pod with a running container before the clients start, so that every run has
    // something to race over whatever the dice say.
    let warm = with_pod_pid_namespace(sandbox_config("fuzz-0", logs));
    let pod = run_sandbox(daemon, warm.clone()).await;
    start(daemon, &pod, &warm, container_config("c0", &["sleep", "600"])).await;
    let clients = (0..CLIENTS).map(|n| async move {
        let mut dice = Dice(seed.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
        let (mut cut, mut done) = (0, std::collections::BTreeMap::<&str, u32>::new());
        let mut refused = std::collections::BTreeMap::<String, u32>::new();
        for _ in 0..ops {
            match one_call(daemon, &mut dice, logs, exec).await {
                Ok(call) => *done.entry(call).or_default() += 1,
                Err((call, status)) if !acceptable(&status) => {
                    // The whole log outlives the test's directory, for the race's other side.
                    let kept = std::env::temp_dir().join(format!("swapcri-concurrent-fuzz-{seed}.log"));
                    let _ = std::fs::copy(daemon.log_path(), &kept);
                    let ps = std::process::Command::new("ps").args(["-eo", "pid,ppid,stat,wchan:32,args"]).output();
                    if let (Ok(ps), Ok(mut log)) = (ps, std::fs::OpenOptions::new().append(true).open(&kept)) {
                        let _ = std::io::Write::write_all(&mut log, &ps.stdout);
                    }
                    let log = log_of_ids_in(daemon, status.message());
                    panic!(
                        "{call} answered {:?}: {} (seed {seed}; daemon log kept in {})\n{log}",
                        status.code(),
                        status.message(),
                        kept.display()
                    );
                }
                Err((call, status)) => {
                    cut += matches!(status.code(), tonic::Code::DeadlineExceeded | tonic::Code::Cancelled) as u32;
                    *refused.entry(format!("{call} {:?}", status.code())).or_default() += 1;
                }
            }
        }
        (cut, done, refused)
    });
    let (mut cut, mut done, mut refused) =
        (0, std::collections::BTreeMap::<&str, u32>::new(), std::collections::BTreeMap::<String, u32>::new());
    for (c, d, r) in futures::future::join_all(clients).await {
        cut += c;
        d.into_iter().for_each(|(call, n)| *done.entry(call).or_default() += n);
        r.into_iter().for_each(|(call, n)| *refused.entry(call).or_default() += n);
    }
    eprintln!("{cut} calls ended at their deadline; answered: {done:?}; refused: {refused:?}");
    lists_agree(daemon).await;

    // Every id the run made, from the log (calls cut short made some the client never saw).
    let ids: BTreeSet<String> = ids_in(&daemon.log()).into_iter().map(String::from).collect();
    let mut rt = daemon.runtime().await;
    for pod in listed(daemon).await.0 {
        gone_meanwhile(rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await);
        gone_meanwhile(rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await);
    }
    assert_eq!(listed(daemon).await, (vec![], vec![]));
    // Monitors exit a moment after their container is deleted.
    let deadline = Instant::now() + common::scaled(Duration::from_secs(10));
    loop {
        let left = leftovers(daemon, &bridge.0, &ipam, &ids);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left after removing everything (seed {seed}): {left:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("{} pods and containers made; nothing left after removing them", ids.len());
}
