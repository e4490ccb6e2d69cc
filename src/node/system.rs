//! Protection of the system daemons' cgroup: no swap for them
//! (`memory.swap.max`) and I/O latency priority on the swap disks (`io.latency`, or a weight
//! where the kernel lacks it). Applied at start-up, read back, reported; never fatal.

use std::path::Path;
use std::process::Command;

use super::block::{swap_devices, Backing, Roots};
use crate::config::SystemConfig;
use crate::model::node::CgroupMode;
pub use crate::model::node::{Outcome, ProtectionReport};

/// The io protection's devices: configured, else the whole disks under active swap.
pub fn io_devices(config: &SystemConfig, roots: &Roots, notes: &mut Vec<String>) -> Vec<String> {
    if !config.io_devices.is_empty() {
        return config.io_devices.clone();
    }
    let mut devices: Vec<String> = Vec::new();
    for swap in swap_devices(roots) {
        match swap.backing {
            Backing::Disks { disks, .. } => {
                for d in disks {
                    if !devices.contains(&d.dev) {
                        devices.push(d.dev);
                    }
                }
            }
            Backing::Zram { device } => {
                notes.push(format!("{} is on {device}: zram has no disk to protect", swap.area.filename))
            }
            Backing::Unresolved { reason } => notes.push(format!("{}: {reason}", swap.area.filename)),
        }
    }
    devices
}

fn write_read(dir: &Path, file: &str, lines: &[String]) -> Outcome {
    for line in lines {
        if let Err(e) = std::fs::write(dir.join(file), line) {
            return Outcome::Failed { error: format!("writing {line:?} to {file}: {e}") };
        }
    }
    match std::fs::read_to_string(dir.join(file)) {
        Ok(text) => Outcome::Applied { file: file.into(), written: lines.to_vec(), read_back: text.trim().to_string() },
        Err(e) => Outcome::Failed { error: format!("reading {file} back: {e}") },
    }
}

/// The share of reads and writes that must meet the io.cost latency targets.
const IO_COST_PERCENTILE: f64 = 95.0;

/// Per-device `io.weight` only takes effect (and is only accepted) on devices where the io.cost
/// controller is on, which it is not by default. It is switched on with latency targets
/// (`target_us` at the 95th percentile, reads and writes): a swap disk whose requests wait
/// longer counts as saturated, and io.cost then holds each group to its weight, where its
/// default QoS only does so once the device's queue is full. The cost model and the vrate
/// range stay the kernel's. A device whose QoS someone set (`ctrl=user`) keeps it, switched
/// on if it was off.
fn enable_io_cost(cgroup_root: &Path, devices: &[String], target_us: u64, notes: &mut Vec<String>) {
    let qos = cgroup_root.join("io.cost.qos");
    let Ok(current) = std::fs::read_to_string(&qos) else {
        notes.push("no io.cost.qos in the cgroup root: io.weight may be refused".into());
        return;
    };
    for dev in devices {
        let line = current.lines().find(|l| l.split_whitespace().next() == Some(dev.as_str())).unwrap_or_default();
        let key = |k: &str| line.split_whitespace().find_map(|w| w.strip_prefix(k).and_then(|v| v.strip_prefix('=')));
        let number = |k: &str| key(k).and_then(|v| v.parse::<f64>().ok());
        let enabled = key("enable") == Some("1");
        let ours = [
            ("rpct", IO_COST_PERCENTILE),
            ("wpct", IO_COST_PERCENTILE),
            ("rlat", target_us as f64),
            ("wlat", target_us as f64),
        ]
        .iter()
        .all(|(k, want)| number(k) == Some(*want));
        let (write, done) = match (key("ctrl") == Some("user"), ours, enabled) {
            (true, true, true) => {
                notes.push(format!("io.cost on {dev}: latency targets of {target_us} µs in place"));
                continue;
            }
            (true, false, true) => {
                notes.push(format!("io.cost on {dev}: QoS set by someone else (ctrl=user) kept: {line}"));
                continue;
            }
            (true, false, false) => {
                (format!("{dev} enable=1"), format!("io.cost enabled on {dev} with the QoS someone set (ctrl=user)"))
            }
            _ => (
                format!(
                    "{dev} enable=1 ctrl=user rpct={p:.2} rlat={target_us} wpct={p:.2} wlat={target_us}",
                    p = IO_COST_PERCENTILE
                ),
                format!("io.cost enabled on {dev} with latency targets of {target_us} µs at p95 (for io.weight)"),
            ),
        };
        match std::fs::write(&qos, &write) {
            Ok(()) => notes.push(done),
            Err(e) => notes.push(format!("enabling io.cost on {dev} ({write}): {e}")),
        }
    }
}

/// Writes the cgroup files directly (no systemd managing the tree).
fn apply_files(
    config: &SystemConfig,
    cgroup_root: &Path,
    dir: &Path,
    devices: &[String],
    notes: &mut Vec<String>,
) -> (Outcome, Outcome) {
    let swap = match config.swap_max {
        None => Outcome::NotConfigured,
        Some(_) if !dir.join("memory.swap.max").exists() => Outcome::Unsupported {
            reason: "no memory.swap.max (swap accounting off, or the memory controller is not enabled here)".into(),
        },
        Some(v) => write_read(dir, "memory.swap.max", &[v.to_string()]),
    };
    let io = match config.io_latency_target_us {
        None => Outcome::NotConfigured,
        Some(_) if devices.is_empty() => Outcome::Unsupported { reason: "no disk to protect".into() },
        Some(target) if dir.join("io.latency").exists() => {
            let lines: Vec<String> = devices.iter().map(|d| format!("{d} target={target}")).collect();
            write_read(dir, "io.latency", &lines)
        }
        Some(_) if !config.io_weight_fallback => Outcome::Unsupported {
            reason: "io.latency unsupported (kernel without CONFIG_BLK_CGROUP_IOLATENCY); weight fallback disabled"
                .into(),
        },
        Some(target) => {
            let file = ["io.weight", "io.bfq.weight"].into_iter().find(|f| dir.join(f).exists());
            match file {
                Some(file) => {
                    notes.push(format!("io.latency unsupported by this kernel: {file} used instead"));
                    if file == "io.weight" {
                        enable_io_cost(cgroup_root, devices, target, notes);
                    }
                    let lines: Vec<String> = devices.iter().map(|d| format!("{d} {}", config.io_weight)).collect();
                    write_read(dir, file, &lines)
                }
                None => Outcome::Unsupported {
                    reason: "io.latency unsupported and no io.weight / io.bfq.weight (io controller not enabled?)"
                        .into(),
                },
            }
        }
    };
    (swap, io)
}

/// The io protection a unit property can ask for: a latency target, or a weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoProperty {
    Latency,
    Weight,
}

/// The `systemctl set-property` assignments for a systemd-managed `system.slice`.
pub fn systemd_properties(config: &SystemConfig, devices: &[String], io: Option<IoProperty>) -> Vec<String> {
    let mut props = Vec::new();
    if let Some(v) = config.swap_max {
        props.push(format!("MemorySwapMax={v}"));
    }
    match (config.io_latency_target_us, io) {
        (Some(target), Some(IoProperty::Latency)) => {
            props.extend(devices.iter().map(|d| format!("IODeviceLatencyTargetSec=/dev/block/{d} {target}us")))
        }
        (Some(_), Some(IoProperty::Weight)) => {
            props.extend(devices.iter().map(|d| format!("IODeviceWeight=/dev/block/{d} {}", config.io_weight)))
        }
        _ => {}
    }
    props
}

fn set_property(unit: &str, props: &[String]) -> Result<(), String> {
    let out = Command::new("systemctl")
        .args(["set-property", "--runtime", unit])
        .args(props)
        .output()
        .map_err(|e| format!("systemctl: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

/// What the kernel holds in `file` of the unit's cgroup after systemd applied `props`.
fn systemd_outcome(unit: &str, dir: &Path, file: &str, props: Vec<String>) -> Outcome {
    if props.is_empty() {
        return Outcome::NotConfigured;
    }
    if let Err(error) = set_property(unit, &props) {
        return Outcome::Failed { error };
    }
    match std::fs::read_to_string(dir.join(file)) {
        Ok(text) => Outcome::Applied {
            file: format!("{file} (systemd {unit}, runtime drop-in)"),
            written: props,
            read_back: text.trim().to_string(),
        },
        Err(e) => Outcome::Failed { error: format!("systemd took {props:?}, but {file} reads: {e}") },
    }
}

/// Through unit properties, which systemd keeps across its reloads (raw files it would
/// rewrite). Each value is read back from the kernel. The kernel's io.latency shows once
/// systemd enabled the io controller for the slice; without it, a weight (io.cost switched
/// on for the devices, as for cgroupfs).
fn apply_systemd(
    config: &SystemConfig,
    cgroup_root: &Path,
    devices: &[String],
    notes: &mut Vec<String>,
) -> (Outcome, Outcome) {
    let unit = config.cgroup.rsplit('/').next().unwrap_or(&config.cgroup).to_string();
    let dir = cgroup_root.join(config.cgroup.trim_start_matches('/'));
    let swap_only = SystemConfig { io_latency_target_us: None, ..config.clone() };
    let swap = systemd_outcome(&unit, &dir, "memory.swap.max", systemd_properties(&swap_only, devices, None));
    let io = match config.io_latency_target_us {
        None => Outcome::NotConfigured,
        Some(_) if devices.is_empty() => Outcome::Unsupported { reason: "no disk to protect".into() },
        Some(target) => {
            let no_swap = SystemConfig { swap_max: None, ..config.clone() };
            let latency = systemd_properties(&no_swap, devices, Some(IoProperty::Latency));
            let outcome = systemd_outcome(&unit, &dir, "io.latency", latency);
            match outcome {
                Outcome::Failed { .. } if !dir.join("io.latency").exists() && config.io_weight_fallback => {
                    notes
                        .push("io.latency unsupported by this kernel: IODeviceWeight= (io.weight) used instead".into());
                    enable_io_cost(cgroup_root, devices, target, notes);
                    let weight = systemd_properties(&no_swap, devices, Some(IoProperty::Weight));
                    systemd_outcome(&unit, &dir, "io.weight", weight)
                }
                Outcome::Failed { .. } if !dir.join("io.latency").exists() => Outcome::Unsupported {
                    reason:
                        "io.latency unsupported (kernel without CONFIG_BLK_CGROUP_IOLATENCY); weight fallback disabled"
                            .into(),
                },
                other => other,
            }
        }
    };
    (swap, io)
}

pub fn apply(config: &SystemConfig, cgroup_root: &Path, mode: CgroupMode, roots: &Roots) -> ProtectionReport {
    let mut report = ProtectionReport {
        cgroup: config.cgroup.clone(),
        via: "none".into(),
        skipped: None,
        swap_max: Outcome::NotConfigured,
        io: Outcome::NotConfigured,
        io_devices: Vec::new(),
        notes: Vec::new(),
    };
    if config.swap_max.is_none() && config.io_latency_target_us.is_none() {
        return report;
    }
    if mode != CgroupMode::Unified {
        report.skipped = Some("system protection needs cgroup v2 memory and io controllers".into());
        return report;
    }
    let devices =
        if config.io_latency_target_us.is_some() { io_devices(config, roots, &mut report.notes) } else { vec![] };
    report.io_devices = devices.clone();
    let (swap, io) = if roots.fs.join("run/systemd/system").is_dir() {
        report.via = "systemd".into();
        apply_systemd(config, cgroup_root, &devices, &mut report.notes)
    } else {
        let dir = cgroup_root.join(config.cgroup.trim_start_matches('/'));
        if !dir.is_dir() {
            if !config.create_cgroup {
                report.skipped = Some(format!("{} does not exist (system.create_cgroup is off)", dir.display()));
                return report;
            }
            if let Err(e) = std::fs::create_dir_all(&dir) {
                report.skipped = Some(format!("cannot create {}: {e}", dir.display()));
                return report;
            }
        }
        // The files appear only with the controllers enabled for the cgroup's parent.
        if let Some(parent) = dir.parent() {
            for controller in ["+memory", "+io"] {
                let _ = std::fs::write(parent.join("cgroup.subtree_control"), controller);
            }
        }
        report.via = "cgroupfs".into();
        apply_files(config, cgroup_root, &dir, &devices, &mut report.notes)
    };
    report.swap_max = swap;
    report.io = io;
    for (what, outcome) in [("memory.swap.max", &report.swap_max), ("io protection", &report.io)] {
        match outcome {
            Outcome::Applied { file, written, .. } => {
                tracing::info!(cgroup = %config.cgroup, %file, ?written, "system {what} applied")
            }
            Outcome::Unsupported { reason } => {
                tracing::warn!(cgroup = %config.cgroup, "system {what} not applied: {reason}")
            }
            Outcome::Failed { error } => tracing::warn!(cgroup = %config.cgroup, "system {what} failed: {error}"),
            Outcome::NotConfigured => {}
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::super::block::fixture::*;
    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        /// Swap on partition vda2 and on zram0; a system.slice with the given files.
        fn new(files: &[&str]) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let sys = root.join("sys");
            block(&sys, "vda", "254:0", Some("0"));
            partition(&sys, "vda", "vda2", "254:2");
            block(&sys, "zram0", "252:0", Some("0"));
            std::fs::create_dir_all(root.join("proc")).unwrap();
            // The swap "partition" is a file here: its device is the temp filesystem's.
            let node = root.join("fs/dev/vda2");
            std::fs::create_dir_all(node.parent().unwrap()).unwrap();
            std::fs::write(&node, "").unwrap();
            let dev = super::super::block::device_of(&node, false).unwrap();
            block(&sys, "tmpdisk", &dev, Some("1"));
            std::fs::write(
                root.join("proc/swaps"),
                "Filename Type Size Used Priority\n/dev/vda2 file 1024 0 -2\n/dev/zram0 partition 2048 0 100\n",
            )
            .unwrap();
            let slice = root.join("cgroup/system.slice");
            std::fs::create_dir_all(&slice).unwrap();
            for f in files {
                std::fs::write(slice.join(f), "").unwrap();
            }
            Fixture { dir }
        }

        fn roots(&self) -> Roots {
            let r = self.dir.path();
            Roots { proc: r.join("proc"), sys: r.join("sys"), fs: r.join("fs") }
        }

        fn apply(&self, config: &SystemConfig) -> ProtectionReport {
            apply(config, &self.dir.path().join("cgroup"), CgroupMode::Unified, &self.roots())
        }

        fn file(&self, name: &str) -> String {
            std::fs::read_to_string(self.dir.path().join("cgroup/system.slice").join(name)).unwrap()
        }
    }

    fn configured() -> SystemConfig {
        SystemConfig { swap_max: Some(0), io_latency_target_us: Some(10000), ..SystemConfig::default() }
    }

    #[test]
    fn writes_swap_max_and_io_latency_on_the_swap_disks() {
        let f = Fixture::new(&["memory.swap.max", "io.latency"]);
        let report = f.apply(&configured());
        assert_eq!(report.via, "cgroupfs");
        assert!(matches!(report.swap_max, Outcome::Applied { .. }), "{report:?}");
        assert_eq!(f.file("memory.swap.max"), "0");
        let tmpdisk = report.io_devices[0].clone();
        assert_eq!(report.io_devices.len(), 1, "zram has no disk: {report:?}");
        assert_eq!(f.file("io.latency"), format!("{tmpdisk} target=10000"));
        assert!(report.notes.iter().any(|n| n.contains("zram0")), "{:?}", report.notes);
        // Idempotent: a second start writes the same values.
        assert_eq!(f.apply(&configured()), report);
    }

    #[test]
    fn falls_back_to_weights_without_io_latency() {
        let f = Fixture::new(&["memory.swap.max", "io.weight"]);
        // io.cost is on for 8:16 already, off for 8:0 (the kernel lists both once initialised).
        let qos = f.dir.path().join("cgroup/io.cost.qos");
        std::fs::write(&qos, "8:0 enable=0 ctrl=auto\n8:16 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=10000 min=1.00 max=100.00\n").unwrap();
        let config = SystemConfig { io_devices: vec!["8:0".into(), "8:16".into()], ..configured() };
        let report = f.apply(&config);
        // The fixture file keeps the last write only; the kernel keeps one line per device.
        assert_eq!(f.file("io.weight"), "8:16 1000");
        assert_eq!(
            std::fs::read_to_string(&qos).unwrap(),
            "8:0 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=10000",
            "only the device without our targets is written"
        );
        let noted = |want: &str| report.notes.iter().any(|n| n == want);
        assert!(
            noted("io.cost enabled on 8:0 with latency targets of 10000 µs at p95 (for io.weight)"),
            "{:?}",
            report.notes
        );
        assert!(noted("io.cost on 8:16: latency targets of 10000 µs in place"), "{:?}", report.notes);
        assert!(matches!(&report.io, Outcome::Applied { file, .. } if file == "io.weight"), "{report:?}");
        assert!(report.notes.iter().any(|n| n.contains("io.latency unsupported")));

        let no_fallback = f.apply(&SystemConfig { io_weight_fallback: false, ..config.clone() });
        assert!(
            matches!(&no_fallback.io, Outcome::Unsupported { reason } if reason.contains("io.latency unsupported"))
        );
        let bfq = Fixture::new(&["io.bfq.weight"]);
        let report = bfq.apply(&SystemConfig { io_devices: vec!["8:0".into()], ..configured() });
        assert_eq!(bfq.file("io.bfq.weight"), "8:0 1000");
        assert!(!bfq.dir.path().join("cgroup/io.cost.qos").exists(), "bfq does not need io.cost");
        assert!(matches!(report.swap_max, Outcome::Unsupported { .. }), "no memory.swap.max file: {report:?}");
    }

    #[test]
    fn io_cost_gets_latency_targets_unless_someone_set_its_qos() {
        let ours = "8:0 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=10000";
        let cases = [
            ("8:0 enable=0 ctrl=auto", Some(ours), "with latency targets"),
            ("8:0 enable=1 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000", Some(ours), "with latency targets"),
            ("", Some(ours), "with latency targets"),
            (
                "8:0 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=10000 min=1.00 max=100.00",
                None,
                "in place",
            ),
            ("8:0 enable=1 ctrl=user rpct=90.00 rlat=5000 wpct=90.00 wlat=5000", None, "someone else"),
            ("8:0 enable=0 ctrl=user rpct=90.00 rlat=5000 wpct=90.00 wlat=5000", Some("8:0 enable=1"), "someone set"),
            // Another device's line is no business of 8:0's.
            ("8:16 enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=10000", Some(ours), "with latency targets"),
        ];
        for (before, written, note) in cases {
            let root = tempfile::tempdir().unwrap();
            let qos = root.path().join("io.cost.qos");
            std::fs::write(&qos, format!("{before}\n")).unwrap();
            let mut notes = Vec::new();
            enable_io_cost(root.path(), &["8:0".to_string()], 10000, &mut notes);
            let now = std::fs::read_to_string(&qos).unwrap();
            assert_eq!((now != format!("{before}\n")).then_some(now.as_str()), written, "{before:?}");
            assert!(notes.len() == 1 && notes[0].contains(note), "{before:?}: {notes:?}");
        }
    }

    #[test]
    fn skips_and_reports_rather_than_failing() {
        let f = Fixture::new(&[]);
        assert_eq!(f.apply(&SystemConfig::default()).via, "none", "nothing configured: nothing done");
        let v1 = apply(&configured(), &f.dir.path().join("cgroup"), CgroupMode::Hybrid, &f.roots());
        assert!(v1.skipped.unwrap().contains("cgroup v2"));
        let missing = SystemConfig { cgroup: "other.slice".into(), ..configured() };
        assert!(f.apply(&missing).skipped.unwrap().contains("does not exist"));
        let created = f.apply(&SystemConfig { create_cgroup: true, ..missing });
        assert!(created.skipped.is_none() && f.dir.path().join("cgroup/other.slice").is_dir());
        assert!(matches!(created.io, Outcome::Unsupported { .. }), "{created:?}");
    }

    #[test]
    fn systemd_gets_unit_properties() {
        let devices = ["8:0".to_string(), "259:0".to_string()];
        let cases: &[(Option<IoProperty>, &[&str])] = &[
            (
                Some(IoProperty::Latency),
                &[
                    "MemorySwapMax=0",
                    "IODeviceLatencyTargetSec=/dev/block/8:0 10000us",
                    "IODeviceLatencyTargetSec=/dev/block/259:0 10000us",
                ],
            ),
            (
                Some(IoProperty::Weight),
                &["MemorySwapMax=0", "IODeviceWeight=/dev/block/8:0 1000", "IODeviceWeight=/dev/block/259:0 1000"],
            ),
            (None, &["MemorySwapMax=0"]),
        ];
        for (io, want) in cases {
            assert_eq!(systemd_properties(&configured(), &devices, *io), *want, "{io:?}");
        }
        let unconfigured = SystemConfig::default();
        assert!(systemd_properties(&unconfigured, &devices, Some(IoProperty::Latency)).is_empty());
    }
}
