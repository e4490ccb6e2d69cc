//! Why the stats path reads cgroup files itself rather than through libcgroups' managers:
//! on the same cgroup v2 group, both agree on what both read; but libcgroups' `stats()`
//! fails for the whole group when any one controller's file is missing (PSI off, the cpu
//! controller not enabled, no swap accounting, hugetlb not enabled), where swapcri still has
//! every figure the node gives, and it reports a missing swap peak as 0 rather than absent.
//! If a libcgroups release serves these, these tests fail and the stats path can move.

#[path = "common/cgroup_v2.rs"]
mod cgroup_v2;

use std::path::Path;

use libcgroups::common::CgroupManager;
use swapcri::cgroup::detail::{read_detail, DetailDirs};
use swapcri::cgroup::stats::{read_stats, CgroupDirs};
use swapcri::model::cgroup_stats::CgroupStats;

fn ours(root: &Path) -> (CgroupStats, swapcri::model::cgroup_stats::Detail) {
    let dirs = CgroupDirs::locate("/pod/c1", Some(root), &[]).unwrap();
    let detail = DetailDirs::locate("/pod/c1", Some(root), &[]).unwrap();
    (read_stats(&dirs), read_detail(&detail))
}

fn theirs(root: &Path) -> Result<libcgroups::stats::Stats, String> {
    let manager = libcgroups::v2::manager::Manager::new(root.into(), "pod/c1".into()).map_err(|e| e.to_string())?;
    manager.stats().map_err(|e| e.to_string())
}

#[test]
fn both_agree_on_a_whole_group() {
    let root = tempfile::tempdir().unwrap();
    cgroup_v2::write_full(&root.path().join("pod/c1"));
    let (stats, detail) = ours(root.path());
    let lib = theirs(root.path()).expect("libcgroups reads a whole group");
    let memory = stats.memory.unwrap();
    assert_eq!(lib.memory.memory.usage, memory.usage_bytes);
    assert_eq!(Some(lib.memory.memory.limit), memory.limit_bytes);
    assert_eq!(lib.memory.memory.usage - lib.memory.stats["inactive_file"], memory.working_set_bytes);
    assert_eq!(lib.memory.stats["anon"], memory.rss_bytes);
    assert_eq!(lib.cpu.usage.usage_total * 1000, stats.cpu_usage_ns.unwrap(), "libcgroups keeps microseconds");
    assert_eq!(lib.cpu.throttling.throttled_periods, detail.cfs_throttled_periods.unwrap());
    let swap = stats.swap.unwrap();
    assert_eq!(lib.memory.memswap.usage, swap.usage_bytes);
    assert_eq!(Some(lib.memory.memswap.limit), swap.limit_bytes);
    assert_eq!(Some(lib.memory.memswap.max_usage), swap.peak_bytes);
    assert_eq!(lib.pids.current, detail.threads.unwrap());
    let read = lib.blkio.service_bytes.iter().find(|d| d.op_type.as_deref() == Some("read")).unwrap();
    assert_eq!(read.value, detail.io[0].read_bytes);
    // What libcgroups does not carry: PSI totals, swap `high`/`max` events, zswap's pool size.
    assert_eq!(stats.pressure.memory.unwrap().some.total_ns, 123_456_000);
    assert_eq!(swap.events.unwrap().max, 2);
    assert_eq!(swap.zswap.unwrap().compressed_bytes, Some(204800));
}

/// A case: its name, the files removed from a whole group, what swapcri still reports.
type Case = (&'static str, Vec<String>, fn(&CgroupStats) -> bool);

#[test]
fn one_missing_file_costs_libcgroups_the_whole_group() {
    let mut cases: Vec<Case> = vec![
        ("PSI off", names(cgroup_v2::PSI), |s| s.memory.is_some() && s.swap.is_some() && s.pressure.memory.is_none()),
        ("no swap accounting", names(cgroup_v2::SWAP), |s| s.memory.is_some() && s.swap.is_none()),
        ("cpu controller off", vec!["cpu.max".into(), "cpu.weight".into()], |s| s.cpu_usage_ns == Some(1_500_000_000)),
    ];
    let sizes = cgroup_v2::huge_page_sizes();
    if !sizes.is_empty() {
        let huge: Vec<String> = cgroup_v2::hugetlb(&sizes).into_iter().map(|(f, _)| f).collect();
        cases.push(("hugetlb not enabled for the group", huge, |s| s.memory.is_some() && s.swap.is_some()));
    }
    for (case, removed, still) in cases {
        let root = tempfile::tempdir().unwrap();
        let group = root.path().join("pod/c1");
        cgroup_v2::write_full(&group);
        for file in &removed {
            std::fs::remove_file(group.join(file)).unwrap();
        }
        if case == "cpu controller off" {
            cgroup_v2::write(&group, cgroup_v2::CPU_USAGE_ONLY);
        }
        let (stats, _) = ours(root.path());
        assert!(still(&stats), "{case}: swapcri lost figures: {stats:?}");
        assert!(theirs(root.path()).is_err(), "{case}: libcgroups now reads the group: move the stats path onto it");
    }
}

#[test]
fn a_kernel_without_the_swap_peak() {
    let root = tempfile::tempdir().unwrap();
    let group = root.path().join("pod/c1");
    cgroup_v2::write_full(&group);
    std::fs::remove_file(group.join("memory.swap.peak")).unwrap();
    let (stats, _) = ours(root.path());
    assert_eq!(stats.swap.unwrap().peak_bytes, None, "Linux before 6.5 has no peak: absent");
    assert_eq!(theirs(root.path()).unwrap().memory.memswap.max_usage, 0, "libcgroups says 0");
}

fn names(files: &[(&str, &str)]) -> Vec<String> {
    files.iter().map(|(f, _)| f.to_string()).collect()
}

/// On a cgroup v2 node (root): a group of its own with a sleeping process, read both ways
/// from the kernel's own files. Elsewhere there is no such group to read, and it says so.
#[test]
fn a_real_group_reads_the_same_both_ways() {
    let root = Path::new("/sys/fs/cgroup");
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if !nix::unistd::geteuid().is_root() || !controllers.split_whitespace().any(|c| c == "memory") {
        eprintln!("no cgroup v2 memory controller here (or not root): nothing real to read");
        return;
    }
    for controller in controllers.split_whitespace() {
        let _ = std::fs::write(root.join("cgroup.subtree_control"), format!("+{controller}"));
    }
    let name = format!("swapcri-libcgroups-{}", std::process::id());
    let group = root.join(&name);
    std::fs::create_dir(&group).unwrap();
    let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    std::fs::write(group.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    let dirs = CgroupDirs::locate(&name, Some(root), &[]).unwrap();
    let (stats, detail) = (read_stats(&dirs), read_detail(&DetailDirs::locate(&name, Some(root), &[]).unwrap()));
    let lib = libcgroups::v2::manager::Manager::new(root.into(), name.clone().into()).unwrap().stats();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    std::fs::remove_dir(&group).unwrap();

    assert_eq!(stats.memory.as_ref().expect("swapcri reads the group's memory").limit_bytes, None);
    assert_eq!(detail.threads, Some(1));
    // What libcgroups needs of a group: PSI, swap accounting, hugetlb where the node has huge pages.
    let hugetlb = controllers.split_whitespace().any(|c| c == "hugetlb") || cgroup_v2::huge_page_sizes().is_empty();
    let complete = group_has_psi(&stats) && stats.swap.is_some() && hugetlb;
    eprintln!("PSI, swap accounting and hugetlb all here: {complete}; libcgroups: {:?}", lib.as_ref().err());
    if complete || lib.is_ok() {
        let lib = lib.expect("libcgroups reads a group that has every file it needs");
        assert_eq!(lib.memory.memory.limit, u64::MAX, "no limit is u64::MAX to libcgroups");
        assert_eq!(lib.pids.current, 1);
        assert!(lib.cpu.usage.usage_total * 1000 >= stats.cpu_usage_ns.unwrap(), "read later, never less");
    }
}

fn group_has_psi(stats: &CgroupStats) -> bool {
    stats.pressure.cpu.is_some() && stats.pressure.memory.is_some() && stats.pressure.io.is_some()
}
