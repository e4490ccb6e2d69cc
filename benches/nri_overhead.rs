//! What NRI costs a pod and container cycle (RunPodSandbox, CreateContainer, StartContainer,
//! StopContainer, RemoveContainer, StopPodSandbox, RemovePodSandbox on a host-network pod):
//! NRI off; on with no plugin; on with one plugin subscribed to every event that answers at
//! once. The three daemons take turns, a cycle each per round, so drift hits all alike.
//! Per event: the daemon's own time waiting on the plugin (its metrics), and the cycle's
//! extra time over the number of events. Needs root.
//!   sudo hack/bench.sh     (or: cargo bench --bench nri_overhead)

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::pods::*;
use common::Daemon;
use swapcri::cri;
use swapcri::nri::api;
use swapcri::nri::stub::{Handler, Stub};

const ROUNDS: usize = 30;

fn runc() -> String {
    std::env::var("SWAPCRI_BENCH_RUNC").unwrap_or_else(|_| "runc".into())
}

/// Answers every event at once, counting them.
struct Counting(AtomicU64);

#[async_trait]
impl Handler for Counting {
    async fn create_container(
        &self,
        _p: api::PodSandbox,
        _c: api::Container,
    ) -> Result<api::CreateContainerResponse, String> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(Default::default())
    }
    async fn event(&self, _m: &str, _p: Option<api::PodSandbox>, _c: Option<api::Container>) -> Result<(), String> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn config(nri: Option<&std::path::Path>, port: u16) -> String {
    let mut c =
        format!("[runtime.handlers.runc]\nbinary = \"{}\"\n[metrics]\naddress = \"127.0.0.1:{port}\"\n", runc());
    match nri {
        Some(dir) => c.push_str(&format!(
            "[nri]\nenable = true\nsocket_path = \"{}/nri.sock\"\nplugin_path = \"{}/none\"\n",
            dir.display(),
            dir.display()
        )),
        // NRI is on by default: off must be said.
        None => c.push_str("[nri]\nenable = false\n"),
    }
    c
}

async fn cycle(daemon: &Daemon, tag: &str) -> Duration {
    let logs = daemon.dir.path().join("logs");
    let mut pod_config = sandbox_config(tag, &logs);
    let mut ctr = container_config("c", &["sleep", "30"]);
    let ns = pod_config.linux.as_mut().unwrap().security_context.as_mut().unwrap();
    ns.namespace_options.as_mut().unwrap().network = cri::NamespaceMode::Node as i32;
    ctr.linux.as_mut().unwrap().security_context.as_mut().unwrap().namespace_options = ns.namespace_options.clone();
    let started = Instant::now();
    let pod = run_sandbox(daemon, pod_config.clone()).await;
    let id = start(daemon, &pod, &pod_config, ctr).await;
    let mut rt = daemon.runtime().await;
    rt.stop_container(cri::StopContainerRequest { container_id: id.clone(), timeout: 0 }).await.unwrap();
    rt.remove_container(cri::RemoveContainerRequest { container_id: id }).await.unwrap();
    rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: pod.clone() }).await.unwrap();
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: pod }).await.unwrap();
    started.elapsed()
}

fn scrape(port: u16) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// (event, count, seconds) from the plugin's series.
fn per_event(body: &str) -> Vec<(String, f64, f64)> {
    let value = |name: &str, event: &str| {
        body.lines()
            .find(|l| l.starts_with(name) && l.contains(&format!("event=\"{event}\"")))
            .and_then(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let mut events: Vec<String> = body
        .lines()
        .filter(|l| l.starts_with("swapcri_nri_plugin_events_total"))
        .filter_map(|l| Some(l.split("event=\"").nth(1)?.split('"').next()?.to_string()))
        .collect();
    events.sort();
    events.dedup();
    events
        .into_iter()
        .map(|e| {
            let (n, s) =
                (value("swapcri_nri_plugin_events_total", &e), value("swapcri_nri_plugin_event_seconds_total", &e));
            (e, n, s)
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::main]
async fn main() {
    common::require_root();
    let (nri_empty, nri_plugin) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ports = [port(), port(), port()];
    let daemons = [
        Daemon::start(&config(None, ports[0])),
        Daemon::start(&config(Some(nri_empty.path()), ports[1])),
        Daemon::start(&config(Some(nri_plugin.path()), ports[2])),
    ];
    for d in &daemons {
        import_busybox(d);
    }
    let counting = Arc::new(Counting(AtomicU64::new(0)));
    let socket = nri_plugin.path().join("nri.sock");
    let stub = Stub::connect(&socket, "50", "bench", counting.clone()).await.expect("the plugin connects");
    let mut samples = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for (n, d) in daemons.iter().enumerate() {
            samples[n].push(cycle(d, &format!("b{n}-{round}")).await);
        }
    }
    let events = counting.0.load(Ordering::Relaxed);
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("NRI overhead with {}, pod + container cycle, median of {ROUNDS} rounds:", runc());
    println!("  NRI off:                               {:.1} ms", ms(medians[0]));
    println!(
        "  NRI on, no plugin:                     {:.1} ms ({:+.1} ms)",
        ms(medians[1]),
        ms(medians[1]) - ms(medians[0])
    );
    println!(
        "  NRI on, one plugin on every event:     {:.1} ms ({:+.1} ms)",
        ms(medians[2]),
        ms(medians[2]) - ms(medians[0])
    );
    let per_cycle = events as f64 / ROUNDS as f64;
    println!("  events the plugin saw per cycle: {per_cycle:.0}");
    println!(
        "  extra cycle time per event:            {:.3} ms",
        (ms(medians[2]) - ms(medians[1])) / per_cycle.max(1.0)
    );
    println!("  the daemon's wait on the plugin, mean per event (target <= 1 ms):");
    let body = tokio::task::spawn_blocking(move || scrape(ports[2])).await.unwrap();
    let mut worst: f64 = 0.0;
    for (event, count, seconds) in per_event(&body) {
        let mean = seconds / count.max(1.0) * 1000.0;
        worst = worst.max(mean);
        println!("    {event:<22} {count:>5.0} events  {mean:.3} ms");
    }
    println!("  worst mean: {worst:.3} ms ({})", if worst <= 1.0 { "ok" } else { "MISSED" });
    drop(stub);
}
