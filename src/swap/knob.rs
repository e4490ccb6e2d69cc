//! The guard's writes to a group's knobs, and putting them back: through the unit's
//! property where systemd owns the file, to the file otherwise.

use std::path::Path;

use crate::cgroup::control;
use crate::policy::guard::{self, Write};

use super::supervisor::Supervisor;

/// Writes a knob: through the unit's property (a scope's, a pod slice's) where systemd owns the file (so a
/// daemon-reload keeps it; runtime only, gone at the next boot), to the file otherwise.
pub(super) async fn set_knob(sup: &Supervisor, dir: &Path, file: &str, value: &str) -> Result<(), String> {
    if let (Some(systemd), Some((unit, property))) = (&sup.systemd, control::knob_property(dir, file, value)) {
        return systemd.set_properties(&unit, &[property]).await.map_err(|e| e.to_string());
    }
    crate::blocking::run(|| control::write_knob(dir, file, value)).map_err(|e| e.to_string())
}

/// Puts back what the guard wrote, where the files still hold it; the files that were.
pub(super) async fn restore(sup: &Supervisor, dir: &Path, writes: &[Write]) -> Vec<String> {
    let mut restored = Vec::new();
    for w in writes {
        let Some(now) = crate::blocking::run(|| control::read_knob(dir, &w.file)) else { continue };
        if !guard::still_ours(w, &now) {
            continue;
        }
        match set_knob(sup, dir, &w.file, &w.before).await {
            Ok(()) => restored.push(format!("{}={}", w.file, w.before)),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), file = %w.file, error = %e, "swap guard could not put back a value")
            }
        }
    }
    restored
}
