//! `swapcri doctor` on the node the test runs on: each check's outcome is the one this
//! node's facts call for, and the exit code follows the failures.

mod common;

use std::process::Command;

fn doctor(args: &[&str]) -> (i32, String) {
    let config = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_swapcri"))
        .arg("--config")
        .arg(config.path())
        .arg("doctor")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn doctor_checks_this_node() {
    let (code, json) = doctor(&["--json", "--eviction-threshold", "5%"]);
    let checks: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    for name in [
        "swap",
        "swap encryption",
        "cgroup v2",
        "tmpfs noswap",
        "kubelet tmpfs volumes",
        "eviction threshold",
        "control plane",
        "zswap / zram",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let status =
        |name: &str| checks.iter().find(|c| c["name"] == name).unwrap()["status"].as_str().unwrap().to_string();
    let facts = common::node::probe();
    let swap_on = facts.swap_total > 0;
    assert_eq!(status("swap"), if swap_on { "ok" } else { "warn" }, "{facts:?}");
    let cgroup = match (facts.cgroup_v2, facts.swap_accounting, swap_on) {
        (true, true, _) => "ok",
        (true, false, true) | (false, _, true) => "fail",
        (true, false, false) | (false, _, false) => "warn",
    };
    assert_eq!(status("cgroup v2"), cgroup, "{facts:?}");
    assert_eq!(status("tmpfs noswap"), if facts.kernel >= (6, 4) { "ok" } else { "warn" }, "{facts:?}");
    let control_plane = std::path::Path::new("/etc/kubernetes/manifests/kube-apiserver.yaml").exists();
    assert_eq!(status("control plane"), if control_plane && swap_on { "warn" } else { "ok" });
    // kubelet's 5% against vm.min_free_kbytes: "ok" only when slightly below it (80-100%).
    let min_free: u64 = std::fs::read_to_string("/proc/sys/vm/min_free_kbytes").unwrap().trim().parse().unwrap();
    let (threshold, min_free) = (facts.mem_total * 5 / 100, min_free * 1024);
    let slightly_below = threshold <= min_free && threshold * 10 >= min_free * 8;
    assert_eq!(status("eviction threshold"), if slightly_below { "ok" } else { "warn" });
    let any_fail = checks.iter().any(|c| c["status"] == "fail");
    assert_eq!(code, if any_fail { 1 } else { 0 });
    let eviction = checks.iter().find(|c| c["name"] == "eviction threshold").unwrap();
    assert!(eviction["found"].as_str().unwrap().contains("vm.min_free_kbytes"), "{eviction}");

    // The text form runs the same checks: same exit code.
    let (text_code, text) = doctor(&[]);
    assert!(text.lines().any(|l| l.contains("tmpfs noswap")), "{text}");
    assert_eq!(text_code, code, "{text}");
    let (code, text) = doctor(&["--eviction-threshold", "a lot"]);
    assert_eq!(code, 1);
    assert!(text.contains("--eviction-threshold"), "{text}");
}
