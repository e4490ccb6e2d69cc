//! `[checkpoint]`: how CheckpointContainer and restores reach CRIU.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::range::{positive, Invalid};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointConfig {
    /// CRIU: a name looked up in PATH, or the absolute path of a file named `criu` (runc and
    /// crun run the `criu` they find in PATH; the daemon puts this one's directory first).
    pub criu: PathBuf,
    /// How long a checkpoint may take when the request gives no timeout of its own.
    pub timeout_seconds: u64,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig { criu: PathBuf::from("criu"), timeout_seconds: 300 }
    }
}

impl CheckpointConfig {
    /// The first value out of its range.
    pub fn check(&self) -> Result<(), Invalid> {
        positive("checkpoint.timeout_seconds", self.timeout_seconds)?;
        if self.criu.file_name().is_none_or(|n| n != "criu") {
            return Err(("checkpoint.criu", format!("{}: the runtimes run a file named criu", self.criu.display())));
        }
        if self.criu.components().count() > 1 && !self.criu.is_absolute() {
            return Err(("checkpoint.criu", format!("{}: a name, or an absolute path", self.criu.display())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_out_of_range_name_their_key() {
        let with = |f: fn(&mut CheckpointConfig)| crate::config::range::refused(CheckpointConfig::check, f);
        assert_eq!(with(|_| {}), None);
        assert_eq!(with(|c| c.timeout_seconds = 0), Some("checkpoint.timeout_seconds"));
        assert_eq!(with(|c| c.criu = "/opt/criu/bin/criu-4".into()), Some("checkpoint.criu"));
        assert_eq!(with(|c| c.criu = "bin/criu".into()), Some("checkpoint.criu"));
        assert_eq!(with(|c| c.criu = "/opt/criu/bin/criu".into()), None);
    }
}
