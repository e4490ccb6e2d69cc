//! The Prometheus endpoint (`metrics.address`, off by default). Every name starts with
//! `swapcri_` so nothing clashes with kubelet's or cadvisor's series.

mod groups;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub use groups::{GroupSeries, Labels};

use groups::GroupFamilies;

/// What a scrape reads from the runtime.
pub trait MetricsSource: Send + Sync {
    fn container_series(&self) -> Vec<GroupSeries>;
    fn pod_series(&self) -> Vec<GroupSeries>;
    /// (swap disagreements, read-back mismatches) so far.
    fn memory_counters(&self) -> (u64, u64);
    /// What the swap guard and the cold-memory offload have done so far.
    fn swap_actions(&self) -> SwapActions {
        SwapActions::default()
    }
    /// Each NRI plugin's connection and events so far.
    fn nri_plugins(&self) -> Vec<crate::nri::PluginStats> {
        Vec::new()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    pub plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginEventLabels {
    pub plugin: String,
    pub event: String,
}

/// The NRI plugins' series.
#[derive(Default)]
struct NriFamilies {
    connected: Family<PluginLabels, Gauge>,
    events: Family<PluginEventLabels, Counter>,
    errors: Family<PluginEventLabels, Counter>,
    seconds: Family<PluginEventLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
}

impl NriFamilies {
    fn register(&self, r: &mut Registry) {
        r.register("nri_plugin_connected", "NRI plugins: 1 while connected", self.connected.clone());
        r.register("nri_plugin_events", "Events relayed to each NRI plugin, by event", self.events.clone());
        r.register(
            "nri_plugin_errors",
            "Events an NRI plugin failed, timed out on or was lost during",
            self.errors.clone(),
        );
        r.register("nri_plugin_event_seconds", "Time spent waiting on each NRI plugin, by event", self.seconds.clone());
    }

    fn refresh(&self, plugins: &[crate::nri::PluginStats]) {
        for p in plugins {
            self.connected.get_or_create(&PluginLabels { plugin: p.plugin.clone() }).set(i64::from(p.connected));
            for (event, s) in &p.events {
                let labels = PluginEventLabels { plugin: p.plugin.clone(), event: event.clone() };
                let events = self.events.get_or_create(&labels);
                events.inc_by(s.count.saturating_sub(events.get()));
                let errors = self.errors.get_or_create(&labels);
                errors.inc_by(s.errors.saturating_sub(errors.get()));
                let seconds = self.seconds.get_or_create(&labels);
                let more = s.seconds - seconds.get();
                if more > 0.0 {
                    seconds.inc_by(more);
                }
            }
        }
    }
}

/// Totals of the swap guard's actions and the offload's requests since start.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SwapActions {
    pub throttles: u64,
    pub restores: u64,
    pub kills: u64,
    pub offload_requested_bytes: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// throttle, restore or kill.
    pub action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    pub method: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SessionLabels {
    /// exec, attach or portforward.
    pub kind: String,
    /// spdy or websocket.
    pub transport: String,
}

/// The streaming server's series, handed to it at start-up.
#[derive(Clone, Default)]
pub struct StreamingMetrics {
    sessions: Family<SessionLabels, Counter>,
    active: Family<SessionLabels, Gauge>,
    refused: Counter,
}

impl StreamingMetrics {
    /// Counts a session that starts; it is active until the returned guard is dropped.
    pub fn session(&self, kind: &str, transport: &str) -> ActiveSession {
        let labels = SessionLabels { kind: kind.into(), transport: transport.into() };
        self.sessions.get_or_create(&labels).inc();
        let active = self.active.get_or_create(&labels).clone();
        active.inc();
        ActiveSession(active)
    }

    /// Counts a connection closed on arrival (streaming.max_connections reached).
    pub fn refused(&self) {
        self.refused.inc();
    }
}

pub struct ActiveSession(Gauge);

impl Drop for ActiveSession {
    fn drop(&mut self) {
        self.0.dec();
    }
}

pub struct Metrics {
    registry: Mutex<Registry>,
    machine_swap: Gauge,
    node_swap_usage: Gauge,
    containers: GroupFamilies,
    pods: GroupFamilies,
    disagreements: Counter,
    mismatches: Counter,
    grpc_requests: Family<RpcLabels, Counter>,
    grpc_latency: Family<MethodLabels, Histogram>,
    streaming: StreamingMetrics,
    guard_actions: Family<ActionLabels, Counter>,
    offload_requested: Counter,
    nri: NriFamilies,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Metrics {
            registry: Mutex::new(Registry::with_prefix("swapcri")),
            machine_swap: Gauge::default(),
            node_swap_usage: Gauge::default(),
            containers: GroupFamilies::default(),
            pods: GroupFamilies::default(),
            disagreements: Counter::default(),
            mismatches: Counter::default(),
            grpc_requests: Family::default(),
            grpc_latency: Family::new_with_constructor(latency_histogram),
            streaming: StreamingMetrics::default(),
            guard_actions: Family::default(),
            offload_requested: Counter::default(),
            nri: NriFamilies::default(),
        };
        {
            let mut r = m.registry.lock().unwrap();
            r.register(
                "machine_swap_bytes",
                "Swap of the machine (SwapTotal); kubelet: machine_swap_bytes",
                m.machine_swap.clone(),
            );
            r.register(
                "node_swap_usage_bytes",
                "Swap in use on the node (SwapTotal - SwapFree); kubelet: node_swap_usage_bytes",
                m.node_swap_usage.clone(),
            );
            m.containers.register(r.sub_registry_with_prefix("container"), "container", true);
            m.pods.register(r.sub_registry_with_prefix("pod"), "pod", false);
            r.register(
                "swap_policy_disagreements",
                "Containers whose kubelet memory.swap.max differed from swapcri's own",
                m.disagreements.clone(),
            );
            r.register(
                "memory_readback_mismatches",
                "Planned memory values the kernel did not hold when read back",
                m.mismatches.clone(),
            );
            r.register(
                "swap_guard_actions",
                "The swap guard's actions on thrashing containers: throttle, restore (a throttle put back), kill",
                m.guard_actions.clone(),
            );
            r.register(
                "offload_reclaim_requested_bytes",
                "Bytes the cold-memory offload asked the kernel to reclaim (memory.reclaim) from containers",
                m.offload_requested.clone(),
            );
            m.nri.register(&mut r);
            r.register("grpc_requests", "CRI requests by method and status code", m.grpc_requests.clone());
            r.register("grpc_request_duration_seconds", "CRI request latency by method", m.grpc_latency.clone());
            r.register(
                "streaming_sessions",
                "Exec, attach and port-forward sessions started, by kind and transport",
                m.streaming.sessions.clone(),
            );
            r.register(
                "streaming_sessions_active",
                "Exec, attach and port-forward sessions open now, by kind and transport",
                m.streaming.active.clone(),
            );
            r.register(
                "streaming_connections_refused",
                "Streaming connections closed on arrival because streaming.max_connections were open",
                m.streaming.refused.clone(),
            );
        }
        m
    }

    pub fn streaming(&self) -> StreamingMetrics {
        self.streaming.clone()
    }

    pub fn observe_rpc(&self, method: &str, code: &str, elapsed: Duration) {
        self.grpc_requests.get_or_create(&RpcLabels { method: method.into(), code: code.into() }).inc();
        self.grpc_latency.get_or_create(&MethodLabels { method: method.into() }).observe(elapsed.as_secs_f64());
    }

    /// Refreshes the node and container series from their sources, then encodes all.
    pub fn scrape(&self, source: &dyn MetricsSource) -> String {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let read = |key| crate::node::memory::meminfo_bytes(&meminfo, key).unwrap_or(0);
        let (total, free) = (read("SwapTotal"), read("SwapFree"));
        let (containers, pods) = (source.container_series(), source.pod_series());
        let (disagreements, mismatches) = source.memory_counters();
        let actions = source.swap_actions();
        let plugins = source.nri_plugins();
        // One scrape at a time from here: a refresh clears the families and sets counters to
        // the kernel's totals by adding, so two interleaved refreshes would add twice.
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        self.machine_swap.set(total as i64);
        self.node_swap_usage.set(total.saturating_sub(free) as i64);
        self.containers.refresh(&containers);
        self.pods.refresh(&pods);
        self.nri.refresh(&plugins);
        let guard = |action: &str| self.guard_actions.get_or_create(&ActionLabels { action: action.into() }).clone();
        for (counter, value) in [
            (self.disagreements.clone(), disagreements),
            (self.mismatches.clone(), mismatches),
            (guard("throttle"), actions.throttles),
            (guard("restore"), actions.restores),
            (guard("kill"), actions.kills),
            (self.offload_requested.clone(), actions.offload_requested_bytes),
        ] {
            counter.inc_by(value.saturating_sub(counter.get()));
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String");
        out
    }
}

/// Serves `/metrics` on `address` until the runtime ends. Scrapes read files off the async
/// threads, so a slow scraper never holds up the CRI.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    source: Arc<dyn MetricsSource>,
) -> std::io::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let (metrics, source) = (metrics.clone(), source.clone());
            async move {
                let body = crate::blocking::spawn(move || metrics.scrape(source.as_ref())).await.unwrap_or_default();
                ([("content-type", "application/openmetrics-text; version=1.0.0; charset=utf-8")], body)
            }
        }),
    );
    tracing::info!(address = %listener.local_addr()?, "serving Prometheus metrics on /metrics");
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cgroup_stats::CgroupStats;
    use crate::model::cgroup_stats::SwapStats;

    struct OneContainer;

    impl MetricsSource for OneContainer {
        fn container_series(&self) -> Vec<GroupSeries> {
            let swap = SwapStats { usage_bytes: 1, anon_refaults: Some(77), ..Default::default() };
            let stats = CgroupStats { swap: Some(swap), ..Default::default() };
            vec![GroupSeries::container("app", "web", "default", "c1", stats)]
        }
        fn pod_series(&self) -> Vec<GroupSeries> {
            vec![]
        }
        fn memory_counters(&self) -> (u64, u64) {
            (3, 0)
        }
        fn swap_actions(&self) -> SwapActions {
            SwapActions { throttles: 2, restores: 1, kills: 1, offload_requested_bytes: 4096 }
        }
    }

    #[test]
    fn concurrent_scrapes_report_the_kernels_totals_once() {
        let metrics = Arc::new(Metrics::new());
        let scrapers: Vec<_> = (0..4)
            .map(|_| {
                let metrics = metrics.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let text = metrics.scrape(&OneContainer);
                        let refaults =
                            text.lines().find(|l| l.starts_with("swapcri_container_swap_anon_refaults_total"));
                        assert!(refaults.is_some_and(|l| l.ends_with(" 77")), "{refaults:?}");
                        assert!(text.contains("swapcri_swap_policy_disagreements_total 3\n"), "{text}");
                        for line in [
                            r#"swapcri_swap_guard_actions_total{action="throttle"} 2"#,
                            r#"swapcri_swap_guard_actions_total{action="restore"} 1"#,
                            r#"swapcri_swap_guard_actions_total{action="kill"} 1"#,
                            "swapcri_offload_reclaim_requested_bytes_total 4096",
                        ] {
                            assert!(text.lines().any(|l| l == line), "{line} in {text}");
                        }
                    }
                })
            })
            .collect();
        for s in scrapers {
            s.join().unwrap();
        }
    }
}
