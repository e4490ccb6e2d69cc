//! The cost of one cgroup's statistics: swapcri's own readers against libcgroups' managers
//! (plus the figures libcgroups lacks), on a cgroup v2 group written as a 6.12 kernel shows
//! it, and, as root, on a real group with one process in every mounted hierarchy (cgroup v1
//! on a node whose memory controller is on v1).
//!   cargo bench --bench cgroup_stats

#[path = "../tests/common/cgroup_v2.rs"]
mod cgroup_v2;

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use libcgroups::common::CgroupManager;
use swapcri::cgroup::detail::{read_detail, DetailDirs};
use swapcri::cgroup::stats::{read_stats, CgroupDirs};

const BATCHES: usize = 21;
const CALLS: usize = 200;

/// The median over batches of the time per call, in microseconds.
fn per_call<T>(mut call: impl FnMut() -> T) -> f64 {
    let mut batches: Vec<Duration> = (0..BATCHES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..CALLS {
                black_box(call());
            }
            started.elapsed()
        })
        .collect();
    batches.sort();
    batches[BATCHES / 2].as_secs_f64() * 1e6 / CALLS as f64
}

fn row(name: &str, us: f64) {
    println!("  {name:<58} {us:>8.1} µs");
}

fn v2_group(root: &Path) {
    let rel = "/pod/c1";
    let dirs = CgroupDirs::locate(rel, Some(root), &[]).unwrap();
    let detail = DetailDirs::locate(rel, Some(root), &[]).unwrap();
    println!("cgroup v2 group as a 6.12 kernel shows it (plain files), per call:");
    row("swapcri: CPU, memory, swap, PSI (the CRI stats path)", per_call(|| read_stats(&dirs)));
    row("swapcri: the same and the cadvisor figures (metrics)", per_call(|| (read_stats(&dirs), read_detail(&detail))));
    let lib = || libcgroups::v2::manager::Manager::new(root.into(), "pod/c1".into()).unwrap().stats().unwrap();
    row("libcgroups: Manager::stats()", per_call(lib));
    let lacking = || {
        let stat = std::fs::read_to_string(root.join("pod/c1/memory.stat")).unwrap_or_default();
        (
            swapcri::cgroup::swap::read_swap(&root.join("pod/c1"), &stat),
            swapcri::cgroup::pressure::read_set(&root.join("pod/c1")),
        )
    };
    row("libcgroups + what it lacks (PSI totals, swap events, zswap)", per_call(|| (lib(), lacking())));
}

/// A group of this bench's own in every mounted hierarchy, holding one sleeping process: what
/// a container's cgroup looks like to a stats reader. Needs root.
fn real_group() {
    if !nix::unistd::geteuid().is_root() {
        println!("not root: the real-kernel figures are skipped");
        return;
    }
    let hierarchies = swapcri::cgroup::hierarchies();
    let v2 = swapcri::cgroup::probe_mode(Path::new("/sys/fs/cgroup")) == swapcri::model::node::CgroupMode::Unified;
    if v2 {
        let controllers = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
        for c in controllers.split_whitespace() {
            let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", format!("+{c}"));
        }
    }
    let rel = format!("/swapcri-bench-{}", std::process::id());
    let mut sleeper = std::process::Command::new("sleep").arg("600").spawn().unwrap();
    for h in &hierarchies {
        let dir = h.mountpoint.join(rel.trim_start_matches('/'));
        if std::fs::create_dir(&dir).is_ok() {
            let _ = std::fs::write(dir.join("cgroup.procs"), sleeper.id().to_string());
        }
    }
    let unified = v2.then(|| Path::new("/sys/fs/cgroup"));
    if let Some(dirs) = CgroupDirs::locate(&rel, unified, &hierarchies) {
        println!("a real group {rel} with one process (cgroup {}), per call:", if v2 { "v2" } else { "v1" });
        row("swapcri: the CRI stats path", per_call(|| read_stats(&dirs)));
        let config = libcgroups::common::CgroupConfig {
            cgroup_path: rel.clone().into(),
            systemd_cgroup: false,
            container_name: String::new(),
        };
        let stats = || {
            libcgroups::common::create_cgroup_manager(config.clone())
                .map_err(|e| e.to_string())?
                .stats()
                .map_err(|e| e.to_string())
        };
        match stats() {
            Ok(_) => {
                row("libcgroups: create_cgroup_manager + stats()", per_call(stats));
                let manager = libcgroups::common::create_cgroup_manager(config.clone()).unwrap();
                row("libcgroups: stats() of a manager made once", per_call(|| manager.stats()));
            }
            Err(e) => println!("  libcgroups: stats() fails here: {e}"),
        }
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let _ = swapcri::cgroup::remove(&rel, &hierarchies);
}

fn main() {
    let root = tempfile::tempdir().unwrap();
    cgroup_v2::write_full(&root.path().join("pod/c1"));
    v2_group(root.path());
    real_group();
}
