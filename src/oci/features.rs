//! What an OCI runtime supports: asked of it (`features`) when it answers, else judged by
//! its version (Debian's runc 1.1.5 and crun 1.8.1 have no `features` command).

use std::path::Path;
use std::process::Command;

use serde::Serialize;

use crate::model::handler::Engine;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// The version line the binary printed; empty when it did not run.
    pub version: String,
    /// The binary ran (`--version` answered).
    pub usable: bool,
    /// Recursive read-only mounts (the `rro` mount option).
    pub recursive_read_only: bool,
    /// Id-mapped mounts (user namespaces with mounts mapped to them).
    pub idmap_mounts: bool,
    /// "features" when the runtime answered `features`, "version" when judged by its version.
    pub probed_by: &'static str,
    /// Why the binary is unusable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub fn probe(engine: Engine, binary: &Path) -> Features {
    let version = match Command::new(binary).arg("--version").output() {
        Ok(out) if out.status.success() => {
            String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_string()
        }
        Ok(out) => return unusable(format!("{} --version failed: {}", binary.display(), out.status)),
        Err(e) => return unusable(format!("{}: {e}", binary.display())),
    };
    let answered = Command::new(binary)
        .arg("features")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok());
    match answered {
        Some(doc) => from_features(version, &doc),
        None => from_version(engine, version),
    }
}

fn unusable(error: String) -> Features {
    Features { probed_by: "version", error: Some(error), ..Features::default() }
}

/// From the `features` document (OCI runtime-spec features.md).
fn from_features(version: String, doc: &serde_json::Value) -> Features {
    let options = doc["mountOptions"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    Features {
        version,
        usable: true,
        recursive_read_only: options.iter().any(|o| o == "rro"),
        idmap_mounts: doc["linux"]["mountExtensions"]["idmap"]["enabled"].as_bool().unwrap_or(false),
        probed_by: "features",
        error: None,
    }
}

/// runc gained `rro` and id-mapped mounts in 1.2; crun had `rro` by 1.8 and reliable
/// id-mapped mounts from 1.9 (1.8.1 maps bind mounts wrongly).
fn from_version(engine: Engine, version: String) -> Features {
    let at_least = |major, minor| parse_version(&version).is_some_and(|v| v >= (major, minor));
    let (rro, idmap) = match engine {
        Engine::Runc => (at_least(1, 2), at_least(1, 2)),
        Engine::Crun => (at_least(1, 8), at_least(1, 9)),
    };
    Features { version, usable: true, recursive_read_only: rro, idmap_mounts: idmap, probed_by: "version", error: None }
}

/// "runc version 1.1.5" / "crun version 1.8.1" → (1, 1) / (1, 8).
fn parse_version(line: &str) -> Option<(u32, u32)> {
    let v = line.split_whitespace().find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judged_by_version() {
        let cases = [
            (Engine::Runc, "runc version 1.1.5", false, false),
            (Engine::Runc, "runc version 1.4.3", true, true),
            (Engine::Runc, "runc version 1.2.0-rc.1", true, true),
            (Engine::Crun, "crun version 1.8.1", true, false),
            (Engine::Crun, "crun version 1.9", true, true),
            (Engine::Crun, "crun version 1.7", false, false),
            (Engine::Runc, "garbage", false, false),
        ];
        for (engine, line, rro, idmap) in cases {
            let f = from_version(engine, line.into());
            assert_eq!((f.recursive_read_only, f.idmap_mounts), (rro, idmap), "{line}");
            assert_eq!(f.probed_by, "version");
        }
    }

    #[test]
    fn read_from_the_features_document() {
        let doc = serde_json::json!({
            "mountOptions": ["ro", "rro", "nosuid"],
            "linux": {"mountExtensions": {"idmap": {"enabled": true}}},
        });
        let f = from_features("runc version 1.4.3".into(), &doc);
        assert!(f.recursive_read_only && f.idmap_mounts && f.usable);
        let f = from_features("x".into(), &serde_json::json!({"mountOptions": ["ro"]}));
        assert!(!f.recursive_read_only && !f.idmap_mounts);
    }

    #[test]
    fn a_missing_binary_is_unusable() {
        let f = probe(Engine::Runc, Path::new("/nonexistent/runc"));
        assert!(!f.usable && f.error.is_some());
    }
}
