//! Container annotations reach the OCI spec, where runtimes read some of them as settings:
//! runc and crun turn `org.systemd.property.*` into properties of the container's systemd
//! unit, crun reads `run.oci.*` (hooks, groups, seccomp behaviour) and `module.wasm.image/*`,
//! Kata reads `io.katacontainers.*`. Those pass only where the handler's
//! `allowed_annotations` names them (as CRI-O's option of that name); the rest pass as they are.

use std::collections::HashMap;

/// Prefixes of annotations that configure a runtime.
pub const INTERPRETED: [&str; 4] = ["org.systemd.property.", "run.oci.", "module.wasm.image/", "io.katacontainers."];

/// The request's annotations without the runtime-interpreted ones `allowed` does not cover
/// (each `allowed` entry is a prefix); what is dropped is named in `warnings`.
pub fn filter(
    annotations: &HashMap<String, String>,
    allowed: &[String],
    warnings: &mut Vec<String>,
) -> HashMap<String, String> {
    let mut dropped: Vec<&str> = Vec::new();
    let kept = annotations
        .iter()
        .filter(|(key, _)| {
            let interpreted = INTERPRETED.iter().any(|p| key.starts_with(p));
            let pass = !interpreted || allowed.iter().any(|a| key.starts_with(a.as_str()));
            if !pass {
                dropped.push(key);
            }
            pass
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !dropped.is_empty() {
        dropped.sort();
        warnings.push(format!(
            "annotations the runtime would act on were not passed (the handler's allowed_annotations does not list them): {}",
            dropped.join(", ")
        ));
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_annotations_pass_only_when_allowed() {
        let annotations: HashMap<String, String> = [
            ("org.systemd.property.DeviceAllow", "'/dev/sda rwm'"),
            ("run.oci.hooks.stdout", "/tmp/x"),
            ("io.kubernetes.container.hash", "abc"),
            ("example.com/owner", "team"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let keys = |m: &HashMap<String, String>| {
            let mut k: Vec<String> = m.keys().cloned().collect();
            k.sort();
            k
        };
        let mut warnings = Vec::new();
        let kept = filter(&annotations, &[], &mut warnings);
        assert_eq!(keys(&kept), ["example.com/owner", "io.kubernetes.container.hash"]);
        assert!(warnings[0].contains("org.systemd.property.DeviceAllow, run.oci.hooks.stdout"), "{warnings:?}");
        let mut warnings = Vec::new();
        let kept = filter(&annotations, &["run.oci.".to_string()], &mut warnings);
        assert_eq!(keys(&kept), ["example.com/owner", "io.kubernetes.container.hash", "run.oci.hooks.stdout"]);
        assert_eq!(warnings.len(), 1);
    }
}
