//! An unprivileged user on the node (uid 65534 through setpriv) who knows every path the
//! runtime uses: it walks the state and run roots, reads records, specs, layers, upper
//! directories and logs, and runs a setuid-root file from an image layer. Nothing is
//! readable or runnable, the container's secret appears nowhere it can read (nor in the
//! daemon's own log), and an installation left with open modes is closed at start-up.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::images::{busybox, Compress, LayerTar, TestImage};
use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

const SUID_IMAGE: &str = "localhost/test/suid:latest";

/// busybox with a setuid-root copy of itself, the kind of file a public image may carry.
fn suid_image() -> TestImage {
    let mut layer =
        LayerTar::new().dir("bin").file("bin/busybox", 0o755, &busybox()).file("bin/suid", 0o4755, &busybox());
    for applet in ["sh", "echo", "sleep", "cat", "id"] {
        layer = layer.symlink(&format!("bin/{applet}"), "busybox");
    }
    let layer = layer.dir("etc").file("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n").finish();
    TestImage::build(vec![(layer, Compress::Gzip)], "", false)
}

/// Runs `script` as uid/gid 65534 with no supplementary groups: (exit code, stdout+stderr).
fn as_nobody(script: &str) -> (i32, String) {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script])
        .output()
        .expect("setpriv (util-linux)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).mode() & 0o7777
}

/// Every path the user tries: records, the spec, the layer's setuid file, the container's
/// root filesystem and upper directory, its log.
fn known_paths(daemon: &Daemon, ctr: &str, log: &Path) -> Vec<PathBuf> {
    let state = daemon.state_root();
    let run = daemon.dir.path().join("run");
    let layers = state.join("images/layers");
    let layer = std::fs::read_dir(&layers).unwrap().flatten().next().expect("a layer").path();
    vec![
        state.join("containers").join(ctr).join("meta.json"),
        state.join("containers").join(ctr).join("upper"),
        run.join("containers").join(ctr).join("bundle/config.json"),
        run.join("containers").join(ctr).join("rootfs/bin/suid"),
        layer.join("bin/suid"),
        log.to_path_buf(),
    ]
}

fn assert_nobody_gets_nothing(daemon: &Daemon, ctr: &str, log: &Path, secret: &str) {
    let state = daemon.state_root();
    let run = daemon.dir.path().join("run");
    // The control: the user reaches the test's directory and reads what is meant for all.
    let (code, out) =
        as_nobody(&format!("cat {}/config.toml >/dev/null && echo readable", daemon.dir.path().display()));
    assert_eq!((code, out.trim()), (0, "readable"), "setpriv works and the test directory is open");

    let (_, listed) = as_nobody(&format!("find {} {} 2>/dev/null", state.display(), run.display()));
    let listed: Vec<&str> = listed.lines().collect();
    let roots = [state.display().to_string(), run.display().to_string()];
    assert!(listed.iter().all(|l| roots.iter().any(|r| r == l)), "the user lists nothing under the roots: {listed:?}");

    for path in known_paths(daemon, ctr, log) {
        let p = path.display();
        let (_, out) = as_nobody(&format!("if [ -d {p} ]; then ls {p}; else cat {p}; fi >/dev/null 2>&1 && echo READ"));
        assert!(!out.contains("READ"), "{p} is readable by uid 65534");
        let (_, out) = as_nobody(&format!("{p} id -u 2>&1; echo; {p}/bin/suid id -u 2>&1"));
        assert!(!out.lines().any(|l| l.trim() == "0"), "{p} ran as root for uid 65534: {out}");
        assert!(!out.lines().any(|l| l.trim() == "65534"), "{p} ran at all for uid 65534: {out}");
    }
    // The rootfs mount is listed in mountinfo for everyone; its directory is still closed.
    let (_, out) =
        as_nobody(&format!("grep -c {ctr} /proc/self/mountinfo; ls {}/containers/{ctr}/rootfs 2>&1", run.display()));
    assert!(out.contains("Permission denied"), "{out}");
    let (_, out) = as_nobody(&format!("grep -rl {secret} {} 2>/dev/null", daemon.dir.path().display()));
    assert!(out.trim().is_empty(), "the secret is readable by uid 65534 in {out}");
    assert!(!daemon.log().contains(secret), "the daemon's log holds the container's secret");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unprivileged_user_reads_and_runs_nothing() {
    require_root();
    let mut daemon = Daemon::configure("");
    // As /var/lib and /run are: the roots' own modes are what is tested.
    std::fs::set_permissions(daemon.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&daemon.config_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    daemon.restart();
    let archive = daemon.dir.path().join("suid.tar");
    suid_image().write_layout_archive(&archive, SUID_IMAGE);
    let out = daemon.command().args(["image", "import"]).arg(&archive).output().unwrap();
    assert!(out.status.success(), "import: {}", String::from_utf8_lossy(&out.stderr));

    // The pod's log directory as kubelet makes it: open to all.
    let logs = daemon.dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pod_config = sandbox_config("local-user", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let secret = format!("s3cr3t{}", std::process::id());
    let mut config = container_config("c", &["sh", "-c", "echo token=$API_TOKEN; exec sleep 600"]);
    config.image = Some(cri::ImageSpec { image: SUID_IMAGE.into(), ..Default::default() });
    config.envs = vec![cri::KeyValue { key: "API_TOKEN".into(), value: secret.clone() }];
    let ctr = start(&daemon, &pod, &pod_config, config).await;
    let log = logs.join("c.log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&log).unwrap_or_default().contains(&secret) {
        assert!(std::time::Instant::now() < deadline, "the container logged its token");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let (state, run) = (daemon.state_root(), daemon.dir.path().join("run"));
    let expected = [
        (state.clone(), 0o700),
        (run.clone(), 0o711),
        (run.join("containers"), 0o711),
        (run.join("containers").join(&ctr), 0o700),
        (run.join("containers").join(&ctr).join("bundle/config.json"), 0o600),
        (state.join("containers").join(&ctr).join("meta.json"), 0o600),
        (log.clone(), 0o640),
    ];
    for (path, m) in &expected {
        assert_eq!(mode(path), *m, "{}", path.display());
    }
    assert_nobody_gets_nothing(&daemon, &ctr, &log, &secret);

    // An installation an earlier version left open is closed when the daemon starts.
    daemon.stop_with(nix::sys::signal::Signal::SIGTERM);
    let opened = [
        (state.clone(), 0o755),
        (run.clone(), 0o755),
        (run.join("containers").join(&ctr), 0o755),
        (run.join("containers").join(&ctr).join("bundle/config.json"), 0o644),
        (log.clone(), 0o644),
    ];
    for (path, m) in &opened {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(*m)).unwrap();
    }
    daemon.restart();
    for (path, m) in &expected {
        assert_eq!(mode(path), *m, "{} after the restart", path.display());
    }
    assert_nobody_gets_nothing(&daemon, &ctr, &log, &secret);
    println!(
        "FIGURE hostile-local-user: {} paths tried by uid 65534, none readable or runnable",
        known_paths(&daemon, &ctr, &log).len()
    );
}
