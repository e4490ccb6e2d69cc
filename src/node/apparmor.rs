//! AppArmor on the node: whether it is on, the runtime's default profile (loaded at start
//! with apparmor_parser), and whether a profile a request names is loaded.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The profile a container gets for `RuntimeDefault`.
pub const DEFAULT_PROFILE: &str = "swapcri-default";

/// What the kernel lists of loaded profiles.
const PROFILES: &str = "/sys/kernel/security/apparmor/profiles";

/// Whether the kernel enforces AppArmor.
pub fn enabled() -> bool {
    std::fs::read_to_string("/sys/module/apparmor/parameters/enabled").map(|s| s.trim() == "Y").unwrap_or(false)
}

/// The default profile: everything a container normally does, without writing the kernel's
/// tunables, reading its memory or security state, mounting, or tracing processes outside it.
pub fn default_profile_text(name: &str) -> String {
    format!(
        r#"#include <tunables/global>

profile {name} flags=(attach_disconnected,mediate_deleted) {{
  #include <abstractions/base>

  network,
  capability,
  file,
  umount,
  signal (receive) peer=unconfined,
  signal (send,receive) peer={name},
  ptrace (trace,read,tracedby,readby) peer={name},

  deny mount,
  deny @{{PROC}}/* w,
  deny @{{PROC}}/sys/[^k]** w,
  deny @{{PROC}}/sys/kernel/{{?,??,[^s][^h][^m]**}} w,
  deny @{{PROC}}/sysrq-trigger rwklx,
  deny @{{PROC}}/kcore rwklx,
  deny /sys/[^f]*/** wklx,
  deny /sys/f[^s]*/** wklx,
  deny /sys/fs/[^c]*/** wklx,
  deny /sys/fs/c[^g]*/** wklx,
  deny /sys/fs/cg[^r]*/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/kernel/security/** rwklx,
}}
"#
    )
}

/// Loads (or replaces) the default profile with `parser` (apparmor_parser).
pub fn load_default(parser: &Path) -> Result<(), String> {
    let mut child = Command::new(parser)
        .args(["--replace", "--skip-cache"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", parser.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(default_profile_text(DEFAULT_PROFILE).as_bytes()).map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("{} {}: {}", parser.display(), out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}

/// Whether `name` is among the loaded profiles (`name (mode)` per line).
pub fn is_loaded_in(profiles: &str, name: &str) -> bool {
    profiles.lines().any(|line| line.rsplit_once(" (").map(|(n, _)| n) == Some(name))
}

/// Whether the kernel has a profile called `name` loaded.
pub fn is_loaded(name: &str) -> std::io::Result<bool> {
    Ok(is_loaded_in(&std::fs::read_to_string(PROFILES)?, name))
}

/// At start: the default profile's name once it is loaded; None (with a warning) when
/// AppArmor is off (`enabled`, as probed) or the profile cannot be loaded.
pub fn probe_default(enabled: bool) -> Option<String> {
    if !enabled {
        return None;
    }
    let parser = ["/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"].into_iter().map(Path::new).find(|p| p.exists());
    let Some(parser) = parser else {
        tracing::warn!(
            "AppArmor is enabled but apparmor_parser is not installed: RuntimeDefault AppArmor requests are refused"
        );
        return None;
    };
    match load_default(parser) {
        Ok(()) => Some(DEFAULT_PROFILE.to_string()),
        Err(e) => {
            tracing::warn!(error = %e, "cannot load the default AppArmor profile: RuntimeDefault AppArmor requests are refused");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_profiles_are_matched_by_whole_name() {
        let listed =
            "swapcri-default (enforce)\ncri-validate-apparmor-test-deny-write (enforce)\n/usr/bin/man (complain)\n";
        for (name, want) in [
            ("swapcri-default", true),
            ("cri-validate-apparmor-test-deny-write", true),
            ("/usr/bin/man", true),
            ("cri-validate-apparmor-test", false),
            ("non-existent-profile", false),
            ("", false),
        ] {
            assert_eq!(is_loaded_in(listed, name), want, "{name}");
        }
    }

    #[test]
    fn the_default_profile_names_itself_as_its_peer() {
        let text = default_profile_text("p1");
        assert!(text.contains("profile p1 flags="));
        assert!(text.contains("peer=p1,"));
        assert!(text.contains("deny mount,"));
        // Balanced braces: the template's escapes came out right.
        assert_eq!(text.matches('{').count(), text.matches('}').count());
    }
}
