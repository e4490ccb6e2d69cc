//! CRI metrics (`ListMetricDescriptors`, `ListPodSandboxMetrics`) under cadvisor's names and
//! meanings, which kubelet serves on `/metrics/cadvisor` when it takes stats from the CRI
//! (PodAndContainerStatsFromCRI). Values are whole numbers: times in whole seconds, a limit
//! of 0 is unlimited (cadvisor's convention). A figure the node lacks is left out.

use crate::cri;

use crate::model::cgroup_stats::DeviceIo;
use crate::service::{ContainerMetrics, PodMetrics};

/// Every metric's first labels: container name ("" for the pod's own cgroup), pod name and
/// namespace. Some metrics add their own after these.
const BASE: [&str; 3] = ["container", "pod", "namespace"];

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

struct Descriptor {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    extra: &'static [&'static str],
}

const fn d(name: &'static str, kind: Kind, extra: &'static [&'static str], help: &'static str) -> Descriptor {
    Descriptor { name, help, kind, extra }
}

use Kind::{Counter, Gauge};
const NET: &[&str] = &["interface"];
const DEV: &[&str] = &["device"];

const DESCRIPTORS: &[Descriptor] = &[
    d("container_cpu_usage_seconds_total", Counter, &[], "Cumulative CPU time consumed, in whole seconds."),
    d("container_cpu_user_seconds_total", Counter, &[], "Cumulative user CPU time, in whole seconds."),
    d("container_cpu_system_seconds_total", Counter, &[], "Cumulative system CPU time, in whole seconds."),
    d("container_cpu_cfs_periods_total", Counter, &[], "Number of elapsed CFS enforcement periods."),
    d("container_cpu_cfs_throttled_periods_total", Counter, &[], "Number of throttled CFS periods."),
    d("container_cpu_cfs_throttled_seconds_total", Counter, &[], "Total time throttled, in whole seconds."),
    d("container_spec_cpu_period", Gauge, &[], "CFS period of the container, in microseconds."),
    d("container_spec_cpu_quota", Gauge, &[], "CFS quota of the container, in microseconds."),
    d("container_spec_cpu_shares", Gauge, &[], "CPU shares of the container."),
    d(
        "container_memory_usage_bytes",
        Gauge,
        &[],
        "Current memory usage, all memory regardless of when it was accessed.",
    ),
    d("container_memory_working_set_bytes", Gauge, &[], "Current working set: usage minus inactive file cache."),
    d("container_memory_rss", Gauge, &[], "Anonymous memory and swap cache."),
    d("container_memory_cache", Gauge, &[], "Page cache."),
    d("container_memory_mapped_file", Gauge, &[], "Memory-mapped files."),
    d("container_memory_kernel_usage", Gauge, &[], "Kernel memory."),
    d("container_memory_max_usage_bytes", Gauge, &[], "Highest memory usage recorded."),
    d("container_memory_failcnt", Counter, &[], "Times memory usage hit the limit."),
    d(
        "container_memory_failures_total",
        Counter,
        &["failure_type", "scope"],
        "Page faults (pgfault) and major faults (pgmajfault).",
    ),
    d("container_memory_swap", Gauge, &[], "Swap in use."),
    d("container_spec_memory_limit_bytes", Gauge, &[], "Memory limit; 0 when unlimited."),
    d("container_spec_memory_swap_limit_bytes", Gauge, &[], "Swap limit; 0 when unlimited."),
    d("container_oom_events_total", Counter, &[], "Processes killed by the OOM killer in the cgroup."),
    d("container_processes", Gauge, &[], "Processes in the container."),
    d("container_threads", Gauge, &[], "Threads in the container."),
    d("container_threads_max", Gauge, &[], "Maximum threads (pids.max); 0 when unlimited."),
    d("container_file_descriptors", Gauge, &[], "Open file descriptors of the container's processes."),
    d("container_sockets", Gauge, &[], "Open sockets of the container's processes."),
    d("container_fs_usage_bytes", Gauge, &[], "Bytes used by the container's writable layer."),
    d("container_fs_limit_bytes", Gauge, &[], "Size of the filesystem holding the writable layer."),
    d("container_fs_inodes_free", Gauge, &[], "Free inodes of the filesystem holding the writable layer."),
    d("container_fs_inodes_total", Gauge, &[], "Inodes of the filesystem holding the writable layer."),
    d("container_fs_reads_bytes_total", Counter, DEV, "Bytes read from a block device."),
    d("container_fs_writes_bytes_total", Counter, DEV, "Bytes written to a block device."),
    d("container_fs_reads_total", Counter, DEV, "Reads completed on a block device."),
    d("container_fs_writes_total", Counter, DEV, "Writes completed on a block device."),
    d(
        "container_blkio_device_usage_total",
        Counter,
        &["device", "major", "minor", "operation"],
        "Bytes moved per device and operation.",
    ),
    d("container_last_seen", Gauge, &[], "When the figures were read, in seconds since the epoch."),
    d("container_start_time_seconds", Gauge, &[], "When the container started, in seconds since the epoch."),
    d("container_network_receive_bytes_total", Counter, NET, "Bytes received."),
    d("container_network_receive_packets_total", Counter, NET, "Packets received."),
    d("container_network_receive_errors_total", Counter, NET, "Receive errors."),
    d("container_network_receive_packets_dropped_total", Counter, NET, "Received packets dropped."),
    d("container_network_transmit_bytes_total", Counter, NET, "Bytes transmitted."),
    d("container_network_transmit_packets_total", Counter, NET, "Packets transmitted."),
    d("container_network_transmit_errors_total", Counter, NET, "Transmit errors."),
    d("container_network_transmit_packets_dropped_total", Counter, NET, "Transmitted packets dropped."),
    d(
        "container_pressure_cpu_waiting_seconds_total",
        Counter,
        &[],
        "Time some tasks waited for CPU (PSI some), whole seconds.",
    ),
    d(
        "container_pressure_cpu_stalled_seconds_total",
        Counter,
        &[],
        "Time all tasks stalled on CPU (PSI full), whole seconds.",
    ),
    d(
        "container_pressure_memory_waiting_seconds_total",
        Counter,
        &[],
        "Time some tasks waited for memory (PSI some), whole seconds.",
    ),
    d(
        "container_pressure_memory_stalled_seconds_total",
        Counter,
        &[],
        "Time all tasks stalled on memory (PSI full), whole seconds.",
    ),
    d(
        "container_pressure_io_waiting_seconds_total",
        Counter,
        &[],
        "Time some tasks waited for I/O (PSI some), whole seconds.",
    ),
    d(
        "container_pressure_io_stalled_seconds_total",
        Counter,
        &[],
        "Time all tasks stalled on I/O (PSI full), whole seconds.",
    ),
];

pub fn descriptors() -> Vec<cri::MetricDescriptor> {
    DESCRIPTORS
        .iter()
        .map(|d| cri::MetricDescriptor {
            name: d.name.into(),
            help: d.help.into(),
            label_keys: BASE.iter().chain(d.extra).map(|l| l.to_string()).collect(),
        })
        .collect()
}

/// Collects metrics for one set of base labels.
struct Out<'a> {
    base: [&'a str; 3],
    metrics: Vec<cri::Metric>,
}

impl Out<'_> {
    fn put(&mut self, name: &str, value: Option<u64>, extra: &[&str]) {
        let Some(value) = value else { return };
        let Some(d) = DESCRIPTORS.iter().find(|d| d.name == name) else { return };
        debug_assert_eq!(d.extra.len(), extra.len(), "{name}");
        self.metrics.push(cri::Metric {
            name: name.into(),
            timestamp: 0,
            metric_type: match d.kind {
                Counter => cri::MetricType::Counter,
                Gauge => cri::MetricType::Gauge,
            } as i32,
            label_values: self.base.iter().chain(extra).map(|l| l.to_string()).collect(),
            value: Some(cri::UInt64Value { value }),
        });
    }
}

const fn secs(ns: u64) -> u64 {
    ns / 1_000_000_000
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The figures of one cgroup (a container's or the pod's).
fn cgroup_metrics(
    out: &mut Out,
    stats: &crate::model::cgroup_stats::CgroupStats,
    detail: &crate::model::cgroup_stats::Detail,
) {
    let mem = stats.memory.as_ref();
    out.put("container_cpu_usage_seconds_total", stats.cpu_usage_ns.map(secs), &[]);
    out.put("container_cpu_user_seconds_total", detail.cpu_user_ns.map(secs), &[]);
    out.put("container_cpu_system_seconds_total", detail.cpu_system_ns.map(secs), &[]);
    out.put("container_cpu_cfs_periods_total", detail.cfs_periods, &[]);
    out.put("container_cpu_cfs_throttled_periods_total", detail.cfs_throttled_periods, &[]);
    out.put("container_cpu_cfs_throttled_seconds_total", detail.cfs_throttled_ns.map(secs), &[]);
    out.put("container_spec_cpu_period", detail.cpu_period_us, &[]);
    out.put("container_spec_cpu_quota", detail.cpu_quota_us, &[]);
    out.put("container_spec_cpu_shares", detail.cpu_shares, &[]);
    out.put("container_memory_usage_bytes", mem.map(|m| m.usage_bytes), &[]);
    out.put("container_memory_working_set_bytes", mem.map(|m| m.working_set_bytes), &[]);
    out.put("container_memory_rss", mem.map(|m| m.rss_bytes), &[]);
    out.put("container_memory_cache", detail.memory_cache, &[]);
    out.put("container_memory_mapped_file", detail.memory_mapped_file, &[]);
    out.put("container_memory_kernel_usage", detail.memory_kernel, &[]);
    out.put("container_memory_max_usage_bytes", detail.memory_max_usage, &[]);
    out.put("container_memory_failcnt", detail.memory_failcnt, &[]);
    for (kind, faults) in [("pgfault", detail.pgfault), ("pgmajfault", detail.pgmajfault)] {
        if let Some((own, tree)) = faults {
            out.put("container_memory_failures_total", Some(own), &[kind, "container"]);
            out.put("container_memory_failures_total", Some(tree), &[kind, "hierarchy"]);
        }
    }
    let swap = stats.swap.as_ref().map(|s| (s.usage_bytes, s.limit_bytes)).or(detail.v1_swap);
    out.put("container_memory_swap", swap.map(|s| s.0), &[]);
    out.put("container_spec_memory_limit_bytes", mem.map(|m| m.limit_bytes.unwrap_or(0)), &[]);
    out.put("container_spec_memory_swap_limit_bytes", swap.map(|s| s.1.unwrap_or(0)), &[]);
    out.put("container_oom_events_total", detail.oom_kills, &[]);
    out.put("container_processes", detail.processes, &[]);
    out.put("container_threads", detail.threads, &[]);
    out.put("container_threads_max", detail.threads_max, &[]);
    out.put("container_file_descriptors", detail.file_descriptors, &[]);
    out.put("container_sockets", detail.sockets, &[]);
    for io in &detail.io {
        device_metrics(out, io);
    }
    let p = &stats.pressure;
    for (resource, pressure) in [("cpu", p.cpu), ("memory", p.memory), ("io", p.io)] {
        if let Some(pressure) = pressure {
            out.put(
                &format!("container_pressure_{resource}_waiting_seconds_total"),
                Some(secs(pressure.some.total_ns)),
                &[],
            );
            out.put(
                &format!("container_pressure_{resource}_stalled_seconds_total"),
                Some(secs(pressure.full.total_ns)),
                &[],
            );
        }
    }
    out.put("container_last_seen", Some(now_secs()), &[]);
}

fn device_metrics(out: &mut Out, io: &DeviceIo) {
    let (major, minor) = (io.major.to_string(), io.minor.to_string());
    let device = format!("{major}:{minor}");
    out.put("container_fs_reads_bytes_total", Some(io.read_bytes), &[&device]);
    out.put("container_fs_writes_bytes_total", Some(io.write_bytes), &[&device]);
    out.put("container_fs_reads_total", Some(io.reads), &[&device]);
    out.put("container_fs_writes_total", Some(io.writes), &[&device]);
    for (op, bytes) in [("Read", io.read_bytes), ("Write", io.write_bytes)] {
        out.put("container_blkio_device_usage_total", Some(bytes), &[&device, &major, &minor, op]);
    }
}

fn container_metrics(c: &ContainerMetrics, pod: &PodMetrics, names: (&str, &str)) -> cri::ContainerMetrics {
    let name = c.container.meta.config.metadata.as_ref().map(|m| m.name.as_str()).unwrap_or("");
    let mut out = Out { base: [name, names.0, names.1], metrics: Vec::new() };
    cgroup_metrics(&mut out, &c.stats, &c.detail);
    out.put("container_fs_usage_bytes", c.writable.map(|w| w.0), &[]);
    if let Some(fs) = pod.fs {
        out.put("container_fs_limit_bytes", Some(fs.limit_bytes), &[]);
        out.put("container_fs_inodes_free", Some(fs.inodes_free), &[]);
        out.put("container_fs_inodes_total", Some(fs.inodes_total), &[]);
    }
    let started = c.container.status.started_at;
    out.put("container_start_time_seconds", (started > 0).then(|| secs(started as u64)), &[]);
    cri::ContainerMetrics { container_id: c.container.meta.id.to_string(), metrics: out.metrics }
}

pub fn pod_metrics(p: &PodMetrics) -> cri::PodSandboxMetrics {
    let meta = p.sandbox.meta.config.metadata.clone().unwrap_or_default();
    let names = (meta.name.as_str(), meta.namespace.as_str());
    let mut out = Out { base: ["", names.0, names.1], metrics: Vec::new() };
    cgroup_metrics(&mut out, &p.stats, &p.detail);
    for i in p.interfaces.iter().flatten() {
        let iface = [i.name.as_str()];
        out.put("container_network_receive_bytes_total", Some(i.rx_bytes), &iface);
        out.put("container_network_receive_packets_total", Some(i.rx_packets), &iface);
        out.put("container_network_receive_errors_total", Some(i.rx_errors), &iface);
        out.put("container_network_receive_packets_dropped_total", Some(i.rx_dropped), &iface);
        out.put("container_network_transmit_bytes_total", Some(i.tx_bytes), &iface);
        out.put("container_network_transmit_packets_total", Some(i.tx_packets), &iface);
        out.put("container_network_transmit_errors_total", Some(i.tx_errors), &iface);
        out.put("container_network_transmit_packets_dropped_total", Some(i.tx_dropped), &iface);
    }
    out.put("container_start_time_seconds", Some(secs(p.sandbox.meta.created_at.max(0) as u64)), &[]);
    cri::PodSandboxMetrics {
        pod_sandbox_id: p.sandbox.meta.id.to_string(),
        metrics: out.metrics,
        container_metrics: p.containers.iter().map(|c| container_metrics(c, p, names)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cgroup_stats::Detail;
    use crate::model::cgroup_stats::{CgroupStats, MemoryStats, SwapStats};

    #[test]
    fn descriptors_are_unique_and_labelled() {
        let d = descriptors();
        let mut names: Vec<&str> = d.iter().map(|d| d.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), d.len(), "one descriptor per name");
        assert!(d
            .iter()
            .all(|d| !d.help.is_empty()
                && d.label_keys.starts_with(&["container".into(), "pod".into(), "namespace".into()])));
    }

    #[test]
    fn values_labels_and_omissions() {
        let stats = CgroupStats {
            cpu_usage_ns: Some(2_900_000_000),
            memory: Some(MemoryStats {
                usage_bytes: 10,
                working_set_bytes: 8,
                limit_bytes: None,
                ..Default::default()
            }),
            swap: Some(SwapStats { usage_bytes: 4096, limit_bytes: Some(1 << 20), ..Default::default() }),
            ..Default::default()
        };
        let detail = Detail {
            pgfault: Some((3, 5)),
            io: vec![DeviceIo { major: 8, minor: 0, read_bytes: 1, write_bytes: 2, reads: 3, writes: 4 }],
            ..Default::default()
        };
        let mut out = Out { base: ["c", "p", "ns"], metrics: Vec::new() };
        cgroup_metrics(&mut out, &stats, &detail);
        let value = |name: &str, extra: &[&str]| {
            out.metrics
                .iter()
                .find(|m| {
                    m.name == name && m.label_values[3..] == extra.iter().map(|s| s.to_string()).collect::<Vec<_>>()[..]
                })
                .map(|m| m.value.unwrap().value)
        };
        assert_eq!(value("container_cpu_usage_seconds_total", &[]), Some(2));
        assert_eq!(value("container_memory_swap", &[]), Some(4096));
        assert_eq!(value("container_spec_memory_limit_bytes", &[]), Some(0), "unlimited is 0");
        assert_eq!(value("container_spec_memory_swap_limit_bytes", &[]), Some(1 << 20));
        assert_eq!(value("container_memory_failures_total", &["pgfault", "hierarchy"]), Some(5));
        assert_eq!(value("container_blkio_device_usage_total", &["8:0", "8", "0", "Write"]), Some(2));
        assert_eq!(value("container_oom_events_total", &[]), None, "unknown figures are left out");
        for m in &out.metrics {
            let d = DESCRIPTORS.iter().find(|d| d.name == m.name).unwrap();
            assert_eq!(m.label_values.len(), 3 + d.extra.len(), "{}", m.name);
        }
        // cgroup v1 swap accounting stands in for memory.swap.*.
        let v1 = CgroupStats { memory: Some(MemoryStats::default()), ..Default::default() };
        let detail = Detail { v1_swap: Some((7, None)), ..Default::default() };
        let mut out = Out { base: ["c", "p", "ns"], metrics: Vec::new() };
        cgroup_metrics(&mut out, &v1, &detail);
        let swap: Vec<u64> =
            out.metrics.iter().filter(|m| m.name.contains("swap")).map(|m| m.value.unwrap().value).collect();
        assert_eq!(swap, vec![7, 0]);
    }
}
