//! A hostile streaming client: connections that never send a request or stop halfway,
//! more connections than the server takes, an oversized SPDY frame, an oversized WebSocket
//! message, and stdin a container never reads. Each is cut off within its bound, the
//! daemon's memory stays bounded, and a normal exec works afterwards. Peak RSS and times are
//! printed for docs/security.md.

mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::spdy_client::{connect, Client};
use common::{require_root, Daemon};
use futures::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

const V4: &str = "v4.channel.k8s.io";
const CONFIG: &str = "[streaming]\nhandshake_timeout_seconds = 2\nmax_connections = 32\nmax_frame_bytes = 1048576\nmax_buffered_bytes = 2097152\n";

/// A daemon with a running busybox container; returns the container id.
async fn daemon_with_container(name: &str) -> (Daemon, String) {
    let daemon = Daemon::start(CONFIG);
    import_busybox(&daemon);
    let pod_config = sandbox_config(name, &daemon.dir.path().join("logs"));
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let ctr = start(&daemon, &pod, &pod_config, container_config("c", &["sleep", "600"])).await;
    (daemon, ctr)
}

/// An exec of `echo fine` over SPDY: what still has to work after each attack.
async fn exec_still_works(daemon: &Daemon, ctr: &str) {
    let url = exec_url(daemon, ctr, &["echo", "fine"], false, false, false).await;
    let (head, client) = connect(&url, &[V4]).await;
    let mut c = client.unwrap_or_else(|| panic!("no upgrade after the attack: {head}"));
    let error = c.open(&[("streamType", "error")]).await;
    let stdout = c.open(&[("streamType", "stdout")]).await;
    let done = tokio::time::timeout(Duration::from_secs(30), c.read_until_finished(stdout)).await;
    assert!(done.is_ok(), "the exec finished");
    assert_eq!(c.text(stdout), "fine\n");
    let _ = error;
}

/// An exec of `cmd` with stdin over SPDY, its error, stdin and stdout streams open; the
/// client and the stdin stream.
async fn exec_with_stdin(daemon: &Daemon, ctr: &str, cmd: &[&str]) -> (Client, u32) {
    let url = exec_url(daemon, ctr, cmd, false, true, false).await;
    let (head, client) = connect(&url, &[V4]).await;
    let mut c: Client = client.unwrap_or_else(|| panic!("no upgrade: {head}"));
    c.open(&[("streamType", "error")]).await;
    let stdin = c.open(&[("streamType", "stdin")]).await;
    c.open(&[("streamType", "stdout")]).await;
    (c, stdin)
}

fn streaming_base(url: &str) -> String {
    url.strip_prefix("http://").unwrap().split('/').next().unwrap().to_string()
}

/// Waits until the server closes `conn` (EOF or reset); how long it took, None past `within`.
async fn closed_within(conn: &mut tokio::net::TcpStream, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(within.saturating_sub(started.elapsed()), conn.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn silent_half_open_and_surplus_connections_are_closed() {
    require_root();
    let (daemon, ctr) = daemon_with_container("hostile-conns").await;
    let url = exec_url(&daemon, &ctr, &["true"], false, false, false).await;
    let host = streaming_base(&url);
    let before = daemon.reset_peak_memory();
    let started = Instant::now();
    let mut conns = Vec::new();
    for n in 0..200 {
        let mut conn = tokio::net::TcpStream::connect(&host).await.unwrap();
        if n % 2 == 1 {
            // Half a request: the line and one header, never the end of the headers.
            conn.write_all(b"POST /exec/0123 HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        }
        conns.push(conn);
    }
    // Each connection watched on its own; times counted from the first connect.
    let watchers = conns.into_iter().map(|mut conn| {
        tokio::spawn(async move { closed_within(&mut conn, Duration::from_secs(30)).await.map(|_| started.elapsed()) })
    });
    let closed: Vec<Option<Duration>> =
        futures::future::join_all(watchers).await.into_iter().map(|r| r.unwrap()).collect();
    let all_closed = closed.iter().flatten().max().copied().unwrap_or_default();
    assert!(closed.iter().all(|c| c.is_some()), "every connection is closed by the server");
    let surplus = closed.iter().filter(|c| c.is_some_and(|d| d < Duration::from_millis(1500))).count();
    assert!(surplus >= 200 - 32, "connections past max_connections are closed on arrival: {surplus} of 168");
    assert!(
        all_closed < Duration::from_secs(20),
        "silent connections closed by the handshake deadline: {all_closed:?}"
    );
    let peak = daemon.assert_memory_within(before, 16, "200 silent or half-open connections");
    exec_still_works(&daemon, &ctr).await;
    println!(
        "FIGURE hostile-streaming 200 silent or half-open connections (max 32, deadline 2 s): all closed in {} ms, \
         {surplus} closed on arrival; RSS {} MiB before, peak {} MiB",
        all_closed.as_millis(),
        before / 1024,
        peak / 1024
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_spdy_frame_ends_the_session() {
    require_root();
    let (daemon, ctr) = daemon_with_container("hostile-frame").await;
    let (mut c, stdin) = exec_with_stdin(&daemon, &ctr, &["cat"]).await;
    let before = daemon.reset_peak_memory();
    // A data frame announcing 16 MiB - 1, the most the length field holds.
    let mut frame = stdin.to_be_bytes().to_vec();
    frame.extend_from_slice(&[0, 0xff, 0xff, 0xff]);
    frame.extend_from_slice(&[0u8; 1024]);
    let _ = c.raw().write_all(&frame).await;
    let closed = closed_within(c.raw(), Duration::from_secs(10)).await.expect("the session is ended");
    // Less than the frame announced: it was refused from its header, not read.
    let peak = daemon.assert_memory_within(before, 8, "a 16 MiB SPDY frame");
    exec_still_works(&daemon, &ctr).await;
    println!(
        "FIGURE hostile-streaming SPDY frame of 16 MiB (cap 1 MiB): closed in {} ms; RSS {} MiB before, peak {} MiB",
        closed.as_millis(),
        before / 1024,
        peak / 1024
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_websocket_message_ends_the_session() {
    require_root();
    let (daemon, ctr) = daemon_with_container("hostile-ws").await;
    let url = exec_url(&daemon, &ctr, &["cat"], false, true, false).await;
    let mut ws = common::ws_client::connect(&url, &["v5.channel.k8s.io"]).await.expect("WebSocket upgrade");
    let before = daemon.reset_peak_memory();
    let started = Instant::now();
    let mut message = vec![0u8; 8 << 20];
    message[0] = 0; // stdin
    let _ = ws.raw().send(Message::Binary(message.into())).await;
    let ended = tokio::time::timeout(Duration::from_secs(10), ws.read_until(|_| false)).await;
    assert!(ended.is_ok(), "the server ends the session");
    let peak = daemon.assert_memory_within(before, 4, "an 8 MiB WebSocket message");
    exec_still_works(&daemon, &ctr).await;
    println!(
        "FIGURE hostile-streaming WebSocket message of 8 MiB (cap 1 MiB): closed in {} ms; RSS {} MiB before, peak {} MiB",
        started.elapsed().as_millis(),
        before / 1024,
        peak / 1024
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stdin_a_container_never_reads_is_not_queued() {
    require_root();
    let (daemon, ctr) = daemon_with_container("hostile-stdin").await;
    let (mut c, stdin) = exec_with_stdin(&daemon, &ctr, &["sleep", "60"]).await;
    let before = daemon.reset_peak_memory();
    // Up to 512 MiB offered; the server stops reading once its budget is full, so the
    // client's writes stall and the deadline ends the attempt.
    let chunk = vec![7u8; 60_000];
    let mut sent = 0usize;
    let deadline = Instant::now() + Duration::from_secs(10);
    while sent < 512 << 20 && Instant::now() < deadline {
        let frame = swapcri::streaming::spdy::Frame::Data { stream: stdin, flags: 0, data: chunk.clone() };
        match tokio::time::timeout(Duration::from_secs(2), c.send(frame)).await {
            Ok(()) => sent += chunk.len(),
            Err(_) => break,
        }
    }
    assert!(sent < 512 << 20, "the server stopped reading");
    let peak = daemon.assert_memory_within(before, 16, "stdin never read");
    drop(c);
    exec_still_works(&daemon, &ctr).await;
    println!(
        "FIGURE hostile-streaming stdin never read (buffer cap 2 MiB): the client got {} MiB out before the server \
         stopped reading (the rest sits in kernel socket buffers); RSS {} MiB before, peak {} MiB",
        sent >> 20,
        before / 1024,
        peak / 1024
    );
}
