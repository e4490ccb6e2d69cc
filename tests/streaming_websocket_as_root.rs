//! The streaming server over WebSocket, as `crictl --transport websocket` and the API
//! server's WebSocket clients speak it: exec on v5 (stdin closed with the close signal) and
//! v4, exec with a terminal, attach, port-forward with the port in the URL, and refusals; the
//! base64 variants browser clients use.

mod common;

use std::time::{Duration, Instant};

use common::pods::*;
use common::ws_client::connect;
use common::{require_root, Daemon};
use swapcri::cri;

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// GET /index.html from port 8080 in the pod through a WebSocket port-forward with the
/// port in the URL (checking the port prefix), until the page has `marker` (httpd may still be
/// starting); the response.
async fn get_through_forward(daemon: &Daemon, pod: &str, protocol: &str, marker: &str) -> String {
    let mut rt = daemon.runtime().await;
    let mut body = String::new();
    for _ in 0..50 {
        let req = cri::PortForwardRequest { pod_sandbox_id: pod.into(), port: vec![] };
        let url = rt.port_forward(req).await.unwrap().into_inner().url;
        let mut c = connect(&format!("{url}?port=8080"), &[protocol]).await.unwrap();
        within("port prefix", c.read_until(|c| c.channels.get(&0).is_some_and(|d| d.len() >= 2))).await;
        assert_eq!(&c.channels[&0][..2], &8080u16.to_le_bytes());
        c.send(0, b"GET /index.html HTTP/1.0\r\n\r\n").await;
        within("http", c.read_to_end()).await;
        body = c.text(0);
        if body.contains(marker) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    body
}

/// How long /big (64 MiB) takes through a port-forward of port 8080 named in the request.
async fn download_through_forward(daemon: &Daemon, pod: &str, protocol: &str) -> Duration {
    let mut rt = daemon.runtime().await;
    let req = cri::PortForwardRequest { pod_sandbox_id: pod.into(), port: vec![8080] };
    let url = rt.port_forward(req).await.unwrap().into_inner().url;
    let mut c = connect(&url, &[protocol]).await.unwrap();
    let started = Instant::now();
    c.send(0, b"GET /big HTTP/1.0\r\n\r\n").await;
    let want = 64 * 1024 * 1024 + 2; // the body and the port prefix
    within("download", c.read_until(|c| c.channels.get(&0).is_some_and(|d| d.len() > want))).await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_attach_and_port_forward_over_websocket() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("ws", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let server = "echo served-over-ws > /tmp/index.html && dd if=/dev/zero of=/tmp/big bs=1M count=64 2>/dev/null \
                  && exec httpd -f -p 8080 -h /tmp";
    let web = start(&daemon, &pod, &pod_config, container_config("web", &["sh", "-c", server])).await;
    let ticker = "i=0; while true; do i=$((i+1)); echo tick-$i; sleep 0.1; done";
    let ticks = start(&daemon, &pod, &pod_config, container_config("ticks", &["sh", "-c", ticker])).await;

    // v5: output, error output, exit code; the first message tells the session is up.
    let started = Instant::now();
    let url = exec_url(&daemon, &web, &["sh", "-c", "echo out; echo err >&2; exit 3"], false, false, true).await;
    let mut c = connect(&url, &["v5.channel.k8s.io", "v4.channel.k8s.io"]).await.unwrap();
    assert_eq!(c.protocol.as_deref(), Some("v5.channel.k8s.io"));
    c.read_to_end().await;
    let round_trip = started.elapsed();
    assert_eq!(c.seen.first(), Some(&STDOUT), "the first message is on stdout");
    assert_eq!((c.text(STDOUT).as_str(), c.text(STDERR).as_str()), ("out\n", "err\n"));
    let status: serde_json::Value = serde_json::from_str(&c.text(ERROR)).unwrap();
    assert_eq!(status["details"]["causes"][0]["message"], "3", "{status}");
    println!("WebSocket exec round trip: {:.1} ms", round_trip.as_secs_f64() * 1000.0);

    // v5: 4 MiB of stdin, ended by the close signal, checksummed in the container.
    let payload: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    let url = exec_url(&daemon, &web, &["sh", "-c", "sha256sum | cut -c1-64"], false, true, false).await;
    let mut c = connect(&url, &["v5.channel.k8s.io"]).await.unwrap();
    let started = Instant::now();
    for chunk in payload.chunks(64 * 1024) {
        c.send(STDIN, chunk).await;
    }
    c.send(255, &[STDIN]).await;
    within("checksum", c.read_to_end()).await;
    let elapsed = started.elapsed();
    let want = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&payload));
    assert_eq!(c.text(STDOUT).trim(), want);
    assert!(c.text(ERROR).contains("Success"), "{}", c.text(ERROR));
    println!("4 MiB through WebSocket exec stdin in {:.0} ms", elapsed.as_secs_f64() * 1000.0);

    // v4 and older: no close signal; pre-v4 reports failures as text.
    let url = exec_url(&daemon, &web, &["sh", "-c", "exit 2"], false, false, false).await;
    let mut c = connect(&url, &["v4.channel.k8s.io"]).await.unwrap();
    c.read_to_end().await;
    assert!(c.text(ERROR).contains("NonZeroExitCode"), "{}", c.text(ERROR));
    let url = exec_url(&daemon, &web, &["sh", "-c", "exit 2"], false, false, false).await;
    let mut c = connect(&url, &["v2.channel.k8s.io"]).await.unwrap();
    c.read_to_end().await;
    assert_eq!(c.text(ERROR), "command terminated with non-zero exit code: exit status 2");

    // A terminal with a size.
    let url = exec_url(&daemon, &web, &["sh"], true, true, false).await;
    let mut c = connect(&url, &["v5.channel.k8s.io"]).await.unwrap();
    c.send(RESIZE, br#"{"Width":91,"Height":29}"#).await;
    c.send(STDIN, b"stty size; exit 4\n").await;
    within("terminal", c.read_to_end()).await;
    assert!(c.text(STDOUT).contains("29 91"), "{:?}", c.text(STDOUT));
    assert!(c.text(ERROR).contains("\"message\":\"4\""), "{}", c.text(ERROR));

    // Attach: the live output of a running container.
    let mut rt = daemon.runtime().await;
    let req = cri::AttachRequest {
        container_id: ticks.clone(),
        stdin: false,
        tty: false,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let url = rt.attach(req).await.unwrap().into_inner().url;
    let mut c = connect(&url, &["v5.channel.k8s.io"]).await.unwrap();
    within("ticks", c.read_until(|c| c.text(STDOUT).matches("tick-").count() >= 3)).await;
    let seen = c.text(STDOUT);
    let numbers: Vec<u32> = seen.lines().filter_map(|l| l.strip_prefix("tick-")?.parse().ok()).collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "consecutive output: {seen:?}");
    drop(c);

    // Port-forward: the port in the URL; each channel starts with the port, little-endian.
    let body = get_through_forward(&daemon, &pod, "v4.channel.k8s.io", "served-over-ws").await;
    assert!(body.contains("200 OK") && body.contains("served-over-ws"), "{body}");
    // Throughput: 64 MiB downloaded through the forward.
    let elapsed = download_through_forward(&daemon, &pod, "v4.channel.k8s.io").await;
    println!(
        "WebSocket port-forward download: {:.0} MiB/s (64 MiB in {:.0} ms)",
        64.0 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0
    );
    // A port nothing listens on: the error channel says so.
    let req = cri::PortForwardRequest { pod_sandbox_id: pod.clone(), port: vec![8089] };
    let url = rt.port_forward(req).await.unwrap().into_inner().url;
    let mut c = connect(&url, &["v4.channel.k8s.io"]).await.unwrap();
    within("port error", c.read_until(|c| c.text(1).contains("localhost:8089"))).await;

    // Refusals: an unknown protocol, a used token, port-forward without any port.
    let url = exec_url(&daemon, &web, &["true"], false, false, false).await;
    let refused = connect(&url, &["v9.channel.k8s.io"]).await.err().unwrap();
    assert!(refused.contains("403"), "{refused}");
    let again = connect(&url, &["v5.channel.k8s.io"]).await.err().unwrap();
    assert!(again.contains("404"), "{again}");
    let req = cri::PortForwardRequest { pod_sandbox_id: pod.clone(), port: vec![] };
    let url = rt.port_forward(req).await.unwrap().into_inner().url;
    let no_port = connect(&url, &["v4.channel.k8s.io"]).await.err().unwrap();
    assert!(no_port.contains("400"), "{no_port}");
}

/// The base64 variants frame every message as text; the bytes and exit codes arrive as over
/// the binary protocols.
#[tokio::test(flavor = "multi_thread")]
async fn exec_and_port_forward_over_base64_websocket() {
    require_root();
    let daemon = Daemon::start("");
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("b64", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let server = "echo served-as-text > /tmp/index.html && dd if=/dev/zero of=/tmp/big bs=1M count=64 2>/dev/null \
                  && exec httpd -f -p 8080 -h /tmp";
    let web = start(&daemon, &pod, &pod_config, container_config("web", &["sh", "-c", server])).await;
    const V4_BASE64: &str = "v4.base64.channel.k8s.io";

    // v4 base64: stdin in, stdout and stderr out, the exit code in a v4 status.
    let started = Instant::now();
    let script = "read l; echo got:$l; echo to-stderr >&2; exit 3";
    let url = exec_url(&daemon, &web, &["sh", "-c", script], false, true, true).await;
    let mut c = connect(&url, &[V4_BASE64]).await.unwrap();
    assert_eq!(c.protocol.as_deref(), Some(V4_BASE64));
    c.send(STDIN, b"hello\n").await;
    within("exec", c.read_to_end()).await;
    let round_trip = started.elapsed();
    assert_eq!(c.seen.first(), Some(&STDOUT), "the first message is on stdout");
    assert_eq!((c.text(STDOUT).as_str(), c.text(STDERR).as_str()), ("got:hello\n", "to-stderr\n"));
    let status: serde_json::Value = serde_json::from_str(&c.text(ERROR)).unwrap();
    assert_eq!(status["details"]["causes"][0]["message"], "3", "{status}");
    println!("base64 WebSocket exec round trip: {:.1} ms", round_trip.as_secs_f64() * 1000.0);

    // Bytes that are not text, both ways.
    let script = "head -c 4 | od -An -tx1; printf '\\377\\000\\020'";
    let url = exec_url(&daemon, &web, &["sh", "-c", script], false, true, false).await;
    let mut c = connect(&url, &[V4_BASE64]).await.unwrap();
    c.send(STDIN, &[0x00, 0xff, 0x10, 0x80]).await;
    within("bytes", c.read_to_end()).await;
    let out = &c.channels[&STDOUT];
    assert_eq!(String::from_utf8_lossy(&out[..out.len() - 3]).trim(), "00 ff 10 80");
    assert_eq!(&out[out.len() - 3..], &[0xff, 0x00, 0x10]);
    assert!(c.text(ERROR).contains("Success"), "{}", c.text(ERROR));

    // The first version: failures as text.
    let url = exec_url(&daemon, &web, &["sh", "-c", "exit 2"], false, false, false).await;
    let mut c = connect(&url, &["base64.channel.k8s.io"]).await.unwrap();
    c.read_to_end().await;
    assert_eq!(c.text(ERROR), "command terminated with non-zero exit code: exit status 2");

    // A terminal with a size.
    let url = exec_url(&daemon, &web, &["sh"], true, true, false).await;
    let mut c = connect(&url, &[V4_BASE64]).await.unwrap();
    c.send(RESIZE, br#"{"Width":77,"Height":21}"#).await;
    c.send(STDIN, b"stty size; exit 4\n").await;
    within("terminal", c.read_to_end()).await;
    assert!(c.text(STDOUT).contains("21 77"), "{:?}", c.text(STDOUT));
    assert!(c.text(ERROR).contains("\"message\":\"4\""), "{}", c.text(ERROR));

    // Port-forward: an HTTP request, then 64 MiB downloaded.
    let body = get_through_forward(&daemon, &pod, V4_BASE64, "served-as-text").await;
    assert!(body.contains("200 OK") && body.contains("served-as-text"), "{body}");
    let elapsed = download_through_forward(&daemon, &pod, V4_BASE64).await;
    println!(
        "base64 WebSocket port-forward download: {:.0} MiB/s (64 MiB in {:.0} ms)",
        64.0 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0
    );

    // Channel characters stay ASCII: 40 ports at most, where binary framing takes 127.
    let mut rt = daemon.runtime().await;
    let ports = |n: u16| (1..=n).map(|p| p.to_string()).collect::<Vec<_>>().join(",");
    let req = cri::PortForwardRequest { pod_sandbox_id: pod.clone(), port: vec![] };
    let url = rt.port_forward(req).await.unwrap().into_inner().url;
    let too_many = connect(&format!("{url}?port={}", ports(41)), &[V4_BASE64]).await.err().unwrap();
    assert!(too_many.contains("400"), "{too_many}");
    let req = cri::PortForwardRequest { pod_sandbox_id: pod.clone(), port: vec![] };
    let url = rt.port_forward(req).await.unwrap().into_inner().url;
    let mut c = connect(&format!("{url}?port={}", ports(40)), &[V4_BASE64]).await.unwrap();
    within("40 port prefixes", c.read_until(|c| c.channels.get(&78).is_some_and(|d| d.len() >= 2))).await;
    assert_eq!(&c.channels[&78][..2], &40u16.to_le_bytes());
}

fn openssl(dir: &std::path::Path, args: &[&str]) {
    let status = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success(), "openssl {args:?}");
}

/// A CA, and a server certificate for 127.0.0.1 it signed with the server's key; returns
/// (CA certificate, server chain, server key).
fn certificates(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl(
        dir,
        &[&["req", "-x509", "-days", "1", "-subj", "/CN=test CA", "-keyout", "ca.key", "-out", "ca.pem"], &ec[..]]
            .concat(),
    );
    openssl(
        dir,
        &[&["req", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"], &ec[..]].concat(),
    );
    std::fs::write(dir.join("ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "ext",
            "-out",
            "server.pem",
        ],
    );
    (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"))
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_with_operator_certificates() {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::Message;

    require_root();
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(certs.path());
    let daemon = Daemon::start(&format!(
        "[streaming]\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
        cert.display(),
        key.display()
    ));
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("tls", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let ctr = start(&daemon, &pod, &pod_config, container_config("c", &["sleep", "600"])).await;

    let url = exec_url(&daemon, &ctr, &["echo", "over-tls"], false, false, false).await;
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let host = url.trim_start_matches("https://").split('/').next().unwrap().to_string();

    // Plain HTTP to the TLS port gets nowhere.
    let plain = connect(&url.replacen("https://", "http://", 1), &["v5.channel.k8s.io"]).await;
    assert!(plain.is_err(), "plain HTTP accepted");

    // A client trusting the operator's certificate runs the command.
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    let pem = std::fs::read(&ca).unwrap();
    let der = rustls_pki_types::pem::PemObject::from_pem_slice(&pem).unwrap();
    roots.add(der).unwrap();
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(&host).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.expect("TLS handshake with the operator's certificate");
    let mut request = url.replacen("https://", "ws://", 1).into_client_request().unwrap();
    request.headers_mut().insert("Sec-WebSocket-Protocol", "v5.channel.k8s.io".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::client_async(request, tls).await.expect("WebSocket over TLS");
    let mut stdout = Vec::new();
    let mut status = Vec::new();
    while let Some(Ok(message)) = within("tls exec", ws.next()).await {
        if let Message::Binary(data) = message {
            match data.split_first() {
                Some((&STDOUT, rest)) => stdout.extend_from_slice(rest),
                Some((&ERROR, rest)) => status.extend_from_slice(rest),
                _ => {}
            }
        }
    }
    let _ = ws.close(None).await;
    assert_eq!(String::from_utf8_lossy(&stdout), "over-tls\n");
    assert!(String::from_utf8_lossy(&status).contains("Success"));

    // A client that does not trust it fails the handshake.
    let untrusting = tokio_rustls::rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        tokio_rustls::rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(tokio_rustls::rustls::RootCertStore::empty())
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(&host).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let refused = tokio_rustls::TlsConnector::from(std::sync::Arc::new(untrusting)).connect(name, tcp).await;
    assert!(refused.is_err());

    // `swapcri client` over TLS: with the operator's CA it runs an interactive exec; with
    // only the system's certificates it refuses the server.
    let ca = ca.display().to_string();
    let exec = ["exec", "-i", &ctr, "--", "sh", "-c", "tr a-z A-Z; exit 3"];
    let trusting = [&["--streaming-ca", &ca][..], &exec[..]].concat();
    let (code, out, err) = tokio::task::block_in_place(|| daemon.client_with_input(&trusting, b"secure\n"));
    assert_eq!(out, "SECURE\n", "{err}");
    assert_eq!(code, 3, "{err}");
    let (code, _, err) = tokio::task::block_in_place(|| daemon.client_with_input(&exec, b"secure\n"));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("TLS with 127.0.0.1") && err.contains("certificate"), "{err}");
}
