//! Pure conversions between CRI messages and the service types.

use std::collections::HashMap;
use std::path::Path;

use crate::cri;
use base64::Engine as _;
use oci_client::secrets::RegistryAuth;

use crate::error::Error;
use crate::image::FsUsage;
use crate::service::{ImageView, RuntimeStatus, VersionInfo};

/// The image reference of a request's ImageSpec; required and non-empty.
pub fn image_reference(spec: Option<&cri::ImageSpec>) -> Result<&str, Error> {
    match spec.map(|s| s.image.as_str()) {
        Some(image) if !image.is_empty() => Ok(image),
        _ => Err(Error::InvalidArgument("image spec with a non-empty image is required".into())),
    }
}

/// Registry credentials from a PullImage AuthConfig.
pub fn credentials(auth: Option<&cri::AuthConfig>) -> Result<RegistryAuth, Error> {
    let Some(auth) = auth else {
        return Ok(RegistryAuth::Anonymous);
    };
    if !auth.registry_token.is_empty() {
        return Ok(RegistryAuth::Bearer(auth.registry_token.clone()));
    }
    if !auth.identity_token.is_empty() {
        return Err(Error::InvalidArgument(
            "identity tokens are not supported; pass username and password or a registry token".into(),
        ));
    }
    if !auth.username.is_empty() || !auth.password.is_empty() {
        return Ok(RegistryAuth::Basic(auth.username.clone(), auth.password.clone()));
    }
    if !auth.auth.is_empty() {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.auth.trim())
            .map_err(|e| Error::InvalidArgument(format!("auth is not base64: {e}")))?;
        let text = String::from_utf8(decoded).map_err(|_| Error::InvalidArgument("auth is not UTF-8".into()))?;
        let (user, password) =
            text.split_once(':').ok_or_else(|| Error::InvalidArgument("auth must encode user:password".into()))?;
        return Ok(RegistryAuth::Basic(user.to_string(), password.to_string()));
    }
    Ok(RegistryAuth::Anonymous)
}

/// The image config's `User` split the CRI way: a numeric user is a uid, else a name.
pub fn image_user(user: &str) -> (Option<i64>, String) {
    let name = user.split(':').next().unwrap_or("");
    if name.is_empty() {
        return (None, String::new());
    }
    match name.parse::<i64>() {
        Ok(uid) => (Some(uid), String::new()),
        Err(_) => (None, name.to_string()),
    }
}

pub fn image(view: ImageView) -> cri::Image {
    let (uid, username) = image_user(&view.record.user);
    cri::Image {
        id: view.record.id.to_string(),
        repo_tags: view.record.repo_tags.into_iter().collect(),
        repo_digests: view.record.repo_digests.into_iter().collect(),
        size: view.size,
        uid: uid.map(|value| cri::Int64Value { value }),
        username,
        spec: Some(cri::ImageSpec { image: view.record.id.to_string(), ..Default::default() }),
        pinned: view.pinned,
    }
}

pub fn fs_usage(mountpoint: &Path, usage: FsUsage) -> cri::FilesystemUsage {
    cri::FilesystemUsage {
        timestamp: now_nanos(),
        fs_id: Some(cri::FilesystemIdentifier { mountpoint: mountpoint.display().to_string() }),
        used_bytes: Some(cri::UInt64Value { value: usage.bytes }),
        inodes_used: Some(cri::UInt64Value { value: usage.inodes }),
    }
}

pub fn version(v: VersionInfo) -> cri::VersionResponse {
    cri::VersionResponse {
        version: "0.1.0".into(),
        runtime_name: v.runtime_name.into(),
        runtime_version: v.runtime_version.into(),
        runtime_api_version: v.api_version.into(),
    }
}

pub fn status(s: RuntimeStatus) -> cri::StatusResponse {
    let conditions = s
        .conditions
        .into_iter()
        .map(|c| cri::RuntimeCondition {
            r#type: c.kind.into(),
            status: c.status,
            reason: c.reason,
            message: c.message,
        })
        .collect();
    let host_network = s.handlers.iter().any(|(_, caps)| caps.user_namespaces_host_network);
    let runtime_handlers = s
        .handlers
        .into_iter()
        .map(|(name, caps)| cri::RuntimeHandler {
            name,
            features: Some(cri::RuntimeHandlerFeatures {
                recursive_read_only_mounts: caps.recursive_read_only,
                user_namespaces: caps.user_namespaces,
            }),
        })
        .collect();
    cri::StatusResponse {
        status: Some(cri::RuntimeStatus { conditions }),
        info: s.info.map(|i| HashMap::from([("info".to_string(), i.to_string())])).unwrap_or_default(),
        runtime_handlers,
        // Merge and Strict are applied and ContainerStatus.user reported. A handler that runs
        // user-namespaced pods also runs them on the host's network.
        features: Some(cri::RuntimeFeatures {
            supplemental_groups_policy: true,
            user_namespaces_host_network: host_network,
        }),
    }
}

fn now_nanos() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_users() {
        let cases = [
            ("", (None, "")),
            ("0", (Some(0), "")),
            ("1000", (Some(1000), "")),
            ("1000:1000", (Some(1000), "")),
            ("nobody", (None, "nobody")),
            ("www-data:www-data", (None, "www-data")),
            (":100", (None, "")),
        ];
        for (input, (uid, name)) in cases {
            assert_eq!(image_user(input), (uid, name.to_string()), "{input}");
        }
    }

    #[test]
    fn credentials_from_auth_config() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("alice:s3cret:x");
        let cases: [(cri::AuthConfig, Result<RegistryAuth, ()>); 5] = [
            (cri::AuthConfig::default(), Ok(RegistryAuth::Anonymous)),
            (
                cri::AuthConfig { username: "u".into(), password: "p".into(), ..Default::default() },
                Ok(RegistryAuth::Basic("u".into(), "p".into())),
            ),
            (
                cri::AuthConfig { auth: b64, ..Default::default() },
                Ok(RegistryAuth::Basic("alice".into(), "s3cret:x".into())),
            ),
            (
                cri::AuthConfig { registry_token: "t".into(), ..Default::default() },
                Ok(RegistryAuth::Bearer("t".into())),
            ),
            (cri::AuthConfig { auth: "!!!".into(), ..Default::default() }, Err(())),
        ];
        for (config, expected) in cases {
            let got = credentials(Some(&config)).map_err(|_| ());
            assert_eq!(format!("{got:?}"), format!("{expected:?}"), "{config:?}");
        }
        assert!(matches!(credentials(None), Ok(RegistryAuth::Anonymous)));
    }

    #[test]
    fn image_spec_is_required() {
        assert!(image_reference(None).is_err());
        assert!(image_reference(Some(&cri::ImageSpec::default())).is_err());
        let spec = cri::ImageSpec { image: "busybox".into(), ..Default::default() };
        assert_eq!(image_reference(Some(&spec)).unwrap(), "busybox");
    }
}
