//! The CRIU that checkpoints and restores run, as the configuration names it, and where
//! their work lies while it lasts.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// Where checkpoints gather their files and restores unpack archives, one directory each, on
/// the state root's disk (a dump is as large as the container's memory); what a crash leaves
/// there is removed at start.
const STAGING: &str = "checkpoints";

/// A new working directory under the state root's staging directory, removed when dropped.
pub(in crate::service) fn stage(state_root: &Path, prefix: &str) -> Result<tempfile::TempDir, Error> {
    crate::blocking::check("making a checkpoint working directory");
    let staging = state_root.join(STAGING);
    crate::store::private::create_dir_all(&staging).map_err(Error::io(staging.display()))?;
    tempfile::Builder::new().prefix(prefix).tempdir_in(&staging).map_err(Error::io(staging.display()))
}

/// Removes what an unfinished checkpoint or restore left (at start, before any runs).
pub(in crate::service) fn sweep_stages(state_root: &Path) {
    crate::blocking::check("removing unfinished checkpoint directories");
    for entry in std::fs::read_dir(state_root.join(STAGING)).into_iter().flatten().flatten() {
        tracing::info!(path = %entry.path().display(), "removing what an unfinished checkpoint or restore left");
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

/// The configured CRIU, or FailedPrecondition naming the setting.
pub(in crate::service) fn find_criu(criu: &Path) -> Result<PathBuf, Error> {
    crate::blocking::run(|| crate::checkpoint::criu::find(criu)).ok_or_else(|| {
        Error::FailedPrecondition(format!(
            "CRIU ({}, the [checkpoint] criu setting) is not installed: checkpoints and restores need CRIU 4 or newer",
            criu.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_criu_the_answer_is_a_failed_precondition() {
        let missing = find_criu(Path::new("no-such-criu-here")).unwrap_err();
        assert!(matches!(missing, Error::FailedPrecondition(ref m) if m.contains("not installed")), "{missing:?}");
    }
}
