//! Pod networking with Debian's CNI plugins (bridge + host-local + portmap on a subnet free here):
//! addresses, pod-to-pod and pod-to-host traffic, host ports, teardown, restart, recovery
//! after a crash, host-network pods. Traffic stays between this host and the pods' own
//! namespaces.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::pods::*;
use common::subnet::{free_subnet, Subnet};
use common::{require_root, Daemon};
use nix::sys::signal::Signal;
use swapcri::cri;

fn conflist(bridge: &str, data_dir: &Path, subnet: &Subnet) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "swapcri-test",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": true,
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": subnet.cidr(), "gateway": subnet.gateway() }]],
                    "dataDir": data_dir,
                },
            },
            { "type": "portmap", "capabilities": { "portMappings": true } },
        ],
    })
    .to_string()
}

async fn pod_status(daemon: &Daemon, id: &str) -> cri::PodSandboxStatus {
    let mut rt = daemon.runtime().await;
    rt.pod_sandbox_status(cri::PodSandboxStatusRequest { pod_sandbox_id: id.into(), verbose: false })
        .await
        .unwrap()
        .into_inner()
        .status
        .unwrap()
}

async fn pod_ip(daemon: &Daemon, id: &str) -> String {
    pod_status(daemon, id).await.network.unwrap().ip
}

/// The addresses host-local holds (one file per address in its data dir).
fn allocated(data_dir: &Path) -> Vec<String> {
    let dir = data_dir.join("swapcri-test");
    let mut ips: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.starts_with("10.")).collect())
        .unwrap_or_default();
    ips.sort();
    ips
}

/// veth interfaces attached to the bridge.
fn bridge_ports(bridge: &str) -> usize {
    let out = std::process::Command::new("ip").args(["-o", "link", "show", "master", bridge]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

async fn exec_ok(daemon: &Daemon, id: &str, cmd: &[&str]) -> String {
    let out = exec(daemon, id, cmd, 20).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.exit_code, 0, "{cmd:?}: {text} {}", String::from_utf8_lossy(&out.stderr));
    text
}

fn with_ports(mut config: cri::PodSandboxConfig, host_port: i32, container_port: i32) -> cri::PodSandboxConfig {
    config.port_mappings = vec![cri::PortMapping {
        protocol: cri::Protocol::Tcp as i32,
        container_port,
        host_port,
        host_ip: String::new(),
    }];
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_get_addresses_talk_and_release_them() {
    require_root();
    assert!(Path::new("/usr/lib/cni/bridge").exists(), "install containernetworking-plugins");
    let work = tempfile::tempdir().unwrap();
    let bridge = Bridge(format!("scri{}", std::process::id() % 100_000));
    let subnet = free_subnet();
    let gateway = subnet.gateway();
    let net_d = work.path().join("net.d");
    let data_dir: PathBuf = work.path().join("ipam");
    std::fs::create_dir_all(&net_d).unwrap();
    std::fs::write(net_d.join("10-test.conflist"), conflist(&bridge.0, &data_dir, &subnet)).unwrap();
    let mut daemon = Daemon::start(&format!("[network]\nconfig_dir = \"{}\"\n", net_d.display()));
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");

    // Two pods: a web server in one, a client in the other.
    let web_config = with_ports(sandbox_config("web", &logs), 18080 + (std::process::id() % 1000) as i32, 8080);
    let web = run_sandbox(&daemon, web_config.clone()).await;
    let server = "echo hello-from-web > /tmp/index.html && exec httpd -f -p 8080 -h /tmp";
    let web_ctr = start(&daemon, &web, &web_config, container_config("server", &["sh", "-c", server])).await;
    let client_config = sandbox_config("client", &logs);
    let client = run_sandbox(&daemon, client_config.clone()).await;
    let client_ctr = start(&daemon, &client, &client_config, container_config("c", &["sleep", "600"])).await;

    let (web_ip, client_ip) = (pod_ip(&daemon, &web).await, pod_ip(&daemon, &client).await);
    let prefix = subnet.prefix();
    assert!(web_ip.starts_with(&prefix) && client_ip.starts_with(&prefix), "{web_ip} {client_ip} in {}", subnet.cidr());
    assert_ne!(web_ip, client_ip);
    assert_eq!(allocated(&data_dir), {
        let mut v = vec![client_ip.clone(), web_ip.clone()];
        v.sort();
        v
    });
    assert_eq!(bridge_ports(&bridge.0), 2);

    // Verbose status answers the plugins' latest verdict at once (ADD's, first) and asks
    // them again in the background once that is stale; it never waits on a plugin.
    let mut rt = daemon.runtime().await;
    let verbose = rt
        .pod_sandbox_status(cri::PodSandboxStatusRequest { pod_sandbox_id: web.clone(), verbose: true })
        .await
        .unwrap()
        .into_inner();
    let info: serde_json::Value = serde_json::from_str(&verbose.info["info"]).unwrap();
    let check = &info["network"]["check"];
    assert_eq!((check["ok"].as_bool(), check["by"].as_str()), (Some(true), Some("ADD")), "{check}");
    let eth0 = exec_ok(&daemon, &client_ctr, &["ip", "-o", "-4", "addr", "show", "eth0"]).await;
    assert!(eth0.contains(&format!("{client_ip}/16")), "{eth0}");

    // Pod to pod.
    let url = format!("http://{web_ip}:8080/index.html");
    let mut body = String::new();
    for _ in 0..50 {
        let out = exec(&daemon, &client_ctr, &["wget", "-q", "-O", "-", &url], 10).await.unwrap();
        body = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.exit_code == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(body.trim(), "hello-from-web");

    // Pod to a port on the host's bridge address.
    let listener = std::net::TcpListener::bind((gateway.as_str(), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = std::thread::spawn(move || {
        let (mut conn, peer) = listener.accept().unwrap();
        let mut got = String::new();
        conn.read_to_string(&mut got).unwrap();
        (peer.ip().to_string(), got)
    });
    exec_ok(&daemon, &client_ctr, &["sh", "-c", &format!("echo from-pod | nc {gateway} {port}")]).await;
    let (peer, got) = accept.join().unwrap();
    assert_eq!((peer.as_str(), got.trim()), (client_ip.as_str(), "from-pod"));

    // The host port reaches the web pod (portmap DNAT of locally generated traffic).
    let host_port = web_config.port_mappings[0].host_port as u16;
    let mut conn = std::net::TcpStream::connect_timeout(
        &format!("{gateway}:{host_port}").parse().unwrap(),
        Duration::from_secs(5),
    )
    .expect("host port");
    conn.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.contains("hello-from-web"), "{reply}");

    // A restart keeps the addresses.
    daemon.stop_with(Signal::SIGKILL);
    daemon.restart();
    assert_eq!(pod_ip(&daemon, &web).await, web_ip);
    assert_eq!(pod_ip(&daemon, &client).await, client_ip);
    assert_eq!(allocated(&data_dir).len(), 2);

    // A crash after ADD but before the pod was recorded: recovery releases the address.
    let orphan = run_sandbox(&daemon, sandbox_config("orphan", &logs)).await;
    let orphan_ip = pod_ip(&daemon, &orphan).await;
    assert!(allocated(&data_dir).contains(&orphan_ip));
    daemon.stop_with(Signal::SIGKILL);
    std::fs::remove_dir_all(daemon.state_root().join("sandboxes").join(&orphan)).unwrap();
    daemon.restart();
    assert!(!allocated(&data_dir).contains(&orphan_ip), "recovery ran DEL for the unknown pod");
    assert_eq!(bridge_ports(&bridge.0), 2, "its veth is gone");

    // A host-network pod skips CNI and shares the host's namespace.
    let mut host_config = sandbox_config("hostnet", &logs);
    let opts = host_config.linux.as_mut().unwrap().security_context.as_mut().unwrap();
    opts.namespace_options.as_mut().unwrap().network = cri::NamespaceMode::Node as i32;
    let hostnet = run_sandbox(&daemon, host_config.clone()).await;
    assert_eq!(pod_ip(&daemon, &hostnet).await, "");
    let mut host_ctr_config = container_config("h", &["sleep", "600"]);
    host_ctr_config.linux.as_mut().unwrap().security_context.as_mut().unwrap().namespace_options =
        host_config.linux.as_ref().unwrap().security_context.as_ref().unwrap().namespace_options.clone();
    let host_ctr = start(&daemon, &hostnet, &host_config, host_ctr_config).await;
    let ns = exec_ok(&daemon, &host_ctr, &["readlink", "/proc/self/ns/net"]).await;
    assert_eq!(ns.trim(), std::fs::read_link("/proc/self/ns/net").unwrap().display().to_string());
    assert_eq!(allocated(&data_dir).len(), 2, "no address for the host-network pod");

    // Removal releases addresses and veths; a second stop is a no-op.
    let mut rt = daemon.runtime().await;
    for pod in [&web, &client, &hostnet] {
        rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.to_string() }).await.unwrap();
        rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.to_string() }).await.unwrap();
        rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod.to_string() }).await.unwrap();
    }
    assert!(allocated(&data_dir).is_empty(), "{:?}", allocated(&data_dir));
    assert_eq!(bridge_ports(&bridge.0), 0);
    let leftover = std::fs::read_dir(daemon.state_root().join("cni")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(leftover, 0, "no network records left");
    let _ = web_ctr;
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_follows_the_config_directory_without_a_restart() {
    require_root();
    let work = tempfile::tempdir().unwrap();
    let net_d = work.path().join("net.d");
    std::fs::create_dir_all(&net_d).unwrap();
    let daemon = Daemon::start(&format!("[network]\nconfig_dir = \"{}\"\n", net_d.display()));
    let network_ready = || async {
        let mut rt = daemon.runtime().await;
        let status = rt.status(cri::StatusRequest { verbose: false }).await.unwrap().into_inner();
        status.status.unwrap().conditions.into_iter().find(|c| c.r#type == "NetworkReady").unwrap()
    };
    let before = network_ready().await;
    assert!(!before.status && before.reason == "NetworkPluginNotReady", "{before:?}");
    assert!(before.message.contains("no network configuration"), "{before:?}");
    import_busybox(&daemon);
    let mut rt = daemon.runtime().await;
    let config = sandbox_config("early", &daemon.dir.path().join("logs"));
    let err = rt
        .run_pod_sandbox(cri::RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: String::new() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert_eq!(rt.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await.unwrap().into_inner().items.len(), 0);

    std::fs::write(net_d.join("10-lo.conflist"), common::LOOPBACK_CONFLIST).unwrap();
    assert!(network_ready().await.status);
    run_sandbox(&daemon, config).await;
}
