//! What the memory policy needs to know about the node.

use serde::Serialize;

/// Where the node's allocatable memory came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllocatableSource {
    Config,
    KubepodsMemoryMax,
    MemTotal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct KernelVersion {
    pub major: u32,
    pub minor: u32,
}

impl KernelVersion {
    /// `6.1.0-28-amd64` → 6.1.
    pub fn parse(release: &str) -> Option<Self> {
        let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(KernelVersion { major, minor })
    }

    pub fn at_least(self, major: u32, minor: u32) -> bool {
        self >= KernelVersion { major, minor }
    }
}

/// Memory facts probed once at start-up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryFacts {
    /// MemTotal in bytes (kubelet's MemoryCapacity).
    pub mem_total: u64,
    /// SwapTotal in bytes (kubelet's SwapCapacity).
    pub swap_total: u64,
    pub page_size: u64,
    pub kernel_release: String,
    pub kernel: Option<KernelVersion>,
    /// cgroup v2 with memory.swap.max (swap accounting): swap limits can be applied.
    pub swap_accounting: bool,
    pub allocatable: u64,
    pub allocatable_source: AllocatableSource,
}

impl MemoryFacts {
    /// A node without swap: the values tests and non-Linux callers start from.
    pub fn without_swap(mem_total: u64) -> Self {
        MemoryFacts {
            mem_total,
            swap_total: 0,
            page_size: 4096,
            kernel_release: String::new(),
            kernel: None,
            swap_accounting: false,
            allocatable: mem_total,
            allocatable_source: AllocatableSource::MemTotal,
        }
    }

    /// Rounds down to whole pages, as the kernel stores memory.* values.
    pub fn page_floor(&self, bytes: u64) -> u64 {
        bytes / self.page_size * self.page_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        let v = |major, minor| Some(KernelVersion { major, minor });
        for (release, expected) in [
            ("6.1.0-28-amd64", v(6, 1)),
            ("6.12.9+bpo-amd64", v(6, 12)),
            ("5.9.0", v(5, 9)),
            ("6.18.0\n", v(6, 18)),
            ("garbage", None),
            ("", None),
        ] {
            assert_eq!(KernelVersion::parse(release), expected, "{release}");
        }
        assert!(KernelVersion { major: 6, minor: 4 }.at_least(6, 4));
        assert!(!KernelVersion { major: 5, minor: 15 }.at_least(6, 4));
        assert!(KernelVersion { major: 10, minor: 0 }.at_least(6, 4));
    }
}
