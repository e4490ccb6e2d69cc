//! Statistics samples to CRI messages. Values the node cannot provide stay unset.

use crate::cri;

use crate::cgroup::pressure::{Pressure, PsiLine};
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
            network: None,
            process: None,
            containers: p.containers.iter().map(container_stats).collect(),
            io: io(&p.sample),
        }),
        windows: None,
    }
}
