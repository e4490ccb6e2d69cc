//! Finding the CRIU a checkpoint or restore runs.

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

#[cfg(test)]
mod tests {
    use super::*;

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
