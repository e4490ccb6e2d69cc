//! Capability names and sets.

/// Capability names by number (linux/capability.h).
const NAMES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

pub const CAP_SYS_RESOURCE: u32 = 24;

/// What containers get unless they add or drop capabilities (as containerd and CRI-O).
pub const DEFAULT: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// Names of the capabilities set in a mask (as in /proc/self/status `CapBnd`).
pub fn names_in_mask(mask: u64) -> Vec<String> {
    NAMES.iter().enumerate().filter(|(i, _)| mask & (1u64 << i) != 0).map(|(_, n)| n.to_string()).collect()
}

/// A hex mask line from /proc/<pid>/status, e.g. `CapBnd:\t000001fffeffffff`.
pub fn mask_from_status(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').and_then(|v| u64::from_str_radix(v.trim(), 16).ok()))
}

/// `NET_ADMIN` or `CAP_NET_ADMIN` → `CAP_NET_ADMIN`.
pub fn normalize(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    }
}

pub fn is_known(name: &str) -> bool {
    NAMES.contains(&name)
}

/// The container's set: defaults (or all the daemon holds, for privileged), with the
/// request's changes: `ALL` added, `ALL` dropped, single adds, then single drops (a
/// capability both added and dropped is dropped). Never more than `held`.
pub fn container_set(
    add: &[String],
    drop: &[String],
    privileged: bool,
    held: &[String],
) -> Result<Vec<String>, String> {
    let is_all = |v: &String| v.eq_ignore_ascii_case("ALL");
    let mut set: Vec<String> = if privileged { held.to_vec() } else { DEFAULT.iter().map(|s| s.to_string()).collect() };
    if add.iter().any(is_all) {
        set = held.to_vec();
    }
    if drop.iter().any(is_all) {
        set.clear();
    }
    for a in add.iter().filter(|a| !is_all(a)) {
        let name = normalize(a);
        if !is_known(&name) {
            return Err(format!("unknown capability {a:?}"));
        }
        if !set.contains(&name) {
            set.push(name);
        }
    }
    for d in drop.iter().filter(|d| !is_all(d)) {
        let name = normalize(d);
        if !is_known(&name) {
            return Err(format!("unknown capability {d:?}"));
        }
        set.retain(|c| *c != name);
    }
    set.retain(|c| held.contains(c));
    set.sort();
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_sets() {
        let held = names_in_mask(0x1fffeffffff);
        assert!(!held.contains(&"CAP_SYS_RESOURCE".to_string()));
        assert!(held.contains(&"CAP_SYS_ADMIN".to_string()));
        assert_eq!(mask_from_status("CapInh:\t0\nCapBnd:\t000001fffeffffff\n", "CapBnd"), Some(0x1fffeffffff));
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let all_but_admin = container_set(&s(&["ALL"]), &s(&["SYS_ADMIN"]), false, &held).unwrap();
        assert!(!all_but_admin.contains(&"CAP_SYS_ADMIN".to_string()), "single drops apply after add ALL");
        assert_eq!(all_but_admin.len(), held.len() - 1);
        let minimal = container_set(&s(&["NET_ADMIN"]), &s(&["ALL"]), false, &held).unwrap();
        assert_eq!(minimal, s(&["CAP_NET_ADMIN"]));
        let defaults = container_set(&[], &s(&["KILL"]), false, &held).unwrap();
        assert_eq!(defaults.len(), DEFAULT.len() - 1);
        let privileged = container_set(&[], &[], true, &held).unwrap();
        assert_eq!(privileged.len(), held.len(), "privileged gets what the daemon holds, no more");
        assert!(!container_set(&s(&["SYS_RESOURCE"]), &[], false, &held)
            .unwrap()
            .contains(&"CAP_SYS_RESOURCE".to_string()));
        assert!(container_set(&s(&["BOGUS"]), &[], false, &held).is_err());
    }
}
