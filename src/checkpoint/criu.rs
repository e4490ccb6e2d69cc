//! Finding the CRIU a checkpoint or restore runs, and the configuration a restore gives it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// `criu` as configured: an absolute path to an executable file, or a name found in PATH.
pub fn find(criu: &Path) -> Option<PathBuf> {
    crate::blocking::check("looking for CRIU");
    let runnable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if criu.is_absolute() {
        return runnable(criu).then(|| criu.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).map(|d| d.join(criu)).find(|p| runnable(p))
}

/// The OCI annotation runc and crun read the path of a restore's CRIU configuration file
/// from; its settings override the ones the runtime sends CRIU.
pub const CONFIG_ANNOTATION: &str = "org.criu.config";

/// The CRIU configuration a restore runs with: the node's own for the runtime (`node`, the
/// runtime's default file, which the annotation replaces), then cgroups left alone. Without
/// that, CRIU puts the processes back into the cgroups they were dumped from (runc before 1.2
/// gives it no new root on cgroup v2): the old pod's, without the new request's limits. Left
/// alone, they stay where the runtime put CRIU: the new container's cgroup.
pub fn restore_config(node: Option<&str>) -> String {
    let mut config = node.unwrap_or_default().trim_end().to_string();
    if !config.is_empty() {
        config.push('\n');
    }
    // `=`: CRIU splits a line at its first space, and this option's value is optional.
    config.push_str("manage-cgroups=ignore\n");
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_leaves_cgroups_to_the_runtime_after_the_nodes_settings() {
        let cases = [
            (None, "manage-cgroups=ignore\n"),
            (Some(""), "manage-cgroups=ignore\n"),
            (Some("tcp-established\n\n"), "tcp-established\nmanage-cgroups=ignore\n"),
            // The node's own cgroup mode comes first, so this one wins.
            (Some("manage-cgroups=full"), "manage-cgroups=full\nmanage-cgroups=ignore\n"),
        ];
        for (node, want) in cases {
            assert_eq!(restore_config(node), want, "{node:?}");
        }
    }

    #[test]
    fn criu_is_found_by_path_or_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let criu = dir.path().join("criu");
        std::fs::write(&criu, "#!/bin/sh\n").unwrap();
        assert_eq!(find(&criu), None, "not executable");
        std::fs::set_permissions(&criu, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find(&criu), Some(criu));
        assert_eq!(find(Path::new("sh")).unwrap().file_name().unwrap(), "sh");
        assert_eq!(find(Path::new("no-such-criu-here")), None);
    }
}
