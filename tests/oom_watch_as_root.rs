//! An OOM kill is counted even when the container's cgroup is removed the moment its process
//! has been reaped, as systemd removes an emptied scope: the watch reads the kernel's count
//! when the kernel notifies it (cgroup v2 memory.events, cgroup v1 an eventfd on
//! memory.oom_control), not after the exit, and on v2 keeps the parent's (the pod's) count as
//! a second witness for a notification the kernel held back and dropped with the cgroup.
//! Real kernel cgroups; root only.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use swapcri::cgroup::oom::{oom_kill_count, OomWatch};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A memory cgroup of the test's own, limited to 16 MiB without swap, inside a parent of
/// its own as a container's is inside its pod's; both removed on drop.
struct TestCgroup {
    pod: PathBuf,
    dir: PathBuf,
}

impl TestCgroup {
    fn new(name: &str) -> Option<TestCgroup> {
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
        let parent = if fs::read_to_string(v2).is_ok_and(|c| c.split_whitespace().any(|c| c == "memory")) {
            let root = PathBuf::from("/sys/fs/cgroup");
            let enabled = fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "memory") {
                fs::write(root.join("cgroup.subtree_control"), "+memory").ok()?;
            }
            root
        } else if Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
            PathBuf::from("/sys/fs/cgroup/memory")
        } else {
            return None;
        };
        let pod = parent.join(format!("swapcri-test-{name}-{}", std::process::id()));
        fs::create_dir(&pod).unwrap();
        let cg = TestCgroup { dir: pod.join("ctr"), pod };
        if cg.pod.join("cgroup.subtree_control").exists() {
            fs::write(cg.pod.join("cgroup.subtree_control"), "+memory").unwrap();
        }
        fs::create_dir(&cg.dir).unwrap();
        let limit = (16u64 << 20).to_string();
        if cg.dir.join("memory.max").exists() {
            fs::write(cg.dir.join("memory.max"), &limit).unwrap();
            if cg.dir.join("memory.swap.max").exists() {
                fs::write(cg.dir.join("memory.swap.max"), "0").unwrap();
            }
        } else {
            fs::write(cg.dir.join("memory.limit_in_bytes"), &limit).unwrap();
            if cg.dir.join("memory.memsw.limit_in_bytes").exists() {
                fs::write(cg.dir.join("memory.memsw.limit_in_bytes"), &limit).unwrap();
            }
        }
        Some(cg)
    }

    /// Runs `script` with sh inside the cgroup and reaps it; its exit code, as a monitor
    /// reports it (128 + the signal for a killed process).
    fn run(&self, script: &str) -> i32 {
        let procs = self.dir.join("cgroup.procs");
        let status = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("echo 0 > {} && exec {script}", procs.display()))
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
    }

    /// Removes the cgroup as soon as the kernel lets it go, as systemd does with a scope.
    fn remove_now(&self) {
        let start = Instant::now();
        while fs::remove_dir(&self.dir).is_err() && self.dir.exists() {
            assert!(start.elapsed() < Duration::from_secs(5), "cgroup {} stays busy", self.dir.display());
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
        let _ = fs::remove_dir(&self.pod);
    }
}

/// The test's cgroup, or None (said on stderr) where it cannot be made here.
fn cgroup_or_skip(name: &str) -> Option<TestCgroup> {
    if !is_root() {
        eprintln!("skipped: needs root");
        return None;
    }
    let cg = TestCgroup::new(name);
    if cg.is_none() {
        eprintln!("skipped: no memory cgroup controller on this node");
    }
    cg
}

#[test]
fn a_kill_is_counted_when_the_cgroup_goes_with_the_process() {
    let Some(cg) = cgroup_or_skip("oom") else { return };
    let watch = OomWatch::start(&cg.dir);
    let exit = cg.run("dd if=/dev/zero of=/dev/null bs=64M");
    assert_eq!(exit, 137, "the kernel's OOM killer ends dd with SIGKILL");
    cg.remove_now();
    // What a read after the exit finds: nothing, the failure this watch exists for.
    assert_eq!(oom_kill_count(&cg.dir), None);
    assert!(watch.finish(exit), "the kill was counted while the cgroup lived");
}

#[test]
fn an_ordinary_exit_is_no_kill() {
    let Some(cg) = cgroup_or_skip("no-oom") else { return };
    let watch = OomWatch::start(&cg.dir);
    // Close to the limit, never past it.
    let exit = cg.run("dd if=/dev/zero of=/dev/null bs=4M count=2");
    assert_eq!(exit, 0);
    cg.remove_now();
    assert!(!watch.finish(exit));
}

#[test]
fn a_kill_is_counted_when_the_cgroup_stays() {
    let Some(cg) = cgroup_or_skip("oom-kept") else { return };
    let watch = OomWatch::start(&cg.dir);
    // Killed after a delay, as a container that grows into its limit.
    let exit = cg.run("sh -c 'sleep 1; exec dd if=/dev/zero of=/dev/null bs=64M'");
    assert_eq!(exit, 137);
    assert_eq!(oom_kill_count(&cg.dir), Some(1));
    assert!(watch.finish(exit));
}
