//! The streaming server driven by a client that is not ours: the WebSocket stream code of
//! the Kubernetes Python client (Debian's python3-kubernetes, `tests/interop/`). Exec with
//! an exit code, exec reading stdin, attach to live output, port-forward.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

#[tokio::test(flavor = "multi_thread")]
async fn kubernetes_python_client_over_websocket() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("interop", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let server = "echo served-to-python > /tmp/index.html && exec httpd -f -p 8080 -h /tmp";
    let web = start(&daemon, &pod, &pod_config, container_config("web", &["sh", "-c", server])).await;
    let ticker = "i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.1; done";
    let ticks = start(&daemon, &pod, &pod_config, container_config("ticks", &["sh", "-c", ticker])).await;
    // httpd must be up before the single port-forward attempt.
    for _ in 0..100 {
        let probe = exec(&daemon, &web, &["wget", "-q", "-O", "-", "http://127.0.0.1:8080/index.html"], 5).await;
        if probe.is_ok_and(|r| r.exit_code == 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut rt = daemon.runtime().await;
    let exec_url = |cmd: &[&str], stdin: bool| cri::ExecRequest {
        container_id: web.clone(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        tty: false,
        stdin,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let exec = rt.exec(exec_url(&["sh", "-c", "echo out; echo err >&2; exit 3"], false)).await.unwrap();
    let stdin = rt.exec(exec_url(&["sh", "-c", "read l; echo got:$l"], true)).await.unwrap();
    let attach = cri::AttachRequest {
        container_id: ticks.clone(),
        stdin: false,
        tty: false,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let attach = rt.attach(attach).await.unwrap();
    let forward = rt.port_forward(cri::PortForwardRequest { pod_sandbox_id: pod.clone(), port: vec![] }).await.unwrap();
    let urls = serde_json::json!({
        "exec": exec.into_inner().url,
        "stdin": stdin.into_inner().url,
        "attach": attach.into_inner().url,
        "portforward": forward.into_inner().url,
    });

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/k8s_python_client.py");
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new("timeout")
            .args(["120", "/usr/bin/python3", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 (Debian's python3-kubernetes is installed by hack/run.sh and .ci/run)");
        child.stdin.take().unwrap().write_all(urls.to_string().as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the Python client failed: {stderr}");
    let seen: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["exec"]["stdout"], "out\n", "{seen}");
    assert_eq!(seen["exec"]["stderr"], "err\n", "{seen}");
    assert_eq!(seen["exec"]["returncode"], 3, "{seen}");
    assert_eq!(seen["stdin"]["stdout"], "got:hello\n", "{seen}");
    assert_eq!(seen["stdin"]["returncode"], 0, "{seen}");
    assert!(seen["attach"].as_str().unwrap().matches("tick-").count() >= 3, "{seen}");
    let body = seen["portforward"]["body"].as_str().unwrap();
    assert!(body.contains("200 OK") && body.contains("served-to-python"), "{seen}");
    assert!(seen["portforward"]["error"].is_null(), "{seen}");
}
