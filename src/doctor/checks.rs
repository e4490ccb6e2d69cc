//! The checks, each a function of the files under the root.

use crate::model::node::CgroupMode;
use crate::model::node::KernelVersion;
use crate::node::block::{backing_of_name, name_of, swap_devices, Backing, Roots, SwapDevice};
use crate::node::memory::meminfo_bytes;

use super::check::{Check, Inputs, Status};
use crate::model::bytes::human;

fn check(name: &'static str, status: Status, found: impl Into<String>, advice: impl Into<String>) -> Check {
    Check { name, status, found: found.into(), advice: advice.into() }
}

fn read(inputs: &Inputs, path: &str) -> Option<String> {
    std::fs::read_to_string(inputs.path(path)).ok()
}

/// The cgroup layout from the mount table: cgroup2 at /sys/fs/cgroup, or only below it.
pub fn cgroup_mode_from_mounts(mounts: &str) -> CgroupMode {
    let fstype = |target: &str| {
        mounts
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f.len() > 2 && f[1] == target).then(|| f[2].to_string())
            })
            .next_back()
    };
    match (fstype("/sys/fs/cgroup").as_deref(), fstype("/sys/fs/cgroup/unified").as_deref()) {
        (Some("cgroup2"), _) => CgroupMode::Unified,
        (_, Some("cgroup2")) => CgroupMode::Hybrid,
        _ => CgroupMode::Legacy,
    }
}

fn swap_check(swaps: &[SwapDevice], mem_total: u64) -> Check {
    if swaps.is_empty() {
        return check(
            "swap",
            Status::Warn,
            "no active swap",
            "swapcri's swap policy has nothing to manage: add swap (swapon) or run without swap deliberately",
        );
    }
    let total: u64 = swaps.iter().map(|s| s.area.size_bytes).sum();
    let names: Vec<&str> = swaps.iter().map(|s| s.area.filename.as_str()).collect();
    let found = format!(
        "{} on {} ({} of RAM {})",
        human(total),
        names.join(", "),
        format!("{:.0}%", total as f64 * 100.0 / mem_total.max(1) as f64),
        human(mem_total)
    );
    check("swap", Status::Ok, found, "")
}

fn encryption_check(swaps: &[SwapDevice]) -> Check {
    let mut plain = Vec::new();
    let mut notes = Vec::new();
    for s in swaps {
        match &s.backing {
            Backing::Disks { encrypted: true, .. } => notes.push(format!("{}: dm-crypt", s.area.filename)),
            Backing::Disks { .. } => plain.push(s.area.filename.clone()),
            Backing::Zram { .. } => notes.push(format!("{}: zram (RAM only)", s.area.filename)),
            Backing::Unresolved { reason } => plain.push(format!("{} (unresolved: {reason})", s.area.filename)),
        }
    }
    if swaps.is_empty() {
        return check("swap encryption", Status::Info, "no swap", "");
    }
    if plain.is_empty() {
        check("swap encryption", Status::Ok, notes.join("; "), "")
    } else {
        check(
            "swap encryption",
            Status::Warn,
            format!("not encrypted: {}", plain.join(", ")),
            "put swap on dm-crypt (a random key per boot is enough): swapped pages may hold secrets",
        )
    }
}

fn disks(swaps: &[SwapDevice]) -> Vec<crate::node::block::Disk> {
    swaps
        .iter()
        .flat_map(|s| match &s.backing {
            Backing::Disks { disks, .. } => disks.clone(),
            _ => Vec::new(),
        })
        .collect()
}

fn rotational_check(swaps: &[SwapDevice]) -> Check {
    let disks = disks(swaps);
    if disks.is_empty() {
        return check("swap disk type", Status::Info, "no swap on a disk", "");
    }
    let hdd: Vec<String> = disks.iter().filter(|d| d.rotational == Some(true)).map(|d| d.name.clone()).collect();
    if hdd.is_empty() {
        let names: Vec<&str> = disks.iter().map(|d| d.name.as_str()).collect();
        check("swap disk type", Status::Ok, format!("non-rotational: {}", names.join(", ")), "")
    } else {
        check(
            "swap disk type",
            Status::Warn,
            format!("rotational: {}", hdd.join(", ")),
            "move swap to an SSD/NVMe: swap on a spinning disk thrashes",
        )
    }
}

/// The whole disks under the root filesystem (from mountinfo).
fn root_disks(inputs: &Inputs) -> Option<Vec<String>> {
    let info = read(inputs, "/proc/self/mountinfo")?;
    let dev = info
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() > 4 && f[4] == "/").then(|| f[2].to_string())
        })
        .next_back()?;
    let sys = inputs.path("/sys");
    let name = name_of(&sys, &dev)?;
    match backing_of_name(&sys, &name) {
        Backing::Disks { disks, .. } => Some(disks.into_iter().map(|d| d.name).collect()),
        _ => None,
    }
}

fn dedicated_check(inputs: &Inputs, swaps: &[SwapDevice]) -> Check {
    let swap_disks = disks(swaps);
    if swap_disks.is_empty() {
        return check("swap disk dedicated", Status::Info, "no swap on a disk", "");
    }
    match root_disks(inputs) {
        None => check("swap disk dedicated", Status::Info, "root filesystem not on a block device found in sysfs", ""),
        Some(root) => {
            let shared: Vec<String> =
                swap_disks.iter().filter(|d| root.contains(&d.name)).map(|d| d.name.clone()).collect();
            if shared.is_empty() {
                check("swap disk dedicated", Status::Ok, "swap is not on the root filesystem's disk", "")
            } else {
                check(
                    "swap disk dedicated",
                    Status::Warn,
                    format!("swap shares {} with the root filesystem", shared.join(", ")),
                    "give swap a dedicated disk so swap I/O does not stall the system",
                )
            }
        }
    }
}

fn cgroup_check(inputs: &Inputs, mode: CgroupMode, swap_on: bool) -> Check {
    let root = inputs.path("/sys/fs/cgroup");
    match mode {
        CgroupMode::Unified => {
            if crate::node::memory::swap_accounting(&root, mode) {
                check("cgroup v2", Status::Ok, "unified hierarchy with memory.swap.max", "")
            } else if swap_on {
                check(
                    "cgroup v2",
                    Status::Fail,
                    "unified, but no memory.swap.max: swap is not accounted",
                    "boot with swap accounting (the memory controller's swap files) so containers' swap can be limited",
                )
            } else {
                check(
                    "cgroup v2",
                    Status::Warn,
                    "unified, no memory.swap.max found",
                    "enable the memory controller for child cgroups",
                )
            }
        }
        other => check(
            "cgroup v2",
            if swap_on { Status::Fail } else { Status::Warn },
            format!("{other:?}: the memory controller is on cgroup v1"),
            "boot with systemd.unified_cgroup_hierarchy=1 (cgroup v2 only): swap limits need it",
        ),
    }
}

fn noswap_check(inputs: &Inputs) -> Check {
    let release = read(inputs, "/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    match KernelVersion::parse(&release) {
        Some(v) if v.at_least(6, 4) => check("tmpfs noswap", Status::Ok, format!("kernel {release} (>= 6.4)"), ""),
        Some(_) => check("tmpfs noswap", Status::Warn, format!("kernel {release} (< 6.4): noswap only if backported"), "swapcri probes with a mount at start-up (see Status verbose); a 6.4+ kernel keeps memory-backed volumes in RAM"),
        None => check("tmpfs noswap", Status::Warn, format!("kernel release {release:?} not understood"), ""),
    }
}

fn kubelet_tmpfs_check(inputs: &Inputs, swap_on: bool) -> Check {
    let mounts = read(inputs, "/proc/mounts").unwrap_or_default();
    let tmpfs: Vec<(String, bool)> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() > 3 && f[2] == "tmpfs" && f[1].starts_with("/var/lib/kubelet/pods/"))
                .then(|| (f[1].to_string(), f[3].split(',').any(|o| o == "noswap")))
        })
        .collect();
    let exposed: Vec<&String> = tmpfs.iter().filter(|(_, noswap)| !noswap).map(|(p, _)| p).collect();
    if tmpfs.is_empty() {
        check("kubelet tmpfs volumes", Status::Ok, "no tmpfs volumes under /var/lib/kubelet/pods", "")
    } else if exposed.is_empty() || !swap_on {
        check(
            "kubelet tmpfs volumes",
            Status::Ok,
            format!("{} tmpfs volumes, {} without noswap (swap off: harmless)", tmpfs.len(), exposed.len()),
            "",
        )
    } else {
        check("kubelet tmpfs volumes", Status::Fail, format!("{} of {} tmpfs volumes without noswap, e.g. {}", exposed.len(), tmpfs.len(), exposed[0]), "secrets and Memory emptyDirs can reach swap: use a kernel with tmpfs noswap (6.4+) and a kubelet that sets it")
    }
}

fn system_slice_check(inputs: &Inputs, swap_on: bool) -> Vec<Check> {
    let dir = format!("/sys/fs/cgroup/{}", inputs.system_cgroup.trim_start_matches('/'));
    if !inputs.path(&dir).is_dir() {
        return vec![check(
            "system cgroup",
            Status::Warn,
            format!("{dir} not found"),
            "run system daemons in their own cgroup (system.slice) so they can be protected",
        )];
    }
    let swap_max = read(inputs, &format!("{dir}/memory.swap.max")).map(|s| s.trim().to_string());
    let swap = match swap_max.as_deref() {
        Some("0") => check("system swap", Status::Ok, format!("{dir}/memory.swap.max = 0"), ""),
        Some(v) => check(
            "system swap",
            if swap_on { Status::Warn } else { Status::Info },
            format!("{dir}/memory.swap.max = {v}"),
            "set [system] swap_max = 0 in swapcri's config: system daemons should not swap",
        ),
        None => check("system swap", Status::Info, format!("no {dir}/memory.swap.max"), ""),
    };
    let latency = read(inputs, &format!("{dir}/io.latency")).map(|s| s.trim().to_string());
    let weight = read(inputs, &format!("{dir}/io.weight")).map(|s| s.trim().to_string());
    let io = match (latency, weight) {
        (Some(l), _) if !l.is_empty() => {
            check("system io protection", Status::Ok, format!("io.latency: {}", l.replace('\n', "; ")), "")
        }
        (Some(_), _) => check(
            "system io protection",
            Status::Warn,
            "io.latency empty",
            "set [system] io_latency_target_us so system I/O keeps priority over swap I/O",
        ),
        (None, Some(w)) if w.lines().count() > 1 => weight_check(inputs, &w),
        (None, _) => check(
            "system io protection",
            if swap_on { Status::Warn } else { Status::Info },
            "no io.latency (kernel without CONFIG_BLK_CGROUP_IOLATENCY) and no per-device io.weight",
            "set [system] io_latency_target_us (swapcri falls back to io.weight)",
        ),
    };
    vec![swap, io]
}

/// A per-device io.weight only counts where io.cost is enabled for the device or BFQ
/// schedules it; otherwise it is written and does nothing.
fn weight_check(inputs: &Inputs, weights: &str) -> Check {
    let qos = read(inputs, "/sys/fs/cgroup/io.cost.qos").unwrap_or_default();
    let idle: Vec<&str> = weights
        .lines()
        .skip(1) // "default N"
        .filter_map(|l| l.split_whitespace().next())
        .filter(|dev| !qos.lines().any(|q| q.starts_with(&format!("{dev} ")) && q.contains("enable=1")))
        .filter(|dev| {
            let scheduler = read(inputs, &format!("/sys/dev/block/{dev}/queue/scheduler")).unwrap_or_default();
            !scheduler.contains("[bfq]")
        })
        .collect();
    let found = format!("no io.latency in this kernel; io.weight: {}", weights.trim().replace('\n', "; "));
    match idle.is_empty() {
        true => check("system io protection", Status::Ok, format!("{found} (io.cost or bfq in effect)"), ""),
        false => check(
            "system io protection",
            Status::Warn,
            format!("{found}; no io.cost or bfq on {}", idle.join(", ")),
            "the weight does nothing there: enable io.cost (echo 'MAJ:MIN enable=1' > /sys/fs/cgroup/io.cost.qos; swapcri does it when it applies [system]) or use the bfq scheduler",
        ),
    }
}

/// The configured driver must be the tree's manager: systemd where systemd is init.
fn cgroup_driver_check(inputs: &Inputs) -> Check {
    use crate::config::CgroupDriver;
    let systemd = crate::cgroup::systemd::booted(&inputs.root);
    match (inputs.cgroup_driver, systemd) {
        (CgroupDriver::Systemd, true) => check("cgroup driver", Status::Ok, "systemd, on a systemd node", ""),
        (CgroupDriver::Cgroupfs, false) => check("cgroup driver", Status::Ok, "cgroupfs, no systemd on this node", ""),
        (CgroupDriver::Systemd, false) => check(
            "cgroup driver",
            Status::Fail,
            "systemd configured, but systemd is not this node's init",
            "set [runtime] cgroup_driver = \"cgroupfs\"",
        ),
        (CgroupDriver::Cgroupfs, true) => check(
            "cgroup driver",
            Status::Warn,
            "cgroupfs on a node whose cgroup tree systemd manages",
            "set [runtime] cgroup_driver = \"systemd\" (kubelet follows the runtime's driver): two managers of one tree fight",
        ),
    }
}

fn eviction_check(inputs: &Inputs) -> Check {
    let min_free =
        read(inputs, "/proc/sys/vm/min_free_kbytes").and_then(|s| s.trim().parse::<u64>().ok()).map(|k| k * 1024);
    match (inputs.eviction_threshold, min_free) {
        (_, None) => check("eviction threshold", Status::Info, "vm.min_free_kbytes unreadable", ""),
        (None, Some(m)) => check("eviction threshold", Status::Info, format!("vm.min_free_kbytes = {}", human(m)), "pass --eviction-threshold or --kubelet-config to compare kubelet's memory.available threshold"),
        (Some(t), Some(m)) if t <= m && t * 10 >= m * 8 => check("eviction threshold", Status::Ok, format!("kubelet {} slightly below vm.min_free_kbytes {}", human(t), human(m)), ""),
        (Some(t), Some(m)) => check("eviction threshold", Status::Warn, format!("kubelet {} vs vm.min_free_kbytes {}", human(t), human(m)), format!("set kubelet's evictionHard memory.available slightly below {} (e.g. {}): the kernel swaps first, kubelet still evicts before the OOM killer", human(m), human(m * 9 / 10))),
    }
}

fn control_plane_check(inputs: &Inputs, swap_on: bool) -> Check {
    let apiserver = inputs.path("/etc/kubernetes/manifests/kube-apiserver.yaml").exists();
    match (apiserver, swap_on) {
        (true, true) => check(
            "control plane",
            Status::Warn,
            "kube-apiserver manifest found and swap is on",
            "run control-plane nodes without swap",
        ),
        (true, false) => check("control plane", Status::Ok, "control-plane node without swap", ""),
        (false, _) => check("control plane", Status::Ok, "not a control-plane node", ""),
    }
}

fn compression_check(inputs: &Inputs, swaps: &[SwapDevice]) -> Check {
    let zswap = read(inputs, "/sys/module/zswap/parameters/enabled").map(|s| s.trim() == "Y");
    let zram: Vec<&str> =
        swaps.iter().filter(|s| matches!(s.backing, Backing::Zram { .. })).map(|s| s.area.filename.as_str()).collect();
    let zswap_text = match zswap {
        Some(true) => "zswap enabled",
        Some(false) => "zswap disabled",
        None => "zswap not available",
    };
    let zram_text =
        if zram.is_empty() { "no zram swap".to_string() } else { format!("zram swap: {}", zram.join(", ")) };
    check("zswap / zram", Status::Info, format!("{zswap_text}; {zram_text}"), "")
}

/// Records swapcri could not read: their pods and containers run unmanaged.
fn records_check(state_root: &std::path::Path) -> Check {
    let name = "unreadable records";
    match crate::service::quarantine::list(state_root) {
        Ok(aside) if aside.is_empty() => check(name, Status::Ok, "every pod and container record is readable", ""),
        Ok(aside) => {
            let listed: Vec<String> = aside.iter().map(|a| format!("{} {} ({})", a.kind, a.id, a.why)).collect();
            check(
                name,
                Status::Fail,
                format!(
                    "{} record(s) kept aside, their objects left running unmanaged: {}",
                    aside.len(),
                    listed.join("; ")
                ),
                "adopt each (`swapcri quarantine adopt ID`, once this build reads it) or release it \
                 (`swapcri quarantine release ID`), then restart swapcri",
            )
        }
        Err(e) => check(name, Status::Warn, format!("cannot read {}: {e}", state_root.display()), ""),
    }
}

pub fn run_checks(inputs: &Inputs) -> Vec<Check> {
    let roots = Roots { proc: inputs.path("/proc"), sys: inputs.path("/sys"), fs: inputs.root.clone() };
    let swaps = swap_devices(&roots);
    let swap_on = !swaps.is_empty();
    let meminfo = read(inputs, "/proc/meminfo").unwrap_or_default();
    let mem_total = meminfo_bytes(&meminfo, "MemTotal").unwrap_or(0);
    let mode = cgroup_mode_from_mounts(&read(inputs, "/proc/mounts").unwrap_or_default());
    let mut checks = vec![
        swap_check(&swaps, mem_total),
        encryption_check(&swaps),
        rotational_check(&swaps),
        dedicated_check(inputs, &swaps),
        cgroup_check(inputs, mode, swap_on),
        cgroup_driver_check(inputs),
        noswap_check(inputs),
        kubelet_tmpfs_check(inputs, swap_on),
    ];
    checks.extend(system_slice_check(inputs, swap_on));
    checks.push(eviction_check(inputs));
    checks.push(control_plane_check(inputs, swap_on));
    checks.push(compression_check(inputs, &swaps));
    if let Some(state_root) = inputs.state_root.as_deref().filter(|p| p.exists()) {
        checks.push(records_check(state_root));
    }
    checks
}
