//! `swapcri top`: each running container with its pod, QoS class, priority, swap used /
//! limit / peak, swap-in rate, memory pressure, swap state and the swap guard's action,
//! worst first. Redrawn in place every
//! `--interval` seconds with plain ANSI (fine over ssh), or printed once with `--once` for
//! scripts (rates then measured over one interval).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::cri;
use crate::cri::runtime_service_client::RuntimeServiceClient;
use tonic::transport::Channel;

/// One container's line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub id: String,
    /// namespace/name of the pod.
    pub pod: String,
    pub container: String,
    pub qos: String,
    /// Why it counts as critical (never swaps), if it does.
    pub critical: bool,
    /// The pod's priority as the swap guard orders victims.
    pub priority: i32,
    pub swap_used: Option<u64>,
    pub swap_limit: Option<u64>,
    pub swap_peak: Option<u64>,
    /// Anonymous refaults so far (for the rate between two frames).
    pub refaults: Option<u64>,
    /// Pages a second brought back from swap.
    pub swapins_per_second: Option<f64>,
    /// `memory.pressure` some avg10, percent.
    pub memory_some_avg10: Option<f64>,
    /// normal, pressured, thrashing; "-" where detection does not run.
    pub state: String,
    /// What the swap guard did (observe, exempt, throttled, killed); "-" while not thrashing.
    pub guard: String,
}

/// A pod's name (namespace/name) and priority.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pod {
    pub name: String,
    pub priority: i32,
}

/// The row for one verbose ContainerStatus `info` (JSON); `pods` maps pod ids to pods.
pub fn row(status: &cri::ContainerStatus, info: &serde_json::Value, pods: &HashMap<String, Pod>) -> Row {
    let plan = &info["memoryPlan"];
    let swap = &info["usage"]["swap"];
    let sandbox = info["sandboxID"].as_str().unwrap_or_default();
    let pod = pods.get(sandbox);
    Row {
        id: status.id.clone(),
        pod: pod.map_or_else(|| short(sandbox).to_string(), |p| p.name.clone()),
        priority: pod.map_or(0, |p| p.priority),
        container: status.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default(),
        qos: plan["qos_class"].as_str().unwrap_or("-").to_string(),
        critical: plan["critical"].is_string(),
        swap_used: swap["usage_bytes"].as_u64(),
        swap_limit: swap["limit_bytes"].as_u64(),
        swap_peak: swap["peak_bytes"].as_u64(),
        refaults: swap["anon_refaults"].as_u64(),
        swapins_per_second: info["swapState"]["figures"]["swapins_per_second"].as_f64(),
        memory_some_avg10: info["usage"]["pressure"]["memory"]["some"]["avg10"].as_f64(),
        state: info["swapState"]["state"].as_str().unwrap_or("-").to_string(),
        guard: info["swapState"]["guard"]["action"].as_str().unwrap_or("-").to_string(),
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(13)]
}

/// Swap-in rates from the refaults of the frame before, `elapsed` earlier.
pub fn with_rates(mut rows: Vec<Row>, before: &HashMap<String, u64>, elapsed: Duration) -> Vec<Row> {
    for r in &mut rows {
        if let (Some(now), Some(then)) = (r.refaults, before.get(&r.id)) {
            if elapsed > Duration::ZERO && now >= *then {
                r.swapins_per_second = Some((now - then) as f64 / elapsed.as_secs_f64());
            }
        }
    }
    rows
}

/// Bytes for people, without a space so a cell stays one word.
fn bytes(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| crate::model::bytes::human(v).replace(' ', ""))
}

fn number(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| format!("{v:.decimals$}")).unwrap_or_else(|| "-".into())
}

fn severity(state: &str) -> u8 {
    match state {
        "thrashing" => 0,
        "pressured" => 1,
        _ => 2,
    }
}

/// The table: thrashing first, then pressured, then by swap used.
pub fn render(rows: &[Row]) -> String {
    let mut rows = rows.to_vec();
    rows.sort_by(|a, b| {
        (severity(&a.state), std::cmp::Reverse(a.swap_used), &a.pod, &a.container).cmp(&(
            severity(&b.state),
            std::cmp::Reverse(b.swap_used),
            &b.pod,
            &b.container,
        ))
    });
    let header =
        ["POD", "CONTAINER", "QOS", "CRIT", "PRIO", "SWAP", "LIMIT", "PEAK", "SWAPIN/S", "PSI10", "STATE", "GUARD"];
    let lines: Vec<[String; 12]> = rows
        .iter()
        .map(|r| {
            [
                r.pod.clone(),
                r.container.clone(),
                r.qos.clone(),
                if r.critical { "yes" } else { "-" }.into(),
                r.priority.to_string(),
                bytes(r.swap_used),
                r.swap_limit
                    .map_or_else(|| if r.swap_used.is_some() { "max".into() } else { "-".into() }, |l| bytes(Some(l))),
                bytes(r.swap_peak),
                number(r.swapins_per_second, 0),
                number(r.memory_some_avg10, 1),
                r.state.clone(),
                r.guard.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut put = |cells: &[String]| {
        let text: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    put(&header.map(String::from));
    for line in &lines {
        put(line);
    }
    out
}

/// Every running container's row, read now.
async fn frame(rt: &mut RuntimeServiceClient<Channel>) -> anyhow::Result<Vec<Row>> {
    let pods = rt.list_pod_sandbox(cri::ListPodSandboxRequest::default()).await?.into_inner().items;
    let names: HashMap<String, Pod> = pods
        .into_iter()
        .map(|p| {
            let m = p.metadata.unwrap_or_default();
            let priority = crate::policy::guard::priority(
                p.annotations.get(crate::policy::guard::PRIORITY_ANNOTATION).map(String::as_str),
            );
            (p.id, Pod { name: format!("{}/{}", m.namespace, m.name), priority })
        })
        .collect();
    let running = cri::ContainerStateValue { state: cri::ContainerState::ContainerRunning as i32 };
    let filter = cri::ContainerFilter { state: Some(running), ..Default::default() };
    let containers = rt.list_containers(cri::ListContainersRequest { filter: Some(filter) }).await?.into_inner();
    let mut rows = Vec::new();
    for c in containers.containers {
        let request = cri::ContainerStatusRequest { container_id: c.id, verbose: true };
        // A container removed since the listing is left out.
        let Ok(answer) = rt.container_status(request).await else { continue };
        let answer = answer.into_inner();
        let info = answer.info.get("info").and_then(|i| serde_json::from_str(i).ok()).unwrap_or_default();
        if let Some(status) = answer.status {
            rows.push(row(&status, &info, &names));
        }
    }
    Ok(rows)
}

fn refaults(rows: &[Row]) -> HashMap<String, u64> {
    rows.iter().filter_map(|r| Some((r.id.clone(), r.refaults?))).collect()
}

/// Prints frames until interrupted, or one with `once`.
pub async fn run(channel: Channel, once: bool, interval: Duration) -> anyhow::Result<()> {
    let mut rt = RuntimeServiceClient::new(channel);
    let mut before = refaults(&frame(&mut rt).await?);
    let mut taken = Instant::now();
    loop {
        tokio::time::sleep(interval).await;
        let rows = frame(&mut rt).await?;
        let rows = with_rates(rows, &before, taken.elapsed());
        (before, taken) = (refaults(&rows), Instant::now());
        if once {
            print!("{}", render(&rows));
            return Ok(());
        }
        // Home, clear the screen, then the frame.
        print!("\x1b[H\x1b[2J{} running containers, every {:.0?}\n\n{}", rows.len(), interval, render(&rows));
        use std::io::Write;
        std::io::stdout().flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(qos: &str, swap: serde_json::Value, state: Option<&str>) -> serde_json::Value {
        serde_json::json!({
            "sandboxID": "pod1",
            "memoryPlan": {"qos_class": qos, "critical": null},
            "usage": {"swap": swap, "pressure": {"memory": {"some": {"avg10": 12.5}}}},
            "swapState": state.map(|s| serde_json::json!({
                "state": s,
                "figures": {"swapins_per_second": 300.0},
                "guard": {"action": "throttled", "detail": "cpu.weight: 100 -> 10"},
            })),
        })
    }

    fn status(id: &str, name: &str) -> cri::ContainerStatus {
        cri::ContainerStatus {
            id: id.into(),
            metadata: Some(cri::ContainerMetadata { name: name.into(), attempt: 0 }),
            ..Default::default()
        }
    }

    #[test]
    fn rows_from_verbose_status() {
        let pods = HashMap::from([("pod1".to_string(), Pod { name: "default/web".into(), priority: -5 })]);
        let swap =
            serde_json::json!({"usage_bytes": 4096, "limit_bytes": null, "peak_bytes": 8192, "anon_refaults": 10});
        let r = row(&status("c1", "app"), &info("Burstable", swap, Some("thrashing")), &pods);
        assert_eq!(
            r,
            Row {
                id: "c1".into(),
                pod: "default/web".into(),
                container: "app".into(),
                qos: "Burstable".into(),
                critical: false,
                priority: -5,
                swap_used: Some(4096),
                swap_limit: None,
                swap_peak: Some(8192),
                refaults: Some(10),
                swapins_per_second: Some(300.0),
                memory_some_avg10: Some(12.5),
                state: "thrashing".into(),
                guard: "throttled".into(),
            }
        );
        // cgroup v1, no detection: every figure absent.
        let r = row(&status("c2", "db"), &serde_json::json!({"sandboxID": "gone0123456789abcdef"}), &pods);
        assert_eq!(
            (r.pod.as_str(), r.qos.as_str(), r.swap_used, r.state.as_str(), r.guard.as_str()),
            ("gone012345678", "-", None, "-", "-")
        );
    }

    #[test]
    fn rates_between_frames() {
        let rows = vec![
            Row { id: "a".into(), refaults: Some(1500), ..Default::default() },
            Row { id: "b".into(), refaults: Some(5), swapins_per_second: Some(7.0), ..Default::default() },
        ];
        let before = HashMap::from([("a".to_string(), 500)]);
        let rows = with_rates(rows, &before, Duration::from_secs(2));
        assert_eq!(rows[0].swapins_per_second, Some(500.0));
        assert_eq!(rows[1].swapins_per_second, Some(7.0), "no earlier frame: the watcher's figure stays");
    }

    #[test]
    fn the_table_puts_the_worst_first() {
        let row = |pod: &str, state: &str, used: Option<u64>| Row {
            pod: pod.into(),
            container: "c".into(),
            qos: "Burstable".into(),
            state: state.into(),
            swap_used: used,
            ..Default::default()
        };
        let text = render(&[
            row("ns/idle", "normal", Some(10 << 20)),
            row("ns/big", "normal", Some(3 << 30)),
            row("ns/hot", "thrashing", Some(1 << 20)),
            row("ns/v1", "-", None),
        ]);
        let pods: Vec<&str> = text.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
        assert_eq!(pods, ["ns/hot", "ns/big", "ns/idle", "ns/v1"], "{text}");
        assert!(text.lines().next().unwrap().starts_with("POD"), "{text}");
        assert!(text.contains("3.0GiB") && text.contains("10.0MiB") && text.contains("max"), "{text}");
    }
}
