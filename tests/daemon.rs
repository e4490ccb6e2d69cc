//! The daemon itself: CLI, config errors, socket handling, signals, and the runtime RPCs
//! that answer without containers.

mod common;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};

use common::Daemon;
use nix::sys::signal::Signal;
use swapcri::cri;

#[test]
fn version_flag_and_default_config() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_swapcri")).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_swapcri")).args(["config", "default"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let parsed = swapcri::config::Config::parse(&text, std::path::Path::new("default")).unwrap();
    assert_eq!(parsed, swapcri::config::Config::default());
    assert!(text.contains("# "), "the default config is commented");
}

/// The helpers the daemon spawns take exactly one file; any other form is refused at once,
/// and a file they cannot read is named.
#[test]
fn helper_commands_take_one_file() {
    let run = |args: &[&str]| std::process::Command::new(env!("CARGO_BIN_EXE_swapcri")).args(args).output().unwrap();
    for (command, args) in [("monitor", vec![]), ("monitor", vec!["--help"]), ("sandbox-ns", vec!["a", "b"])] {
        let out = run(&[&[command], args.as_slice()].concat());
        assert_eq!(out.status.code(), Some(2), "{command} {args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("`swapcri {command} FILE`")), "{stderr}");
    }
    let out = run(&["monitor", "/nonexistent/monitor.json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/monitor.json"));
}

#[test]
fn bad_config_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (text, key) in
        [("sockt = \"/x\"", "sockt"), ("[image]\npull_progress_timeout_secs = 0", "pull_progress_timeout_secs")]
    {
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_swapcri")).arg("--config").arg(&path).output().unwrap();
        assert!(!out.status.success(), "{text} accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(key), "error for {text:?} does not name {key}: {stderr}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_swapcri"))
        .args(["--config", "/nonexistent/swapcri.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "an explicitly named missing config is an error");
}

#[tokio::test]
async fn runtime_rpcs_answer_truthfully() {
    let daemon = Daemon::start("");
    let mut rt = daemon.runtime().await;

    let version = rt.version(cri::VersionRequest { version: "v1".into() }).await.unwrap().into_inner();
    assert_eq!(version.runtime_name, "swapcri");
    assert_eq!(version.runtime_api_version, "v1");
    assert_eq!(version.runtime_version, env!("CARGO_PKG_VERSION"));

    let config = rt.runtime_config(cri::RuntimeConfigRequest {}).await.unwrap().into_inner();
    assert_eq!(config.linux.unwrap().cgroup_driver, cri::CgroupDriver::Cgroupfs as i32);

    let status = rt.status(cri::StatusRequest { verbose: true }).await.unwrap().into_inner();
    let conditions = status.status.unwrap().conditions;
    let find =
        |t: &str| conditions.iter().find(|c| c.r#type == t).unwrap_or_else(|| panic!("no {t} condition")).clone();
    let runtime_ready = find("RuntimeReady");
    let network_ready = find("NetworkReady");
    // runc answers, so the runtime is ready; the test daemon's loopback network makes the
    // network ready where Debian's CNI plugins are installed.
    let runc_works = std::path::Path::new("/usr/sbin/runc").exists();
    assert_eq!(runtime_ready.status, runc_works, "{runtime_ready:?}");
    let plugins = std::path::Path::new("/usr/lib/cni/loopback").exists();
    assert_eq!(network_ready.status, plugins, "{network_ready:?}");
    let info: serde_json::Value = serde_json::from_str(&status.info["info"]).unwrap();
    assert_eq!(info["handlers"][0]["name"], "runc");
    assert!(info["node"]["held_capabilities"].as_array().is_some_and(|c| !c.is_empty()));
    let names: Vec<_> = status.runtime_handlers.iter().map(|h| h.name.as_str()).collect();
    if runc_works {
        assert_eq!(names, vec!["", "runc"]);
    } else {
        assert!(names.is_empty());
    }

    let err = rt.exec(cri::ExecRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "no container id");
    let err = rt.attach(cri::AttachRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "no container id");
    let err = rt.checkpoint_container(cri::CheckpointContainerRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "no container id");
    assert!(err.message().contains("container_id"), "{}", err.message());
    // An empty update changes nothing; a malformed pod CIDR is refused.
    rt.update_runtime_config(cri::UpdateRuntimeConfigRequest::default()).await.unwrap();
    let bad = cri::UpdateRuntimeConfigRequest {
        runtime_config: Some(cri::RuntimeConfig {
            network_config: Some(cri::NetworkConfig { pod_cidr: "10.0.0.0/99".into() }),
        }),
    };
    let err = rt.update_runtime_config(bad).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    let stats = rt.list_container_stats(cri::ListContainerStatsRequest::default()).await.unwrap().into_inner();
    assert!(stats.stats.is_empty());
    let err = rt.container_stats(cri::ContainerStatsRequest { container_id: "nope".into() }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn socket_mode_stale_socket_live_socket_and_sigterm() {
    let mut daemon = Daemon::start("");
    let socket = daemon.socket();
    let meta = std::fs::metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);

    // A second daemon on the same socket is refused while the first serves.
    let out = daemon.command().arg("serve").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("another process is serving"));
    daemon.runtime().await.version(cri::VersionRequest::default()).await.expect("the first daemon still serves");

    // kill -9 leaves the socket file behind; a restart replaces it.
    daemon.stop_with(Signal::SIGKILL);
    assert!(socket.exists());
    daemon.restart();
    daemon.runtime().await.version(cri::VersionRequest::default()).await.unwrap();

    // SIGTERM: clean exit, socket removed.
    let status = daemon.stop_with(Signal::SIGTERM);
    assert!(status.success(), "exit status {status}");
    assert!(!socket.exists());
    assert!(daemon.log().contains("SIGTERM received"));
}

/// Under a service manager: READY=1 on NOTIFY_SOCKET once the CRI socket serves, and a socket
/// handed over by socket activation is served as is and left in place on exit.
#[tokio::test]
async fn readiness_notification_and_socket_activation() {
    let mut daemon = Daemon::start("");
    daemon.stop_with(Signal::SIGTERM);
    let socket = daemon.socket();

    let notify_path = daemon.dir.path().join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let mut child = daemon.command().arg("serve").env("NOTIFY_SOCKET", &notify_path).spawn().unwrap();
    let mut buf = [0u8; 512];
    let n = notify.recv(&mut buf).expect("READY=1 within 30 s");
    let message = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(message.starts_with("READY=1\n"), "{message}");
    assert!(message.contains(&format!("MAINPID={}", child.id())), "{message}");
    let meta = std::fs::metadata(&socket).expect("the socket exists once READY=1 is sent");
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    let connected = std::os::unix::net::UnixStream::connect(&socket);
    assert!(connected.is_ok(), "serving when READY=1 is sent");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let n = notify.recv(&mut buf).expect("STOPPING=1 on SIGTERM");
    assert_eq!(&buf[..n], b"STOPPING=1\n");
    assert!(child.wait().unwrap().success());

    // systemd's own activator binds the socket and hands it over (LISTEN_FDS, LISTEN_PID).
    let activator = std::path::Path::new("/usr/bin/systemd-socket-activate");
    if !activator.exists() {
        eprintln!("no {}: socket activation not tried", activator.display());
        return;
    }
    let mut child = std::process::Command::new(activator)
        .arg("--listen")
        .arg(&socket)
        .arg(env!("CARGO_BIN_EXE_swapcri"))
        .arg("--config")
        .arg(&daemon.config_path)
        .arg("serve")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Listening once a connection is taken: the file exists from the bind, before the listen.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Err(e) = std::os::unix::net::UnixStream::connect(&socket) {
        assert!(std::time::Instant::now() < deadline, "the activator does not listen on {}: {e}", socket.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The first connection started swapcri, which answers on the inherited socket.
    let mut runtime = swapcri::cri::runtime_service_client::RuntimeServiceClient::new(common::connect(&socket).await);
    let version = runtime.version(cri::VersionRequest::default()).await.expect("served on the activated socket");
    assert_eq!(version.into_inner().runtime_name, "swapcri");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    child.wait().unwrap();
    assert!(socket.exists(), "an activated socket belongs to the service manager: left in place");
}
