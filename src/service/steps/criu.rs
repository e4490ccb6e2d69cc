//! The CRIU that checkpoints and restores run, as the configuration names it, and where
//! their work lies while it lasts.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// A checkpoint's working directory in the container's state directory: `<prefix><random>`.
pub(in crate::service) const STAGE_PREFIX: &str = "checkpoint-";

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
