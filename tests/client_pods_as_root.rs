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

#[test]
fn client_streams_exec_attach_and_port_forward() {
    use std::io::{BufRead, Read, Write};
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod = ok(&daemon, &["runp", "streams", "--log-dir", logs.to_str().unwrap()]);
    let server = "echo via-client > /tmp/index.html && exec httpd -f -p 8080 -h /tmp";
    let web = ok(&daemon, &["create", &pod, "web", IMAGE, "--", "sh", "-c", server]);
    ok(&daemon, &["start", &web]);

    // exec -i: stdin in, stdout and stderr out, the exit code passed on.
    let script = "read l; echo got:$l; echo to-stderr >&2; exit 4";
    let (code, out, err) = daemon.client_with_input(&["exec", "-i", &web, "--", "sh", "-c", script], b"hello\n");
    assert_eq!((code, out.as_str()), (4, "got:hello\n"), "{err}");
    assert!(err.contains("to-stderr"), "{err}");
    // The end of stdin reaches the command (the v5 close signal).
    let input = vec![b'x'; 1 << 20];
    let (code, out, err) = daemon.client_with_input(&["exec", "-i", &web, "--", "wc", "-c"], &input);
    assert_eq!((code, out.trim()), (0, "1048576"), "{err}");
    // exec -t: a terminal in the container.
    let (code, out, err) = daemon.client_with_input(&["exec", "-t", &web, "--", "ls", "-l", "/proc/self/fd/0"], b"");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("-> /dev/pts/"), "{out:?}");
    // A command that cannot start: runc's reason, and a failure.
    let (code, _, err) = daemon.client_with_input(&["exec", "-t", &web, "--", "no-such-command"], b"");
    assert_eq!(code, 1);
    assert!(err.contains("no-such-command"), "{err}");

    // attach -i -t to a terminal container: typed lines reach its shell; ends when it exits.
    let term = ok(&daemon, &["create", &pod, "term", IMAGE, "--tty", "--", "sh"]);
    ok(&daemon, &["start", &term]);
    let typed = b"echo attached-$((2+3))\nexit 3\n";
    let (code, out, err) = daemon.client_with_input(&["attach", "-i", "-t", &term], typed);
    assert_eq!(code, 0, "attach ends with the container: {err}");
    assert!(out.contains("attached-5"), "{out:?}");

    // port-forward: a local port reaches httpd in the pod.
    let local = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut forward = daemon
        .command()
        .args(["client", "port-forward", &pod, &format!("{local}:8080")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    std::io::BufReader::new(forward.stdout.take().unwrap()).read_line(&mut banner).unwrap();
    assert_eq!(banner.trim(), format!("Forwarding from 127.0.0.1:{local} -> 8080"));
    let mut body = String::new();
    for _ in 0..50 {
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", local)).unwrap();
        conn.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        conn.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").unwrap();
        body.clear();
        let _ = conn.read_to_string(&mut body);
        if body.contains("via-client") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(body.contains("200 OK") && body.contains("via-client"), "{body}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(forward.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = forward.wait().unwrap();
    assert!(status.success(), "port-forward ends cleanly on an interrupt: {status}");
}
