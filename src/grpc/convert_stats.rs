//! Statistics samples to CRI messages. Values the node cannot provide stay unset.

use crate::cri;

use crate::model::cgroup_stats::{Pressure, PsiLine};
use crate::network::interfaces::InterfaceCounters;
use crate::service::{ContainerSample, PodSample, Sample};

fn v(value: u64) -> Option<cri::UInt64Value> {
    Some(cri::UInt64Value { value })
}

fn psi_data(l: &PsiLine) -> cri::PsiData {
    cri::PsiData { total: l.total_ns, avg10: l.avg10, avg60: l.avg60, avg300: l.avg300 }
}

fn psi(p: Option<Pressure>) -> Option<cri::PsiStats> {
    p.map(|p| cri::PsiStats { full: Some(psi_data(&p.full)), some: Some(psi_data(&p.some)) })
}

/// The CRI's IoUsage carries only PSI: absent when the node has none.
fn io(s: &Sample) -> Option<cri::IoUsage> {
    s.stats.pressure.io.map(|p| cri::IoUsage { timestamp: s.timestamp, psi: psi(Some(p)) })
}

fn cpu(s: &Sample) -> Option<cri::CpuUsage> {
    let usage = s.stats.cpu_usage_ns?;
    Some(cri::CpuUsage {
        timestamp: s.timestamp,
        usage_core_nano_seconds: v(usage),
        usage_nano_cores: s.nano_cores.and_then(v),
        psi: psi(s.stats.pressure.cpu),
    })
}

fn memory(s: &Sample) -> Option<cri::MemoryUsage> {
    let m = s.stats.memory.as_ref()?;
    Some(cri::MemoryUsage {
        timestamp: s.timestamp,
        working_set_bytes: v(m.working_set_bytes),
        available_bytes: m.available_bytes().and_then(v),
        usage_bytes: v(m.usage_bytes),
        rss_bytes: v(m.rss_bytes),
        page_faults: v(m.page_faults),
        major_page_faults: v(m.major_page_faults),
        psi: psi(s.stats.pressure.memory),
    })
}

/// `swap_available_bytes` only when the swap limit is a number (never "max" as 2^64).
fn swap(s: &Sample) -> Option<cri::SwapUsage> {
    let w = s.stats.swap.as_ref()?;
    Some(cri::SwapUsage {
        timestamp: s.timestamp,
        swap_usage_bytes: v(w.usage_bytes),
        swap_available_bytes: w.available_bytes().and_then(v),
    })
}

pub fn container_stats(c: &ContainerSample) -> cri::ContainerStats {
    let meta = &c.container.meta;
    cri::ContainerStats {
        attributes: Some(cri::ContainerAttributes {
            id: meta.id.to_string(),
            metadata: meta.config.metadata.clone(),
            labels: meta.config.labels.clone(),
            annotations: meta.config.annotations.clone(),
        }),
        cpu: cpu(&c.sample),
        memory: memory(&c.sample),
        writable_layer: c.writable.map(|(bytes, inodes)| cri::FilesystemUsage {
            timestamp: c.sample.timestamp,
            fs_id: Some(cri::FilesystemIdentifier { mountpoint: c.writable_mountpoint.clone() }),
            used_bytes: v(bytes),
            inodes_used: v(inodes),
        }),
        swap: swap(&c.sample),
        io: io(&c.sample),
    }
}

/// A pod network's interfaces; the default one is `eth0`, where CNI plugins put the pod's
/// address, else the first.
fn network(timestamp: i64, interfaces: &[InterfaceCounters]) -> cri::NetworkUsage {
    let usage = |i: &InterfaceCounters| cri::NetworkInterfaceUsage {
        name: i.name.clone(),
        rx_bytes: v(i.rx_bytes),
        rx_errors: v(i.rx_errors),
        tx_bytes: v(i.tx_bytes),
        tx_errors: v(i.tx_errors),
    };
    let default = interfaces.iter().find(|i| i.name == "eth0").or(interfaces.first());
    cri::NetworkUsage {
        timestamp,
        default_interface: default.map(usage),
        interfaces: interfaces.iter().map(usage).collect(),
    }
}

pub fn pod_stats(p: &PodSample) -> cri::PodSandboxStats {
    let meta = &p.sandbox.meta;
    cri::PodSandboxStats {
        attributes: Some(cri::PodSandboxAttributes {
            id: meta.id.to_string(),
            metadata: meta.config.metadata.clone(),
            labels: meta.config.labels.clone(),
            annotations: meta.config.annotations.clone(),
        }),
        linux: Some(cri::LinuxPodSandboxStats {
            cpu: cpu(&p.sample),
            memory: memory(&p.sample),
            network: p.interfaces.as_deref().map(|i| network(p.sample.timestamp, i)),
            process: p.processes.map(|n| cri::ProcessUsage { timestamp: p.sample.timestamp, process_count: v(n) }),
            containers: p.containers.iter().map(container_stats).collect(),
            io: io(&p.sample),
        }),
        windows: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(name: &str, rx: u64, tx: u64) -> InterfaceCounters {
        InterfaceCounters {
            name: name.into(),
            rx_bytes: rx,
            rx_errors: 1,
            tx_bytes: tx,
            tx_errors: 2,
            ..Default::default()
        }
    }

    #[test]
    fn pod_network_names_eth0_the_default() {
        let table: &[(&[InterfaceCounters], Option<&str>)] = &[
            (&[counters("net1", 5, 6), counters("eth0", 10, 20)], Some("eth0")),
            (&[counters("net1", 5, 6)], Some("net1")),
            (&[], None),
        ];
        for (interfaces, default) in table {
            let usage = network(7, interfaces);
            assert_eq!(usage.timestamp, 7);
            assert_eq!(usage.default_interface.as_ref().map(|i| i.name.as_str()), *default);
            assert_eq!(usage.interfaces.len(), interfaces.len());
        }
        let usage = network(7, &[counters("eth0", 10, 20)]);
        let eth0 = usage.default_interface.unwrap();
        assert_eq!(
            (
                eth0.rx_bytes.unwrap().value,
                eth0.rx_errors.unwrap().value,
                eth0.tx_bytes.unwrap().value,
                eth0.tx_errors.unwrap().value
            ),
            (10, 1, 20, 2)
        );
    }
}
