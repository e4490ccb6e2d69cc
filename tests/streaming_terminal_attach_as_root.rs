//! Terminals and attach through the streaming server (SPDY): exec with a tty and resizes,
//! attach to a container's stdio (stdin_once ends its stdin), attach to a terminal container
//! after the daemon was killed and restarted, and the checks Attach makes.

mod common;

use std::time::Duration;

use common::pods::*;
use common::spdy_client::{connect, Client};
use common::{require_root, Daemon};
use swapcri::cri;

const V4: &str = "v4.channel.k8s.io";

/// Opens the streams kubectl opens: error, then stdin/stdout/stderr/resize as asked.
async fn open_streams(c: &mut Client, stdin: bool, stderr: bool, tty: bool) -> (u32, u32, u32, u32, u32) {
    let error = c.open(&[("streamType", "error")]).await;
    let input = if stdin { c.open(&[("streamType", "stdin")]).await } else { 0 };
    let output = c.open(&[("streamType", "stdout")]).await;
    let errout = if stderr { c.open(&[("streamType", "stderr")]).await } else { 0 };
    let resize = if tty { c.open(&[("streamType", "resize")]).await } else { 0 };
    (error, input, output, errout, resize)
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// What the process's descriptors point to.
fn open_fds(pid: u32) -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    fds.sort();
    fds
}

/// What the daemon's descriptors point to, apart from its listening unix sockets (CRI, and
/// NRI, which is on by default) and the connections accepted on them: those come and go with
/// the test's own clients. The kernel names a listening socket, and every connection accepted
/// on it, by the path it was bound to, whatever name it has since.
fn streaming_fds(daemon: &Daemon) -> Vec<String> {
    let fds = open_fds(daemon.pid());
    let table = std::fs::read_to_string("/proc/net/unix").unwrap();
    // Columns: Num RefCount Protocol Flags Type St Inode Path; flag 00010000: listening.
    let rows: Vec<Vec<&str>> = table.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    let inode = |cols: &Vec<&str>| format!("socket:[{}]", cols[6]);
    // Every unix socket the daemon listens on (CRI, NRI): their connections are the
    // clients' to close, and an accepted one shows its listener's path.
    let bound: Vec<&str> = rows
        .iter()
        .filter(|cols| cols.len() > 7 && cols[3] == "00010000" && fds.contains(&inode(cols)))
        .map(|cols| cols[7])
        .collect();
    assert!(!bound.is_empty(), "the daemon listens on its CRI socket");
    let served: Vec<String> =
        rows.iter().filter(|cols| cols.get(7).is_some_and(|p| bound.contains(p))).map(inode).collect();
    fds.into_iter().filter(|target| !served.contains(target)).collect()
}

/// A socket descriptor with what the kernel's tables say of it (its unix path, or its TCP
/// addresses and state), so a failure names what was left open.
fn describe_socket(fd: &str) -> String {
    let Some(inode) = fd.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) else { return fd.to_string() };
    for table in ["unix", "tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // unix: the inode is the 7th column; tcp: the 10th.
            let at = if table == "unix" { 6 } else { 9 };
            if cols.get(at) == Some(&inode) {
                return format!("{fd} {table}: {line}");
            }
        }
    }
    format!("{fd} (in no unix or tcp table)")
}

/// The descriptors in `after` that `before` did not have (a pty, pipe or socket opened
/// since and still held).
fn new_fds(before: &[String], after: &[String]) -> Vec<String> {
    let mut left = before.to_vec();
    let mut added = Vec::new();
    for fd in after {
        match left.iter().position(|b| b == fd) {
            Some(i) => {
                left.swap_remove(i);
            }
            None => added.push(fd.clone()),
        }
    }
    added
}

fn size(width: u16, height: u16) -> Vec<u8> {
    format!(r#"{{"Width":{width},"Height":{height}}}"#).into_bytes()
}

async fn attach_url(daemon: &Daemon, id: &str, stdin: bool, stderr: bool) -> Result<String, tonic::Status> {
    let mut rt = daemon.runtime().await;
    let req =
        cri::AttachRequest { container_id: id.into(), stdin, tty: false, stdout: true, stderr, ..Default::default() };
    rt.attach(req).await.map(|r| r.into_inner().url)
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_with_a_terminal() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("tty", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let ctr = start(&daemon, &pod, &pod_config, container_config("c", &["sleep", "600"])).await;

    let mut rt = daemon.runtime().await;
    let req = cri::ExecRequest {
        container_id: ctr.clone(),
        cmd: vec!["sh".into()],
        tty: true,
        stdin: true,
        stdout: true,
        stderr: false,
        ..Default::default()
    };
    let fds_before = streaming_fds(&daemon);
    let started = std::time::Instant::now();
    let url = rt.exec(req.clone()).await.expect("Exec with tty").into_inner().url;
    let (head, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap_or_else(|| panic!("{head}"));
    let (error, stdin, stdout, _, resize) = open_streams(&mut c, true, false, true).await;
    c.write(resize, &size(100, 33)).await;
    c.write(stdin, b"stty size; tty; echo marker-$((6*7))\n").await;
    within("first size", c.read_until(|c| c.text(stdout).contains("marker-42"))).await;
    println!(
        "terminal exec: Exec RPC to the first command's output {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let out = c.text(stdout);
    assert!(out.contains("33 100"), "stty size on the terminal: {out:?}");
    assert!(out.contains("/dev/pts/"), "a pty: {out:?}");
    assert!(out.contains("echo marker-$((6*7))"), "the terminal echoes what is typed: {out:?}");
    // A resize while the shell runs reaches it.
    c.write(resize, &size(132, 50)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.write(stdin, b"stty size; exit 7\n").await;
    within("exit", c.read_until_finished(error)).await;
    let out = c.text(stdout);
    assert!(out.contains("50 132"), "after resize: {out:?}");
    let status: serde_json::Value = serde_json::from_slice(c.received(error)).unwrap();
    assert_eq!(status["details"]["causes"][0]["message"], "7", "{status}");

    // A client that leaves without ending its shell: the shell and its children are killed.
    let url = rt.exec(req).await.unwrap().into_inner().url;
    let (_, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap();
    let (_, stdin, stdout, _, _) = open_streams(&mut c, true, false, true).await;
    c.write(stdin, b"sleep 777 & echo started\n").await;
    within("background job", c.read_until(|c| c.text(stdout).contains("started\r\n"))).await;
    let count = "ps -o args | grep -c -e '^sh$' -e '^sleep 777$' || true";
    let counted = || async {
        let ps = exec(&daemon, &ctr, &["sh", "-c", count], 10).await.unwrap();
        String::from_utf8_lossy(&ps.stdout).trim().to_string()
    };
    let settles_at = |want: &'static str| async move {
        let mut seen = String::new();
        for _ in 0..50 {
            seen = counted().await;
            if seen == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        seen
    };
    assert_eq!(settles_at("2").await, "2", "the shell and its job run");
    drop(c);
    assert_eq!(settles_at("0").await, "0", "the abandoned shell is killed");

    // No exec process is left behind.
    let left = exec(&daemon, &ctr, &["sh", "-c", "ps -o args | grep -cx sh || true"], 10).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&left.stdout).trim(), "0", "the session's shell is gone");
    // Nor any pty, pipe or socket in the daemon.
    let mut added = new_fds(&fds_before, &streaming_fds(&daemon));
    for _ in 0..100 {
        if added.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        added = new_fds(&fds_before, &streaming_fds(&daemon));
    }
    let described: Vec<String> = added.iter().map(|fd| describe_socket(fd)).collect();
    assert!(added.is_empty(), "the daemon still holds {described:?}; it had {fds_before:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn attach_to_stdio_and_to_a_terminal_after_restart() {
    require_root();
    let mut daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("attach", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;

    // A container reading stdin, answering on stdout and stderr; stdin_once.
    let script = "while read l; do echo got:$l; echo err:$l >&2; done; echo bye";
    let mut config = container_config("reader", &["sh", "-c", script]);
    (config.stdin, config.stdin_once) = (true, true);
    let reader = start(&daemon, &pod, &pod_config, config).await;
    // A terminal container.
    let mut config = container_config("term", &["sh"]);
    (config.stdin, config.tty) = (true, true);
    let term = start(&daemon, &pod, &pod_config, config).await;
    // One that never asked for stdin.
    let quiet = start(&daemon, &pod, &pod_config, container_config("quiet", &["sleep", "600"])).await;

    // Checks made before a URL is given.
    assert_eq!(attach_url(&daemon, &quiet, true, true).await.unwrap_err().code(), tonic::Code::FailedPrecondition);
    assert_eq!(attach_url(&daemon, "nope", false, true).await.unwrap_err().code(), tonic::Code::NotFound);
    let mut rt = daemon.runtime().await;
    let none = cri::AttachRequest { container_id: quiet.clone(), ..Default::default() };
    assert_eq!(rt.attach(none).await.unwrap_err().code(), tonic::Code::InvalidArgument);
    let both = cri::AttachRequest {
        container_id: term.clone(),
        tty: true,
        stdout: true,
        stderr: true,
        stdin: false,
        ..Default::default()
    };
    assert_eq!(rt.attach(both).await.unwrap_err().code(), tonic::Code::InvalidArgument);

    // Two clients see the same output; the one with stdin talks to the container.
    let watcher_url = attach_url(&daemon, &reader, false, false).await.unwrap();
    let (_, watcher) = connect(&watcher_url, &[V4]).await;
    let mut watcher = watcher.unwrap();
    let (w_error, _, w_stdout, _, _) = open_streams(&mut watcher, false, false, false).await;
    let url = attach_url(&daemon, &reader, true, true).await.unwrap();
    let (head, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap_or_else(|| panic!("{head}"));
    let (error, stdin, stdout, stderr, _) = open_streams(&mut c, true, true, false).await;
    tokio::time::sleep(Duration::from_millis(300)).await; // both registered with the monitor
    let started = std::time::Instant::now();
    c.write(stdin, b"one\n").await;
    within("echo", c.read_until(|c| c.text(stdout).contains("got:one") && c.text(stderr).contains("err:one"))).await;
    println!("attach: stdin to the container's answer {:.2} ms", started.elapsed().as_secs_f64() * 1000.0);
    within("watcher", watcher.read_until(|c| c.text(w_stdout).contains("got:one"))).await;
    // Ending stdin ends the container's stdin (stdin_once): it says bye and exits 0.
    c.write(stdin, b"two\n").await;
    c.finish(stdin).await;
    within("end", c.read_until_finished(error)).await;
    assert!(c.text(stdout).ends_with("got:two\nbye\n"), "{:?}", c.text(stdout));
    let report: serde_json::Value = serde_json::from_slice(c.received(error)).unwrap();
    assert_eq!(report["status"], "Success", "{report}");
    within("watcher end", watcher.read_until_finished(w_error)).await;
    let exited = wait_exited(&daemon, &reader, Duration::from_secs(10)).await;
    assert_eq!(exited.exit_code, 0);
    let log = std::fs::read_to_string(logs.join("reader.log")).unwrap();
    assert!(log.contains("stdout F got:two"), "the log has what attach saw: {log}");

    // The daemon dies; the monitor keeps the terminal; a new daemon attaches to it.
    daemon.stop_with(nix::sys::signal::Signal::SIGKILL);
    daemon.restart();
    let mut rt = daemon.runtime().await;
    let req = cri::AttachRequest {
        container_id: term.clone(),
        stdin: true,
        tty: true,
        stdout: true,
        stderr: false,
        ..Default::default()
    };
    let url = rt.attach(req).await.expect("Attach after restart").into_inner().url;
    let (_, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap();
    let (error, stdin, stdout, _, resize) = open_streams(&mut c, true, false, true).await;
    c.write(resize, &size(120, 40)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.write(stdin, b"stty size; echo done-$((1+1))\n").await;
    within("terminal", c.read_until(|c| c.text(stdout).contains("done-2"))).await;
    assert!(c.text(stdout).contains("40 120"), "{:?}", c.text(stdout));
    // Leaving the session (no stdin_once) leaves the container running, and nothing of the
    // session in its monitor.
    let monitor = verbose_container_info(&daemon, &term).await["monitor"]["pid"].as_u64().expect("the monitor") as u32;
    let attached = open_fds(monitor);
    drop(c);
    let mut left = open_fds(monitor);
    for _ in 0..50 {
        if left.len() < attached.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = open_fds(monitor);
    }
    assert!(left.len() < attached.len(), "monitor fds while attached {attached:?}\nafter {left:?}");
    assert!(!left.iter().any(|f| f.contains("/dev/ptmx") && !attached.contains(f)));
    assert_eq!(status(&daemon, &term).await.state, cri::ContainerState::ContainerRunning as i32);
    // Attach again and end the shell.
    let req = cri::AttachRequest {
        container_id: term.clone(),
        stdin: true,
        tty: true,
        stdout: true,
        stderr: false,
        ..Default::default()
    };
    let url = rt.attach(req).await.unwrap().into_inner().url;
    let (_, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap();
    let (error2, stdin, _, _, _) = open_streams(&mut c, true, false, true).await;
    c.write(stdin, b"exit 5\n").await;
    within("terminal end", c.read_until_finished(error2)).await;
    let _ = error;
    assert_eq!(wait_exited(&daemon, &term, Duration::from_secs(10)).await.exit_code, 5);
    // An exited container cannot be attached to.
    assert_eq!(attach_url(&daemon, &term, false, true).await.unwrap_err().code(), tonic::Code::FailedPrecondition);
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_sessions_are_closed() {
    require_root();
    let daemon = Daemon::start("[streaming]\nstream_idle_timeout_seconds = 1\n");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("idle", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let ctr = start(&daemon, &pod, &pod_config, container_config("c", &["sleep", "600"])).await;

    // Output keeps a session alive past the idle time.
    let url =
        exec_url(&daemon, &ctr, &["sh", "-c", "for i in 1 2 3 4; do echo $i; sleep 0.5; done"], false, false, false)
            .await;
    let (_, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap();
    let (error, _, stdout, _, _) = open_streams(&mut c, false, false, false).await;
    within("busy session", c.read_until_finished(error)).await;
    assert_eq!(c.text(stdout), "1\n2\n3\n4\n");
    assert!(c.text(error).contains("Success"), "{}", c.text(error));

    // A silent one is closed, and its command killed.
    let url = exec_url(&daemon, &ctr, &["sleep", "333"], false, false, false).await;
    let (_, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap();
    let _ = open_streams(&mut c, false, false, false).await;
    let started = std::time::Instant::now();
    let ended = within("idle close", c.read_until(|_| false)).await;
    assert!(!ended, "the connection ended");
    let idle = started.elapsed();
    assert!(idle >= Duration::from_millis(900), "closed after {idle:?}");
    let count = "ps -o args | grep -cx 'sleep 333' || true";
    let mut left = String::new();
    for _ in 0..50 {
        left = String::from_utf8_lossy(&exec(&daemon, &ctr, &["sh", "-c", count], 10).await.unwrap().stdout)
            .trim()
            .to_string();
        if left == "0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left, "0", "the idle session's command is killed");
    println!("idle session closed after {:.1} s", idle.as_secs_f64());
}
