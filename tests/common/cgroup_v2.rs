//! A cgroup v2 group written as plain files the way a 6.12 kernel shows a running container
//! with swap, zswap, PSI and the cpu, io, memory, pids and hugetlb controllers, so stats
//! readers can be compared and timed without a cgroup v2 node.
#![allow(dead_code)]

use std::path::Path;

const MEMORY_STAT: &str = "anon 41943040\nfile 8388608\nkernel 1572864\nkernel_stack 65536\npagetables 131072\n\
sec_pagetables 0\npercpu 1200\nsock 0\nvmalloc 0\nshmem 0\nzswap 204800\nzswapped 819200\nfile_mapped 2097152\n\
file_dirty 0\nfile_writeback 0\nswapcached 4096\nanon_thp 0\nfile_thp 0\nshmem_thp 0\ninactive_anon 20971520\n\
active_anon 20971520\ninactive_file 4194304\nactive_file 4194304\nunevictable 0\nslab_reclaimable 300000\n\
slab_unreclaimable 200000\nslab 500000\nworkingset_refault_anon 321\nworkingset_refault_file 55\n\
workingset_activate_anon 12\nworkingset_activate_file 3\nworkingset_restore_anon 2\nworkingset_restore_file 1\n\
workingset_nodereclaim 0\npswpin 300\npswpout 900\npgscan 4000\npgsteal 3900\npgscan_kswapd 0\npgscan_direct 4000\n\
pgscan_khugepaged 0\npgsteal_kswapd 0\npgsteal_direct 3900\npgsteal_khugepaged 0\npgfault 123456\npgmajfault 77\n\
pgrefill 100\npgactivate 50\npgdeactivate 40\npglazyfree 0\npglazyfreed 0\nswpin_zero 0\nswpout_zero 0\n\
zswpin 7\nzswpout 20\nzswpwb 0\nthp_fault_alloc 0\nthp_collapse_alloc 0\nthp_swpout 0\nthp_swpout_fallback 0\n";

const PRESSURE: &str =
    "some avg10=1.50 avg60=0.25 avg300=0.05 total=123456\nfull avg10=0.10 avg60=0.02 avg300=0.00 total=4200\n";

/// The files, by the kernel feature that brings them.
pub const BASE: &[(&str, &str)] = &[
    ("cgroup.procs", "1234\n1240\n"),
    ("cgroup.threads", "1234\n1240\n1241\n"),
    ("memory.current", "52428800\n"),
    ("memory.max", "104857600\n"),
    ("memory.peak", "60000000\n"),
    ("memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"),
    ("memory.stat", MEMORY_STAT),
    ("io.stat", "8:0 rbytes=4096000 wbytes=8192 rios=100 wios=2 dbytes=0 dios=0\n"),
    ("pids.current", "3\n"),
    ("pids.max", "max\n"),
];
/// Present only when the cpu controller is enabled for the group.
pub const CPU_CONTROLLER: &[(&str, &str)] = &[
    ("cpu.stat", "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\nnr_periods 40\nnr_throttled 4\nthrottled_usec 2000\nnr_bursts 0\nburst_usec 0\n"),
    ("cpu.max", "50000 100000\n"),
    ("cpu.weight", "100\n"),
];
/// The cpu.stat of a group without the cpu controller: usage only.
pub const CPU_USAGE_ONLY: &[(&str, &str)] =
    &[("cpu.stat", "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")];
/// Swap accounting (every kernel since 5.8 unless `swapaccount=0`); the peak since 6.5.
pub const SWAP: &[(&str, &str)] = &[
    ("memory.swap.current", "1048576\n"),
    ("memory.swap.max", "536870912\n"),
    ("memory.swap.peak", "2097152\n"),
    ("memory.swap.events", "high 0\nmax 2\nfail 1\n"),
    ("memory.zswap.current", "204800\n"),
];
/// Pressure stall information (absent with `psi=0`, the default of some distributions).
pub const PSI: &[(&str, &str)] =
    &[("cpu.pressure", PRESSURE), ("memory.pressure", PRESSURE), ("io.pressure", PRESSURE)];

/// The hugetlb files of each huge page size this node has (what libcgroups looks for).
pub fn hugetlb(sizes: &[String]) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for size in sizes {
        files.push((format!("hugetlb.{size}.current"), "0\n".to_string()));
        files.push((format!("hugetlb.{size}.max"), "max\n".to_string()));
        files.push((format!("hugetlb.{size}.events"), "max 0\n".to_string()));
    }
    files
}

/// The huge page sizes of this node, named as hugetlb files name them (`2MB`, `1GB`).
pub fn huge_page_sizes() -> Vec<String> {
    swapcri::node::hugepages::probe(Path::new("/sys"))
}

pub fn write(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// A whole group: every file a 6.12 node with swap, PSI and all controllers shows.
pub fn write_full(dir: &Path) {
    for set in [BASE, CPU_CONTROLLER, SWAP, PSI] {
        write(dir, set);
    }
    let huge: Vec<(String, String)> = hugetlb(&huge_page_sizes());
    let huge: Vec<(&str, &str)> = huge.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    write(dir, &huge);
}
