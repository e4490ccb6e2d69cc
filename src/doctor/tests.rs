//! Every check on fixture trees: a node set up against the guidance, and one set up well.

use std::path::Path;

use super::*;
use crate::model::bytes::human;
use crate::node::block::fixture::{block, partition, stacked};

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A node whose swap (a file, so its device is the fixture filesystem's) sits on `swap_dev`.
fn node(good: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "/swapfile", "");
    let dev = crate::node::block::device_of(&root.join("swapfile"), false).unwrap();
    let sys = root.join("sys");
    if good {
        block(&sys, "nvme0n1", "259:0", Some("0"));
        partition(&sys, "nvme0n1", "nvme0n1p2", "259:2");
        stacked(&sys, "dm-0", &dev, &["nvme0n1p2"], true);
        block(&sys, "rootdisk", "250:7", Some("0"));
    } else {
        block(&sys, "sdz", "8:0", Some("1"));
        partition(&sys, "sdz", "sdz1", &dev);
    }
    let root_dev = if good { "250:7".to_string() } else { dev.clone() };
    write(root, "/proc/self/mountinfo", &format!("22 1 {root_dev} / / rw,relatime - ext4 /dev/x rw\n"));
    write(root, "/proc/swaps", "Filename Type Size Used Priority\n/swapfile file 8388608 0 -2\n");
    write(root, "/proc/meminfo", "MemTotal: 16777216 kB\nSwapTotal: 8388608 kB\n");
    write(root, "/proc/sys/kernel/osrelease", if good { "6.12.9+bpo-amd64\n" } else { "6.1.0-56-amd64\n" });
    write(root, "/proc/sys/vm/min_free_kbytes", "102400\n");
    let kubelet_tmpfs = if good { "rw,relatime,size=100k,noswap" } else { "rw,relatime,size=100k" };
    write(
        root,
        "/proc/mounts",
        &format!(
            "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\ntmpfs /var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/s tmpfs {kubelet_tmpfs} 0 0\n"
        ),
    );
    write(root, "/sys/fs/cgroup/kubepods/memory.swap.max", "max\n");
    write(root, "/sys/fs/cgroup/system.slice/memory.swap.max", if good { "0\n" } else { "max\n" });
    write(
        root,
        "/sys/fs/cgroup/system.slice/io.weight",
        if good { "default 100\n259:0 1000\n" } else { "default 100\n" },
    );
    write(root, "/sys/module/zswap/parameters/enabled", "N\n");
    if good {
        write(root, "/sys/fs/cgroup/io.cost.qos", "259:0 enable=1 ctrl=auto rpct=0.00\n");
        std::fs::create_dir_all(root.join("run/systemd/system")).unwrap();
    }
    if !good {
        write(root, "/etc/kubernetes/manifests/kube-apiserver.yaml", "kind: Pod\n");
    }
    dir
}

fn run(root: &Path, threshold: Option<u64>) -> Vec<Check> {
    run_with(root, threshold, crate::config::CgroupDriver::Systemd)
}

fn run_with(root: &Path, threshold: Option<u64>, cgroup_driver: crate::config::CgroupDriver) -> Vec<Check> {
    run_checks(&Inputs {
        root: root.to_path_buf(),
        system_cgroup: "system.slice".into(),
        eviction_threshold: threshold,
        cgroup_driver,
        state_root: None,
    })
}

fn status_of(checks: &[Check], name: &str) -> Status {
    checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no check {name}")).status
}

#[test]
fn a_node_against_the_guidance() {
    let dir = node(false);
    let checks = run(dir.path(), Some(500 << 20));
    let expected = [
        ("swap", Status::Ok),
        ("swap encryption", Status::Warn),
        ("swap disk type", Status::Warn),
        ("swap disk dedicated", Status::Warn),
        ("cgroup v2", Status::Ok),
        ("cgroup driver", Status::Fail),
        ("tmpfs noswap", Status::Warn),
        ("kubelet tmpfs volumes", Status::Fail),
        ("system swap", Status::Warn),
        ("system io protection", Status::Warn),
        ("eviction threshold", Status::Warn),
        ("control plane", Status::Warn),
        ("zswap / zram", Status::Info),
    ];
    for (name, status) in expected {
        assert_eq!(status_of(&checks, name), status, "{name}: {checks:#?}");
    }
    assert!(failed(&checks));
    for c in checks.iter().filter(|c| matches!(c.status, Status::Warn | Status::Fail)) {
        assert!(!c.advice.is_empty(), "{} says what to do", c.name);
    }
    let text = render_text(&checks);
    assert!(text.contains("[FAIL] kubelet tmpfs volumes"), "{text}");
    assert!(text.contains("8.0 GiB on /swapfile (50% of RAM 16.0 GiB)"), "{text}");
}

#[test]
fn a_node_set_up_well() {
    let dir = node(true);
    let checks = run(dir.path(), Some(95 << 20));
    for c in &checks {
        assert!(matches!(c.status, Status::Ok | Status::Info), "{c:?}");
    }
    assert!(checks.iter().any(|c| c.name == "swap encryption" && c.found.contains("dm-crypt")));
    assert!(!failed(&checks));
}

#[test]
fn cgroup_layouts_and_missing_pieces() {
    use crate::model::node::CgroupMode;
    use checks_support::*;
    assert_eq!(mode("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"), CgroupMode::Unified);
    assert_eq!(
        mode("tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"),
        CgroupMode::Hybrid
    );
    assert_eq!(mode("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"), CgroupMode::Legacy);

    // Swap on cgroup v1 fails; no swap at all only warns.
    let dir = node(false);
    write(dir.path(), "/proc/mounts", "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n");
    assert_eq!(status_of(&run(dir.path(), None), "cgroup v2"), Status::Fail);
    write(dir.path(), "/proc/swaps", "Filename Type Size Used Priority\n");
    let checks = run(dir.path(), None);
    assert_eq!(status_of(&checks, "swap"), Status::Warn);
    assert_eq!(status_of(&checks, "cgroup v2"), Status::Warn);
    assert_eq!(status_of(&checks, "eviction threshold"), Status::Info);
}

#[test]
fn the_driver_must_be_the_trees_manager_and_weights_need_io_cost() {
    use crate::config::CgroupDriver::{Cgroupfs, Systemd};
    let cases = [
        (true, Systemd, Status::Ok),
        (false, Cgroupfs, Status::Ok),
        (false, Systemd, Status::Fail),
        (true, Cgroupfs, Status::Warn),
    ];
    for (booted, driver, want) in cases {
        let dir = node(true);
        if !booted {
            std::fs::remove_dir(dir.path().join("run/systemd/system")).unwrap();
        }
        assert_eq!(status_of(&run_with(dir.path(), None, driver), "cgroup driver"), want, "{booted} {driver:?}");
    }
    // A weight without io.cost (or bfq) does nothing.
    let dir = node(true);
    write(dir.path(), "/sys/fs/cgroup/io.cost.qos", "259:0 enable=0 ctrl=auto\n");
    let io = run(dir.path(), None).into_iter().find(|c| c.name == "system io protection").unwrap();
    assert_eq!(io.status, Status::Warn, "{io:?}");
    assert!(io.found.contains("no io.cost or bfq on 259:0"), "{io:?}");
    write(dir.path(), "/sys/dev/block/259:0/queue/scheduler", "mq-deadline kyber [bfq] none\n");
    assert_eq!(status_of(&run(dir.path(), None), "system io protection"), Status::Ok);
}

mod checks_support {
    pub fn mode(mounts: &str) -> crate::model::node::CgroupMode {
        super::super::checks::cgroup_mode_from_mounts(mounts)
    }
}

#[test]
fn thresholds_from_flags_and_kubelet_config() {
    let gib = 1u64 << 30;
    assert_eq!(parse_threshold("100Mi", 16 * gib), Some(100 << 20));
    assert_eq!(parse_threshold("5%", 16 * gib), Some((16 * gib) / 20));
    assert_eq!(parse_threshold("lots", 16 * gib), None);
    let config = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: \"95Mi\"\n  nodefs.available: 10%\n";
    assert_eq!(eviction_from_kubelet_config(config, 16 * gib), Some(95 << 20));
    assert_eq!(eviction_from_kubelet_config("kind: KubeletConfiguration\n", gib), None);
    assert_eq!(human(1536), "1.5 KiB");
    assert_eq!(human(12), "12 B");
}

#[test]
fn records_kept_aside_fail_the_check() {
    let state = tempfile::tempdir().unwrap();
    let node = tempfile::tempdir().unwrap();
    let inputs = |root: &Path| Inputs {
        root: node.path().to_path_buf(),
        system_cgroup: "system.slice".into(),
        eviction_threshold: None,
        cgroup_driver: crate::config::CgroupDriver::Systemd,
        state_root: Some(root.to_path_buf()),
    };
    assert_eq!(status_of(&run_checks(&inputs(state.path())), "unreadable records"), Status::Ok);
    let aside = state.path().join("containers").join(format!("{}.corrupt", "d".repeat(64)));
    std::fs::create_dir_all(&aside).unwrap();
    std::fs::write(aside.join("meta.json"), b"{").unwrap();
    let checks = run_checks(&inputs(state.path()));
    assert_eq!(status_of(&checks, "unreadable records"), Status::Fail);
    let check = checks.iter().find(|c| c.name == "unreadable records").unwrap();
    assert!(check.found.contains(&"d".repeat(64)) && check.advice.contains("swapcri quarantine"), "{check:?}");
}
