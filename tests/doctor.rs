//! `swapcri doctor` on this machine: every check answers, JSON parses, the exit code
//! follows the failures.

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
    let any_fail = checks.iter().any(|c| c["status"] == "fail");
    assert_eq!(code, if any_fail { 1 } else { 0 });
    let eviction = checks.iter().find(|c| c["name"] == "eviction threshold").unwrap();
    assert!(eviction["found"].as_str().unwrap().contains("vm.min_free_kbytes"), "{eviction}");

    let (code, text) = doctor(&[]);
    assert!(text.lines().any(|l| l.contains("tmpfs noswap")), "{text}");
    assert!(code == 0 || code == 1);
    let (code, text) = doctor(&["--eviction-threshold", "a lot"]);
    assert_eq!(code, 1);
    assert!(text.contains("--eviction-threshold"), "{text}");
}
