//! Exec and PortForward through the streaming server with a SPDY client written here:
//! stdout/stderr/exit codes, 10 MB of stdin intact, 50 concurrent sessions, port-forward to
//! a server in a pod, single-use and expiring URLs, bad requests.

mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::spdy_client::{connect, Client};
use common::{require_root, Daemon};
use swapcri::cri;

const V4: &str = "v4.channel.k8s.io";

/// Opens the streams kubectl opens for these options; returns (error, stdin, stdout, stderr, resize).
async fn open_exec_streams(c: &mut Client, stdin: bool, stderr: bool, tty: bool) -> [Option<u32>; 5] {
    let error = c.open(&[("streamType", "error")]).await;
    let input = if stdin { Some(c.open(&[("streamType", "stdin")]).await) } else { None };
    let output = c.open(&[("streamType", "stdout")]).await;
    let errout = if stderr { Some(c.open(&[("streamType", "stderr")]).await) } else { None };
    let resize = if tty { Some(c.open(&[("streamType", "resize")]).await) } else { None };
    [Some(error), input, Some(output), errout, resize]
}

async fn run_exec(daemon: &Daemon, id: &str, cmd: &[&str]) -> (String, String, serde_json::Value) {
    let url = exec_url(daemon, id, cmd, false, false, true).await;
    let (head, client) = connect(&url, &[V4, "v3.channel.k8s.io"]).await;
    let mut c = client.unwrap_or_else(|| panic!("no upgrade: {head}"));
    assert!(
        head.contains("X-Stream-Protocol-Version: v4.channel.k8s.io")
            || head.to_ascii_lowercase().contains("x-stream-protocol-version: v4.channel.k8s.io"),
        "{head}"
    );
    let [error, _, stdout, stderr, _] = open_exec_streams(&mut c, false, true, false).await;
    let (error, stdout, stderr) = (error.unwrap(), stdout.unwrap(), stderr.unwrap());
    c.read_until_finished(stdout).await;
    c.read_until_finished(stderr).await;
    c.read_until_finished(error).await;
    let status = serde_json::from_slice(c.received(error)).unwrap_or(serde_json::Value::Null);
    (
        String::from_utf8_lossy(c.received(stdout)).into_owned(),
        String::from_utf8_lossy(c.received(stderr)).into_owned(),
        status,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_sessions_over_spdy() {
    require_root();
    let daemon = Daemon::start("[streaming]\ntoken_ttl_seconds = 2\n");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("streams", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let ctr = start(&daemon, &pod, &pod_config, container_config("c", &["sleep", "600"])).await;

    // Output, error output and the exit code in a v4 status.
    let started = Instant::now();
    let (out, err, status) = run_exec(&daemon, &ctr, &["sh", "-c", "echo out; echo err >&2; exit 3"]).await;
    let round_trip = started.elapsed();
    assert_eq!((out.as_str(), err.as_str()), ("out\n", "err\n"));
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
    let (out, _, status) = run_exec(&daemon, &ctr, &["echo", "fine"]).await;
    assert_eq!((out.as_str(), status["status"].as_str()), ("fine\n", Some("Success")));
    println!("exec round trip (Exec RPC + upgrade + command + status): {:.1} ms", round_trip.as_secs_f64() * 1000.0);

    // 10 MB through stdin, intact (checked inside the container).
    let payload: Vec<u8> = (0..10 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let url = exec_url(&daemon, &ctr, &["sh", "-c", "sha256sum | cut -c1-64"], false, true, false).await;
    let (_, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap();
    let [error, stdin, stdout, _, _] = open_exec_streams(&mut c, true, false, false).await;
    let started = Instant::now();
    c.write(stdin.unwrap(), &payload).await;
    c.finish(stdin.unwrap()).await;
    c.read_until_finished(stdout.unwrap()).await;
    let elapsed = started.elapsed();
    c.read_until_finished(error.unwrap()).await;
    let want = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&payload));
    assert_eq!(String::from_utf8_lossy(c.received(stdout.unwrap())).trim(), want);
    println!("10 MiB through exec stdin in {:.0} ms", elapsed.as_secs_f64() * 1000.0);

    // 50 sessions at once.
    let mut sessions = Vec::new();
    for i in 0..50 {
        let url = exec_url(&daemon, &ctr, &["echo", &format!("session-{i}")], false, false, false).await;
        sessions.push(tokio::spawn(async move {
            let (_, client) = connect(&url, &[V4]).await;
            let mut c = client.unwrap();
            let [error, _, stdout, _, _] = open_exec_streams(&mut c, false, false, false).await;
            c.read_until_finished(stdout.unwrap()).await;
            c.read_until_finished(error.unwrap()).await;
            String::from_utf8_lossy(c.received(stdout.unwrap())).into_owned()
        }));
    }
    for (i, s) in sessions.into_iter().enumerate() {
        assert_eq!(s.await.unwrap(), format!("session-{i}\n"));
    }

    // A URL works once, and not after it expired; unknown protocols are refused.
    let url = exec_url(&daemon, &ctr, &["true"], false, false, false).await;
    let (_, first) = connect(&url, &[V4]).await;
    assert!(first.is_some());
    let (again, none) = connect(&url, &[V4]).await;
    assert!(none.is_none() && again.starts_with("HTTP/1.1 404"), "{again}");
    let url = exec_url(&daemon, &ctr, &["true"], false, false, false).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (expired, none) = connect(&url, &[V4]).await;
    assert!(none.is_none() && expired.starts_with("HTTP/1.1 404"), "{expired}");
    let url = exec_url(&daemon, &ctr, &["true"], false, false, false).await;
    let (refused, none) = connect(&url, &["v9.channel.k8s.io"]).await;
    assert!(none.is_none() && refused.starts_with("HTTP/1.1 403"), "{refused}");

    // Bad requests change nothing and say why.
    let mut rt = daemon.runtime().await;
    let bad = |tty, stdin, stdout, stderr, id: &str| cri::ExecRequest {
        container_id: id.into(),
        cmd: vec!["true".into()],
        tty,
        stdin,
        stdout,
        stderr,
        ..Default::default()
    };
    for (req, code) in [
        (bad(true, false, true, true, &ctr), tonic::Code::InvalidArgument),
        (bad(false, false, false, false, &ctr), tonic::Code::InvalidArgument),
        (bad(false, false, true, false, "nope"), tonic::Code::NotFound),
    ] {
        assert_eq!(rt.exec(req).await.unwrap_err().code(), code);
    }
    let pf = cri::PortForwardRequest { pod_sandbox_id: pod.clone(), port: vec![70000] };
    assert_eq!(rt.port_forward(pf).await.unwrap_err().code(), tonic::Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread")]
async fn port_forward_reaches_a_server_in_the_pod() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("pf", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let server = "echo served-in-pod > /tmp/index.html && exec httpd -f -p 8080 -h /tmp";
    start(&daemon, &pod, &pod_config, container_config("web", &["sh", "-c", server])).await;
    let sink =
        start(&daemon, &pod, &pod_config, container_config("sink", &["sh", "-c", "exec nc -l -p 9000 > /dev/null"]))
            .await;
    let _ = sink;
    let mut rt = daemon.runtime().await;
    let forward = |port: i32| cri::PortForwardRequest { pod_sandbox_id: pod.clone(), port: vec![port] };

    // Two HTTP requests as two connections over one session.
    let url = rt.port_forward(forward(8080)).await.unwrap().into_inner().url;
    let (head, client) = connect(&url, &["portforward.k8s.io"]).await;
    let mut c = client.unwrap_or_else(|| panic!("{head}"));
    for request_id in ["0", "1"] {
        let mut body = String::new();
        for _ in 0..50 {
            let error = c.open(&[("streamType", "error"), ("port", "8080"), ("requestID", request_id)]).await;
            let data = c.open(&[("streamType", "data"), ("port", "8080"), ("requestID", request_id)]).await;
            c.write(data, b"GET /index.html HTTP/1.0\r\n\r\n").await;
            c.read_until_finished(data).await;
            c.finish(data).await; // the local client is done, as kubectl does on close
            c.read_until_finished(error).await;
            body = String::from_utf8_lossy(c.received(data)).into_owned();
            if body.contains("served-in-pod") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await; // httpd still starting
        }
        assert!(body.contains("served-in-pod"), "{body}");
    }
    // A closed port is reported on the error stream.
    let error = c.open(&[("streamType", "error"), ("port", "8081"), ("requestID", "9")]).await;
    let _data = c.open(&[("streamType", "data"), ("port", "8081"), ("requestID", "9")]).await;
    c.read_until_finished(error).await;
    let message = String::from_utf8_lossy(c.received(error)).into_owned();
    assert!(message.contains("localhost:8081"), "{message}");

    // Throughput: 64 MiB into a sink in the pod.
    let url = rt.port_forward(forward(9000)).await.unwrap().into_inner().url;
    let (_, client) = connect(&url, &["portforward.k8s.io"]).await;
    let mut c = client.unwrap();
    let error = c.open(&[("streamType", "error"), ("port", "9000"), ("requestID", "0")]).await;
    let data = c.open(&[("streamType", "data"), ("port", "9000"), ("requestID", "0")]).await;
    let chunk = vec![7u8; 1024 * 1024];
    let started = Instant::now();
    for _ in 0..64 {
        c.write(data, &chunk).await;
    }
    c.finish(data).await;
    c.read_until_finished(data).await;
    let elapsed = started.elapsed();
    let _ = error;
    println!(
        "port-forward throughput: {:.0} MiB/s (64 MiB in {:.0} ms)",
        64.0 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0
    );
}
