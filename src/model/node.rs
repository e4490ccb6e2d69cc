//! Facts about the node, probed once at start-up (by `node/` and `cgroup/`) and passed as
//! plain values to the policy, the services and the reports.

use serde::Serialize;

/// How the host mounts cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupMode {
    /// cgroup v2 only.
    Unified,
    /// v1 controllers with a v2 hierarchy beside them (no v2 memory files).
    Hybrid,
    /// v1 only.
    Legacy,
}

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoswapState {
    Supported,
    Unsupported,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidedBy {
    KernelVersion,
    MountProbe,
    Config,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoswapSupport {
    pub state: NoswapState,
    pub decided_by: DecidedBy,
    /// What was seen: the kernel release, or the probe mount's error.
    pub detail: String,
}

impl NoswapSupport {
    pub fn supported(&self) -> bool {
        self.state == NoswapState::Supported
    }

    /// For tests and callers without a probe.
    pub fn unsupported() -> Self {
        NoswapSupport { state: NoswapState::Unsupported, decided_by: DecidedBy::Config, detail: String::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum Outcome {
    NotConfigured,
    Applied { file: String, written: Vec<String>, read_back: String },
    Unsupported { reason: String },
    Failed { error: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtectionReport {
    pub cgroup: String,
    /// "cgroupfs" (files written), "systemd" (unit properties) or "none".
    pub via: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub swap_max: Outcome,
    pub io: Outcome,
    /// The devices the io protection covers, and what could not be covered.
    pub io_devices: Vec<String>,
    pub notes: Vec<String>,
}

/// Whether pods may have their own user namespace (with id-mapped image layers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsernsSupport {
    pub supported: bool,
    /// What decided it.
    pub detail: String,
}

impl UsernsSupport {
    pub fn unsupported() -> Self {
        UsernsSupport { supported: false, detail: "not probed".into() }
    }
}

/// Facts about the node, probed once at start-up and passed to the policy.
#[derive(Debug, Clone, Serialize)]
pub struct NodeFacts {
    pub cgroup_mode: CgroupMode,
    pub memory: MemoryFacts,
    /// Whether tmpfs mounts get `noswap`.
    pub noswap: NoswapSupport,
    /// What start-up applied to the system daemons' cgroup.
    pub system_protection: Option<ProtectionReport>,
    /// Capabilities the daemon holds (its bounding set): the most any container gets.
    pub held_capabilities: Vec<String>,
    /// Lowest oom_score_adj the daemon may give (its own when it lacks CAP_SYS_RESOURCE).
    pub min_oom_score_adj: i32,
    pub apparmor_enabled: bool,
    /// The AppArmor profile `RuntimeDefault` means, once loaded at start.
    pub apparmor_default: Option<String>,
    /// Huge page sizes the kernel offers (`2MB`, `1GB`), smallest first.
    pub hugepage_sizes: Vec<String>,
    /// Whether hugepage limits can be set (the hugetlb controller is where runc looks); when
    /// not, containers get none, as containerd does by default.
    pub hugetlb_limits: bool,
    /// User namespaces for pods (with the kernel's id-mapped mounts).
    pub userns: UsernsSupport,
}

impl NodeFacts {
    /// Tests: a node of that cgroup mode with 16 GiB and no swap, both huge page sizes, no
    /// tmpfs noswap, no user namespaces, no AppArmor, no capabilities held, and the full
    /// oom_score_adj range; a test changes what it is about.
    #[cfg(test)]
    pub fn fixture(cgroup_mode: CgroupMode) -> NodeFacts {
        NodeFacts {
            cgroup_mode,
            memory: MemoryFacts::without_swap(16 << 30),
            noswap: NoswapSupport::unsupported(),
            system_protection: None,
            held_capabilities: vec![],
            min_oom_score_adj: -1000,
            apparmor_enabled: false,
            apparmor_default: None,
            hugepage_sizes: vec!["2MB".into(), "1GB".into()],
            hugetlb_limits: true,
            userns: UsernsSupport::unsupported(),
        }
    }

    /// cgroup v2 only: the memory and io files swapcri writes exist.
    pub fn cgroup_v2(&self) -> bool {
        self.cgroup_mode == CgroupMode::Unified
    }

    /// Swap limits can be applied and mean something: cgroup v2 with swap accounting, and swap.
    pub fn swap_limits_apply(&self) -> bool {
        self.cgroup_v2() && self.memory.swap_accounting && self.memory.swap_total > 0
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
