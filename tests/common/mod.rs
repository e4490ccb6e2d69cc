//! Shared helpers for the integration tests: the daemon under test, a CRI client over its
//! unix socket, a local registry (Debian's docker-registry) and images built from busybox.
#![allow(dead_code)]

pub mod http;
pub mod images;
pub mod node;
pub mod pods;
pub mod registry;
pub mod spdy_client;
pub mod subnet;
pub mod ws_client;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use swapcri::cri;
use swapcri::cri::image_service_client::ImageServiceClient;
use swapcri::cri::runtime_service_client::RuntimeServiceClient;
use tonic::transport::{Channel, Endpoint, Uri};

/// A network of the loopback interface only (Debian's containernetworking-plugins).
pub const LOOPBACK_CONFLIST: &str = r#"{"cniVersion": "1.0.0", "name": "lo-only", "plugins": [{"type": "loopback"}]}"#;

/// A swapcri daemon on a private socket and state root, killed when dropped.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    /// The swapcri binary `restart` starts (this build unless a test names another).
    pub binary: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// Writes a config with private paths plus `extra` TOML, and starts the daemon. Unless
    /// `extra` configures the network, pods get a loopback-only CNI network of their own.
    pub fn start(extra: &str) -> Daemon {
        let mut daemon = Daemon::configure(extra);
        daemon.restart();
        daemon
    }

    /// Writes the config as `start` does but leaves the daemon stopped, for a test that
    /// prepares its directories first; `restart` starts it.
    pub fn configure(extra: &str) -> Daemon {
        let dir = tempfile::Builder::new().prefix("swapcri-test-").tempdir().unwrap();
        let root = dir.path();
        let config_path = root.join("config.toml");
        let mut extra = extra.to_string();
        if !extra.contains("[network]") {
            let net_d = root.join("net.d");
            std::fs::create_dir_all(&net_d).unwrap();
            std::fs::write(net_d.join("99-loopback.conflist"), LOOPBACK_CONFLIST).unwrap();
            extra.push_str(&format!("\n[network]\nconfig_dir = \"{}\"\n", net_d.display()));
        }
        if !extra.contains("[nri]") {
            // NRI is on by default: each test daemon serves it on a socket of its own, with no
            // pre-installed plugins, never the node's.
            extra.push_str(&format!(
                "\n[nri]\nsocket_path = \"{root}/run/nri.sock\"\nplugin_path = \"{root}/nri-plugins\"\nplugin_config_path = \"{root}/nri-conf\"\n",
                root = root.display()
            ));
        }
        let config = format!(
            "socket = \"{root}/run/swapcri.sock\"\nstate_root = \"{root}/state\"\nrun_root = \"{root}/run\"\nlog_level = \"swapcri=debug,info\"\n{extra}\n",
            root = root.display()
        );
        std::fs::write(&config_path, config).unwrap();
        Daemon { dir, config_path, binary: PathBuf::from(env!("CARGO_BIN_EXE_swapcri")), child: None }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("run/swapcri.sock")
    }

    pub fn state_root(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("daemon.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The swapcri command with this daemon's config.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--config").arg(&self.config_path);
        cmd
    }

    /// Runs `swapcri client ARGS` with `input` on its stdin: (exit code, stdout, stderr).
    pub fn client_with_input(&self, args: &[&str], input: &[u8]) -> (i32, String, String) {
        use std::io::Write;
        let mut child = self
            .command()
            .arg("client")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A client that fails before reading its input closes the pipe: its output tells.
        if let Err(e) = child.stdin.take().unwrap().write_all(input) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "writing the client's stdin");
        }
        let out = child.wait_with_output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    }

    /// Starts the daemon (again) and waits until its socket answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "daemon already running");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path()).unwrap();
        let child = self
            .command()
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start swapcri");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::os::unix::net::UnixStream::connect(self.socket()).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("swapcri exited with {status}:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "swapcri did not open its socket:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` and waits for the process to exit; returns its exit status.
    pub fn stop_with(&mut self, signal: nix::sys::signal::Signal) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("daemon running");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        child.wait().unwrap()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("daemon running").id()
    }

    /// The daemon's resident memory in KiB: `VmRSS` now, `VmHWM` its peak.
    pub fn memory_kib(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with(&format!("{key}:"))).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Sets the daemon's peak resident memory back to what it holds now (Linux 4.0+), so
    /// `VmHWM` afterwards measures what came after; returns that resident size in KiB.
    pub fn reset_peak_memory(&self) -> u64 {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").unwrap();
        self.memory_kib("VmRSS")
    }

    /// Fails unless the daemon's peak since `reset_peak_memory` stayed within `bound_mib`
    /// above `before_kib`; returns the peak in KiB.
    pub fn assert_memory_within(&self, before_kib: u64, bound_mib: u64, what: &str) -> u64 {
        let peak = self.memory_kib("VmHWM");
        let grown = peak.saturating_sub(before_kib);
        assert!(grown < bound_mib << 10, "{what}: the daemon grew by {grown} KiB, more than {bound_mib} MiB");
        peak
    }

    pub async fn runtime(&self) -> RuntimeServiceClient<Channel> {
        RuntimeServiceClient::new(connect(&self.socket()).await)
    }

    pub async fn images(&self) -> ImageServiceClient<Channel> {
        ImageServiceClient::new(connect(&self.socket()).await)
    }
}

impl Daemon {
    /// Stops and removes every pod the daemon still has, so no container outlives its test
    /// (monitors keep containers running without the daemon). Runs on a thread of its own:
    /// the caller may be inside a tokio runtime.
    fn remove_all_pods(&self) {
        let socket = self.socket();
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let work = async {
                    let mut rt = RuntimeServiceClient::new(connect(&socket).await);
                    let pods = rt.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await?.into_inner().items;
                    for pod in pods {
                        let id = pod.id;
                        rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: id.clone() }).await?;
                        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: id }).await?;
                    }
                    Ok::<_, tonic::Status>(())
                };
                match tokio::time::timeout(Duration::from_secs(60), work).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => eprintln!("test cleanup: {e}"),
                    Err(_) => eprintln!("test cleanup timed out"),
                }
            });
        });
        let _ = cleanup.join();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.remove_all_pods();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// runc 1.4.3: `SWAPCRI_TEST_RUNC_NEW`, else built from hack/runc by hack/tools.sh
/// (cached in /var/cache/swapcri-tools; hack/test.sh builds it first).
pub fn newer_runc() -> PathBuf {
    if let Some(path) = std::env::var_os("SWAPCRI_TEST_RUNC_NEW") {
        return PathBuf::from(path);
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/tools.sh");
    let out = std::process::Command::new(&tools).args(["/var/cache/swapcri-tools", "runc"]).output().unwrap();
    assert!(out.status.success(), "building runc 1.4.3: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// CRIU 4.1.1: `SWAPCRI_TEST_CRIU`, else built by hack/criu.sh (cached in
/// /var/cache/swapcri-tools; hack/test.sh builds it first).
pub fn criu() -> PathBuf {
    if let Some(path) = std::env::var_os("SWAPCRI_TEST_CRIU") {
        return PathBuf::from(path);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/criu.sh");
    let out = std::process::Command::new(&script).arg("/var/cache/swapcri-tools").output().unwrap();
    assert!(out.status.success(), "building CRIU: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A daemon for the checkpoint tests: CRIU configured, runc 1.4.3 as handler `runc-new`
/// beside Debian's runc, the test image imported.
pub fn checkpoint_daemon() -> Daemon {
    let daemon = Daemon::start(&format!(
        "[checkpoint]\ncriu = \"{}\"\n[runtime.handlers.runc-new]\nbinary = \"{}\"\n",
        criu().display(),
        newer_runc().display()
    ));
    pods::import_busybox(&daemon);
    daemon
}

/// A gRPC channel over a unix socket, as kubelet and crictl connect.
pub async fn connect(socket: &Path) -> Channel {
    let socket = socket.to_path_buf();
    Endpoint::try_from("http://[::]:50051")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(socket).await?)) }
        }))
        .await
        .expect("connect to the CRI socket")
}

/// Skips nothing: fails loudly when the tests are not run as root.
pub fn require_root() {
    assert!(nix::unistd::geteuid().is_root(), "these tests need root: run them through hack/test.sh");
}

/// A time bound stretched by `SWAPCRI_TEST_TIME_SCALE` on nodes that run everything many times
/// slower than hardware (the VM e2e runs under plain emulation).
pub fn scaled(bound: std::time::Duration) -> std::time::Duration {
    let scale = std::env::var("SWAPCRI_TEST_TIME_SCALE").ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(1);
    bound * scale.max(1)
}
