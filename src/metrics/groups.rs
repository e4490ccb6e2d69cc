//! The series of one kind of cgroup group (containers, pods): memory working set, swap
//! usage, limit and peak, swap limit events, swap traffic and refaults, zswap, and memory
//! pressure. Registered once per kind under its own prefix (`swapcri_container_…`,
//! `swapcri_pod_…`); refreshed from the kernel's figures at each scrape.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::model::cgroup_stats::CgroupStats;

/// Label pairs naming one group, in the order they are shown.
pub type Labels = Vec<(String, String)>;

/// One group's figures at scrape time.
#[derive(Debug, Clone)]
pub struct GroupSeries {
    pub labels: Labels,
    pub stats: CgroupStats,
    /// Whether the group thrashes, where thrash detection runs for it.
    pub thrashing: Option<bool>,
}

impl GroupSeries {
    pub fn container(container: &str, pod: &str, namespace: &str, id: &str, stats: CgroupStats) -> GroupSeries {
        Self::new(&[("container", container), ("pod", pod), ("namespace", namespace), ("id", id)], stats)
    }

    pub fn pod(pod: &str, namespace: &str, id: &str, stats: CgroupStats) -> GroupSeries {
        Self::new(&[("pod", pod), ("namespace", namespace), ("id", id)], stats)
    }

    fn new(labels: &[(&str, &str)], stats: CgroupStats) -> GroupSeries {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        GroupSeries { labels, stats, thrashing: None }
    }
}

fn with(labels: &Labels, key: &str, value: &str) -> Labels {
    let mut out = labels.clone();
    out.push((key.to_string(), value.to_string()));
    out
}

/// A kernel byte figure as a gauge value.
fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[derive(Default)]
pub struct GroupFamilies {
    working_set: Family<Labels, Gauge>,
    swap_usage: Family<Labels, Gauge>,
    swap_limit: Family<Labels, Gauge>,
    swap_peak: Family<Labels, Gauge>,
    swap_events: Family<Labels, Counter>,
    anon_refaults: Family<Labels, Counter>,
    swap_pages: Family<Labels, Counter>,
    zswap_compressed: Family<Labels, Gauge>,
    zswap_original: Family<Labels, Gauge>,
    zswap_pages: Family<Labels, Counter>,
    memory_pressure: Family<Labels, Counter<f64, AtomicU64>>,
    thrashing: Family<Labels, Gauge>,
}

impl GroupFamilies {
    /// Registers the families in `r` (a registry with the kind's prefix); `what` names the
    /// kind in the help texts, `kubelet` says which of kubelet's series match.
    pub fn register(&self, r: &mut Registry, what: &str, kubelet: bool) {
        let same = |name: &str| if kubelet { format!("; kubelet: container_{name}") } else { String::new() };
        r.register(
            "memory_working_set_bytes",
            format!("Memory usage of the {what} minus inactive file cache{}", same("memory_working_set_bytes")),
            self.working_set.clone(),
        );
        r.register(
            "swap_usage_bytes",
            format!("Swap used by the {what} (memory.swap.current){}", same("swap_usage_bytes")),
            self.swap_usage.clone(),
        );
        r.register(
            "swap_limit_bytes",
            format!("The {what}'s memory.swap.max (absent when unlimited){}", same("swap_limit_bytes")),
            self.swap_limit.clone(),
        );
        r.register(
            "swap_peak_bytes",
            format!("The most swap the {what} has used (memory.swap.peak; absent before Linux 6.5)"),
            self.swap_peak.clone(),
        );
        r.register(
            "swap_events",
            format!("memory.swap.events of the {what}: high (past memory.swap.high), max (at memory.swap.max), fail (swap-outs refused)"),
            self.swap_events.clone(),
        );
        r.register(
            "swap_anon_refaults",
            format!("Anonymous pages of the {what} faulted back in after being swapped out (memory.stat workingset_refault_anon)"),
            self.anon_refaults.clone(),
        );
        r.register(
            "swap_pages",
            format!("Pages of the {what} read from (in) and written to (out) swap (memory.stat pswpin, pswpout; where the kernel counts them)"),
            self.swap_pages.clone(),
        );
        r.register(
            "zswap_compressed_bytes",
            format!("Compressed size of the {what}'s pages in zswap (memory.zswap.current)"),
            self.zswap_compressed.clone(),
        );
        r.register(
            "zswap_original_bytes",
            format!("Size of the {what}'s pages in zswap before compression (memory.stat zswapped)"),
            self.zswap_original.clone(),
        );
        r.register(
            "zswap_pages",
            format!(
                "Pages of the {what} brought back from (in) and moved into (out) zswap (memory.stat zswpin, zswpout)"
            ),
            self.zswap_pages.clone(),
        );
        r.register(
            "swap_thrashing",
            format!("1 while the {what} thrashes (stalls on memory while faulting swapped-out pages back in), else 0; absent where thrash detection is off"),
            self.thrashing.clone(),
        );
        r.register(
            "memory_pressure_seconds",
            format!("Time some or all of the {what}'s tasks stalled on memory (memory.pressure total)"),
            self.memory_pressure.clone(),
        );
    }

    fn clear(&self) {
        for f in [&self.working_set, &self.swap_usage, &self.swap_limit, &self.swap_peak] {
            f.clear();
        }
        for f in [&self.zswap_compressed, &self.zswap_original, &self.thrashing] {
            f.clear();
        }
        for f in [&self.swap_events, &self.anon_refaults, &self.swap_pages, &self.zswap_pages] {
            f.clear();
        }
        self.memory_pressure.clear();
    }

    /// Replaces every series with `groups`' (groups that are gone disappear).
    pub fn refresh(&self, groups: &[GroupSeries]) {
        self.clear();
        for g in groups {
            self.set(g);
        }
    }

    fn set(&self, g: &GroupSeries) {
        let (labels, stats) = (&g.labels, &g.stats);
        let gauge = |f: &Family<Labels, Gauge>, l: &Labels, v: u64| {
            f.get_or_create(l).set(gauge_value(v));
        };
        // Families are cleared before each refresh, so a counter starts at 0 here and takes
        // the kernel's running total.
        let counter = |f: &Family<Labels, Counter>, l: &Labels, v: u64| {
            f.get_or_create(l).inc_by(v);
        };
        if let Some(thrashing) = g.thrashing {
            gauge(&self.thrashing, labels, thrashing as u64);
        }
        if let Some(m) = &stats.memory {
            gauge(&self.working_set, labels, m.working_set_bytes);
        }
        if let Some(p) = stats.pressure.memory {
            for (kind, line) in [("some", p.some), ("full", p.full)] {
                self.memory_pressure.get_or_create(&with(labels, "kind", kind)).inc_by(line.total_ns as f64 / 1e9);
            }
        }
        let Some(swap) = &stats.swap else { return };
        gauge(&self.swap_usage, labels, swap.usage_bytes);
        if let Some(limit) = swap.limit_bytes {
            gauge(&self.swap_limit, labels, limit);
        }
        if let Some(peak) = swap.peak_bytes {
            gauge(&self.swap_peak, labels, peak);
        }
        if let Some(e) = swap.events {
            for (event, n) in [("high", e.high), ("max", e.max), ("fail", e.fail)] {
                counter(&self.swap_events, &with(labels, "event", event), n);
            }
        }
        if let Some(n) = swap.anon_refaults {
            counter(&self.anon_refaults, labels, n);
        }
        for (direction, n) in [("in", swap.pages_in), ("out", swap.pages_out)] {
            if let Some(n) = n {
                counter(&self.swap_pages, &with(labels, "direction", direction), n);
            }
        }
        if let Some(z) = &swap.zswap {
            if let Some(c) = z.compressed_bytes {
                gauge(&self.zswap_compressed, labels, c);
            }
            gauge(&self.zswap_original, labels, z.original_bytes);
            for (direction, n) in [("in", z.pages_in), ("out", z.pages_out)] {
                counter(&self.zswap_pages, &with(labels, "direction", direction), n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cgroup_stats::MemoryStats;
    use crate::model::cgroup_stats::{Pressure, PsiLine};
    use crate::model::cgroup_stats::{SwapEvents, SwapStats, ZswapStats};

    fn encode(r: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, r).unwrap();
        out
    }

    fn stats() -> CgroupStats {
        let mut stats = CgroupStats {
            memory: Some(MemoryStats { working_set_bytes: 100, ..Default::default() }),
            swap: Some(SwapStats {
                usage_bytes: 4096,
                limit_bytes: Some(8192),
                peak_bytes: Some(6000),
                events: Some(SwapEvents { high: 1, max: 2, fail: 3 }),
                anon_refaults: Some(77),
                pages_in: Some(5),
                pages_out: None,
                zswap: Some(ZswapStats { compressed_bytes: Some(10), original_bytes: 40, pages_in: 4, pages_out: 9 }),
            }),
            ..Default::default()
        };
        let line = |total_ns| PsiLine { total_ns, ..Default::default() };
        stats.pressure.memory = Some(Pressure { some: line(1_500_000_000), full: line(250_000_000) });
        stats
    }

    #[test]
    fn every_figure_becomes_a_series_and_gone_groups_disappear() {
        let mut r = Registry::with_prefix("swapcri");
        let pods = GroupFamilies::default();
        pods.register(r.sub_registry_with_prefix("pod"), "pod", false);
        pods.refresh(&[GroupSeries::pod("web", "default", "p1", stats())]);
        let text = encode(&r);
        let l = r#"pod="web",namespace="default",id="p1""#;
        for want in [
            format!("swapcri_pod_memory_working_set_bytes{{{l}}} 100"),
            format!("swapcri_pod_swap_usage_bytes{{{l}}} 4096"),
            format!("swapcri_pod_swap_limit_bytes{{{l}}} 8192"),
            format!("swapcri_pod_swap_peak_bytes{{{l}}} 6000"),
            format!("swapcri_pod_swap_events_total{{{l},event=\"high\"}} 1"),
            format!("swapcri_pod_swap_events_total{{{l},event=\"max\"}} 2"),
            format!("swapcri_pod_swap_events_total{{{l},event=\"fail\"}} 3"),
            format!("swapcri_pod_swap_anon_refaults_total{{{l}}} 77"),
            format!("swapcri_pod_swap_pages_total{{{l},direction=\"in\"}} 5"),
            format!("swapcri_pod_zswap_compressed_bytes{{{l}}} 10"),
            format!("swapcri_pod_zswap_original_bytes{{{l}}} 40"),
            format!("swapcri_pod_zswap_pages_total{{{l},direction=\"out\"}} 9"),
            format!("swapcri_pod_memory_pressure_seconds_total{{{l},kind=\"some\"}} 1.5"),
            format!("swapcri_pod_memory_pressure_seconds_total{{{l},kind=\"full\"}} 0.25"),
        ] {
            assert!(text.lines().any(|line| line == want), "{want} in:\n{text}");
        }
        let swap_out = text.lines().filter(|l| l.starts_with("swapcri_pod_swap_pages_total") && l.contains("\"out\""));
        assert_eq!(swap_out.count(), 0, "a figure the kernel lacks has no series:\n{text}");

        // A second scrape takes the kernel's totals again rather than adding to them.
        pods.refresh(&[GroupSeries::pod("web", "default", "p1", stats())]);
        assert!(encode(&r).lines().any(|line| line == format!("swapcri_pod_swap_anon_refaults_total{{{l}}} 77")));

        let containers = GroupFamilies::default();
        containers.register(r.sub_registry_with_prefix("container"), "container", true);
        let mut hot = GroupSeries::container("app", "web", "default", "c1", CgroupStats::default());
        hot.thrashing = Some(true);
        let off = GroupSeries::container("app", "web", "default", "c2", CgroupStats::default());
        containers.refresh(&[hot, off]);
        let text = encode(&r);
        assert!(
            text.contains(
                r#"swapcri_container_swap_thrashing{container="app",pod="web",namespace="default",id="c1"} 1"#
            ),
            "{text}"
        );
        assert!(!text.contains(r#"id="c2""#), "no thrash series where detection is off:\n{text}");

        pods.refresh(&[GroupSeries::pod("other", "default", "p2", CgroupStats::default())]);
        let text = encode(&r);
        assert!(!text.contains("p1"), "a removed pod's series are gone:\n{text}");
        assert!(!text.contains("p2"), "a group without figures has no series:\n{text}");
    }
}
