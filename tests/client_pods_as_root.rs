//! `swapcri client` as an operator uses it: run a pod, create and start a container, read
//! its logs, exec into it, stop and remove everything.

mod common;

use common::pods::*;
use common::{require_root, Daemon};

fn client(daemon: &Daemon, args: &[&str]) -> (i32, String, String) {
    let out = daemon.command().arg("client").args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim_end().to_string();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn ok(daemon: &Daemon, args: &[&str]) -> String {
    let (code, out, err) = client(daemon, args);
    assert_eq!(code, 0, "client {args:?}: {err}");
    out
}

#[test]
fn client_runs_a_pod_end_to_end() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod = ok(&daemon, &["runp", "web", "--log-dir", logs.to_str().unwrap()]);
    assert_eq!(pod.len(), 64, "{pod}");
    let script = "echo first line; sleep 0.2; echo to stderr >&2; sleep 100";
    let ctr = ok(&daemon, &["create", &pod, "app", IMAGE, "--env", "GREETING=hi", "--", "sh", "-c", script]);
    assert_eq!(ok(&daemon, &["start", &ctr]), ctr);

    assert_eq!(ok(&daemon, &["exec", &ctr, "--", "sh", "-c", "echo $GREETING; hostname"]), "hi\nweb");
    let (code, out, _) = client(&daemon, &["exec", &ctr, "--", "sh", "-c", "echo failing; exit 7"]);
    assert_eq!((code, out.as_str()), (7, "failing"));

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let logs = ok(&daemon, &["logs", &ctr]);
        if logs.contains("to stderr") {
            assert_eq!(logs, "first line\nto stderr");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "logs so far: {logs:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let ps: serde_json::Value = serde_json::from_str(&ok(&daemon, &["ps", "--pod", &pod])).unwrap();
    assert_eq!(ps["containers"][0]["id"], ctr.as_str());
    assert_eq!(ps["containers"][0]["state"], 1, "running");

    ok(&daemon, &["stop", &ctr, "--timeout", "1"]);
    let status: serde_json::Value = serde_json::from_str(&ok(&daemon, &["inspect", &ctr])).unwrap();
    assert_eq!(status["status"]["state"], 2, "exited");
    ok(&daemon, &["rm", &ctr]);
    ok(&daemon, &["rmp", &pod]);
    let pods: serde_json::Value = serde_json::from_str(&ok(&daemon, &["pods"])).unwrap();
    assert_eq!(pods["items"], serde_json::json!([]));

    let (code, _, err) = client(&daemon, &["inspect", &ctr]);
    assert_eq!(code, 1);
    assert!(err.contains("not found"), "{err}");
}
