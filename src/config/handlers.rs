//! `[runtime.handlers.<name>]`: the OCI runtimes offered as RuntimeClass handlers. The
//! built-in `runc` handler is always there; handlers named in the file add to it (a table
//! named `runc` replaces its settings).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

use crate::model::handler::{Engine, HandlerSpec};

/// The built-in handler's name.
pub const BUILTIN_HANDLER: &str = "runc";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandlerConfig {
    /// Which runtime the binary is, "runc" or "crun" (default: by the binary's file name, or
    /// the handler's name when no binary is given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    /// Path of the OCI runtime binary (default: /usr/sbin/runc or /usr/bin/crun).
    #[serde(skip_serializing_if = "path_is_empty")]
    pub binary: PathBuf,
    /// The runtime's own state directory (`--root`; default: `<run_root>/<handler name>`).
    #[serde(skip_serializing_if = "path_is_empty")]
    pub root: PathBuf,
    /// Create without pivot_root, for root filesystems pivot_root cannot leave (initramfs).
    pub no_pivot: bool,
    /// Prefixes of runtime-interpreted annotations (`org.systemd.property.`, `run.oci.`,
    /// `module.wasm.image/`, `io.katacontainers.`) that pods of this handler may set; others
    /// of those are not passed to the runtime.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_annotations: Vec<String>,
}

fn path_is_empty(p: &Path) -> bool {
    p.as_os_str().is_empty()
}

impl HandlerConfig {
    /// The handler with its defaults filled in.
    pub fn resolve(&self, name: &str, run_root: &Path) -> HandlerSpec {
        let engine = self.engine.unwrap_or_else(|| match path_is_empty(&self.binary) {
            true => Engine::of_binary(Path::new(name)),
            false => Engine::of_binary(&self.binary),
        });
        let binary = match (path_is_empty(&self.binary), engine) {
            (false, _) => self.binary.clone(),
            (true, Engine::Runc) => PathBuf::from("/usr/sbin/runc"),
            (true, Engine::Crun) => PathBuf::from("/usr/bin/crun"),
        };
        let root = if path_is_empty(&self.root) { run_root.join(name) } else { self.root.clone() };
        HandlerSpec {
            name: name.to_string(),
            engine,
            binary,
            root,
            no_pivot: self.no_pivot,
            systemd_cgroup: false,
            allowed_annotations: self.allowed_annotations.clone(),
        }
    }
}

/// The built-in handler alone.
pub fn builtin() -> BTreeMap<String, HandlerConfig> {
    BTreeMap::from([(BUILTIN_HANDLER.to_string(), HandlerConfig::default())])
}

/// Handlers from the file, added to the built-in one.
pub fn with_builtin<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, HandlerConfig>, D::Error> {
    let mut handlers = builtin();
    handlers.extend(BTreeMap::<String, HandlerConfig>::deserialize(d)?);
    Ok(handlers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_engine_and_the_name() {
        let run = Path::new("/run/swapcri");
        let cases = [
            ("runc", HandlerConfig::default(), Engine::Runc, "/usr/sbin/runc", "/run/swapcri/runc"),
            ("crun", HandlerConfig::default(), Engine::Crun, "/usr/bin/crun", "/run/swapcri/crun"),
            (
                "fast",
                HandlerConfig { binary: "/opt/crun-1.19/bin/crun".into(), ..Default::default() },
                Engine::Crun,
                "/opt/crun-1.19/bin/crun",
                "/run/swapcri/fast",
            ),
            (
                "runc-new",
                HandlerConfig { binary: "/usr/local/sbin/runc".into(), root: "/run/r".into(), ..Default::default() },
                Engine::Runc,
                "/usr/local/sbin/runc",
                "/run/r",
            ),
            (
                "odd",
                HandlerConfig { engine: Some(Engine::Crun), binary: "/opt/oci".into(), ..Default::default() },
                Engine::Crun,
                "/opt/oci",
                "/run/swapcri/odd",
            ),
        ];
        for (name, config, engine, binary, root) in cases {
            let spec = config.resolve(name, run);
            assert_eq!(
                (spec.engine, spec.binary.to_str().unwrap(), spec.root.to_str().unwrap()),
                (engine, binary, root)
            );
            assert_eq!(spec.name, name);
        }
    }
}
