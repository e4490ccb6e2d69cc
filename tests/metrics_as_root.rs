//! A Prometheus scrape: names, types and labels of the exposition, gRPC counters by code.

mod common;

use std::io::{Read, Write};

use common::pods::*;
use common::{require_root, Daemon};
use swapcri::cri;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn scrape(port: u16) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/openmetrics-text"), "{head}");
    body.to_string()
}

/// (name, labels, value) of every sample line.
fn samples(body: &str) -> Vec<(String, String, f64)> {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n.to_string(), rest.trim_end_matches('}').to_string()),
                None => (series.to_string(), String::new()),
            };
            (name, labels, value.parse().unwrap_or_else(|_| panic!("value of {l}")))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn scrape_names_labels_and_rpc_codes() {
    require_root();
    let port = free_port();
    let daemon = Daemon::start(&format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n"));
    import_busybox(&daemon);
    let logs = daemon.dir.path().join("logs");
    let pod_config = sandbox_config("web", &logs);
    let pod = run_sandbox(&daemon, pod_config.clone()).await;
    let id = start(&daemon, &pod, &pod_config, container_config("app", &["sleep", "30"])).await;
    let mut rt = daemon.runtime().await;
    let _ = rt.container_status(cri::ContainerStatusRequest { container_id: "missing".into(), verbose: false }).await;
    // One exec session over WebSocket, finished before the scrape.
    let url = exec_url(&daemon, &id, &["true"], false, false, false).await;
    let mut session = common::ws_client::connect(&url, &["v5.channel.k8s.io"]).await.unwrap();
    session.read_to_end().await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let body = tokio::task::spawn_blocking(move || scrape(port)).await.unwrap();
    assert!(body.trim_end().ends_with("# EOF"), "OpenMetrics text ends with # EOF");
    let all = samples(&body);
    for (name, _, _) in &all {
        assert!(name.starts_with("swapcri_"), "{name} lacks the swapcri_ prefix");
    }
    let find = |name: &str| all.iter().filter(|(n, _, _)| n == name).collect::<Vec<_>>();
    let facts = common::node::probe();
    assert_eq!(find("swapcri_machine_swap_bytes")[0].2, facts.swap_total as f64);
    assert_eq!(find("swapcri_node_swap_usage_bytes").len(), 1);
    let ws = find("swapcri_container_memory_working_set_bytes");
    assert_eq!(ws.len(), 1, "{body}");
    assert_eq!(ws[0].1, format!("container=\"app\",pod=\"web\",namespace=\"default\",id=\"{id}\""));
    assert!(ws[0].2 > 0.0);
    // Containers' swap series exist where the memory controller is on cgroup v2 (swap
    // accounting), none where it is on cgroup v1.
    let usage = find("swapcri_container_swap_usage_bytes");
    if facts.cgroup_v2 && facts.swap_accounting {
        assert_eq!(usage.len(), 1, "{body}");
        assert_eq!(usage[0].1, ws[0].1);
        assert!(usage[0].2 >= 0.0);
    } else {
        assert!(usage.is_empty(), "{usage:?}");
    }
    // The pod's own cgroup, under the same figures with pod labels.
    let pod_labels = format!("pod=\"web\",namespace=\"default\",id=\"{pod}\"");
    let pod_ws = find("swapcri_pod_memory_working_set_bytes");
    assert!(pod_ws.iter().any(|(_, l, v)| *l == pod_labels && *v > 0.0), "{pod_ws:?}");
    // The kernel's swap detail: limit events and refaults wherever swap is accounted, the
    // peak from Linux 6.5, memory pressure wherever the node has PSI; nothing on cgroup v1.
    let of = |name: &str, labels: &str| find(name).into_iter().filter(|(_, l, _)| l.starts_with(labels)).count();
    let swap_accounted = facts.cgroup_v2 && facts.swap_accounting;
    let events = of("swapcri_container_swap_events_total", &ws[0].1);
    assert_eq!(events, if swap_accounted { 3 } else { 0 }, "high, max and fail:\n{body}");
    assert_eq!(of("swapcri_container_swap_anon_refaults_total", &ws[0].1), swap_accounted as usize, "{body}");
    assert_eq!(of("swapcri_pod_swap_usage_bytes", &pod_labels), swap_accounted as usize, "{body}");
    let peak = swap_accounted && facts.kernel >= (6, 5);
    assert_eq!(of("swapcri_container_swap_peak_bytes", &ws[0].1), peak as usize, "{body}");
    let psi = facts.cgroup_v2 && std::path::Path::new("/proc/pressure/memory").exists();
    let pressure = of("swapcri_container_memory_pressure_seconds_total", &ws[0].1);
    assert_eq!(pressure, if psi { 2 } else { 0 }, "some and full:\n{body}");
    // Thrash detection runs where there is memory PSI: a sleeping container is not thrashing.
    let thrashing = find("swapcri_container_swap_thrashing");
    assert_eq!(thrashing.len(), psi as usize, "{thrashing:?}");
    assert!(thrashing.iter().all(|(_, l, v)| *l == ws[0].1 && *v == 0.0), "{thrashing:?}");
    // The same figures in the verbose statuses.
    let verbose = rt.container_status(cri::ContainerStatusRequest { container_id: id.clone(), verbose: true });
    let info = verbose.await.unwrap().into_inner().info;
    let usage: serde_json::Value = serde_json::from_str(&info["info"]).unwrap();
    let swap = &usage["usage"]["swap"];
    assert_eq!(swap["events"].is_object(), swap_accounted, "{swap}");
    assert_eq!(swap["peak_bytes"].is_u64(), peak, "{swap}");
    let state = &usage["swapState"];
    assert_eq!(state["state"].as_str(), psi.then_some("normal"), "{state}");
    let (_, pod_info) = verbose_pod_status(&daemon, &pod).await;
    assert!(pod_info["usage"]["memory"]["working_set_bytes"].as_u64() > Some(0), "{}", pod_info["usage"]);
    assert_eq!(pod_info["usage"]["swap"].is_object(), swap_accounted, "{}", pod_info["usage"]);
    assert_eq!(find("swapcri_swap_policy_disagreements_total")[0].2, 0.0);
    let exec_ws = "kind=\"exec\",transport=\"websocket\"";
    let sessions = find("swapcri_streaming_sessions_total");
    assert!(sessions.iter().any(|(_, l, v)| l == exec_ws && *v == 1.0), "{sessions:?}");
    let active = find("swapcri_streaming_sessions_active");
    assert!(active.iter().any(|(_, l, v)| l == exec_ws && *v == 0.0), "{active:?}");
    assert_eq!(find("swapcri_memory_readback_mismatches_total").len(), 1);
    let ok = find("swapcri_grpc_requests_total");
    assert!(ok.iter().any(|(_, l, v)| l == "method=\"RunPodSandbox\",code=\"Ok\"" && *v == 1.0), "{ok:?}");
    assert!(ok.iter().any(|(_, l, v)| l == "method=\"ContainerStatus\",code=\"NotFound\"" && *v == 1.0), "{ok:?}");
    assert!(body.contains("# TYPE swapcri_grpc_request_duration_seconds histogram"));
    assert!(find("swapcri_grpc_request_duration_seconds_bucket")
        .iter()
        .any(|(_, l, _)| l.starts_with("le=") || l.contains("method=\"CreateContainer\"")));
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
}
