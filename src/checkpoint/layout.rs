//! What a checkpoint archive holds, by the names CRI-O and containerd give its files.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// CRIU's image files (and the runtime's `descriptors.json`, the container's stdio).
pub const CHECKPOINT_DIR: &str = "checkpoint";
/// `ConfigDump`, JSON.
pub const CONFIG_DUMP: &str = "config.dump";
/// The container's OCI spec, JSON.
pub const SPEC_DUMP: &str = "spec.dump";
/// What the container added or changed in its root filesystem, a tar.
pub const ROOTFS_DIFF: &str = "rootfs-diff.tar";
/// What it deleted from its image's files: a JSON list of absolute paths.
pub const DELETED_FILES: &str = "deleted.files";
/// The container's log as it was at the checkpoint.
pub const CONTAINER_LOG: &str = "container.log";
/// CRIU's log of the dump.
pub const DUMP_LOG: &str = "dump.log";

/// CRI-O restores a container's annotations from this annotation of spec.dump (a JSON map),
/// and refuses an archive without it.
pub const CRIO_ANNOTATIONS: &str = "io.kubernetes.cri-o.Annotations";
/// The labels, the same way.
pub const CRIO_LABELS: &str = "io.kubernetes.cri-o.Labels";
/// An OCI image built from a checkpoint archive (as `buildah` builds them for Kubernetes)
/// carries this manifest annotation, the checkpointed container's name.
pub const CHECKPOINT_IMAGE_ANNOTATION: &str = "io.kubernetes.cri-o.annotations.checkpoint.name";

/// config.dump: who the container was, as Podman, CRI-O and containerd record it (times in
/// RFC 3339, as Go writes them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigDump {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rootfs_image: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rootfs_image_ref: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rootfs_image_name: String,
    #[serde(default, rename = "runtime", skip_serializing_if = "String::is_empty")]
    pub oci_runtime: String,
    #[serde(default)]
    pub created_time: String,
    #[serde(default, rename = "checkpointedTime")]
    pub checkpointed_time: String,
    #[serde(default)]
    pub restored_time: String,
    #[serde(default)]
    pub restored: bool,
}

/// A time in nanoseconds since the epoch as Go's JSON writes a `time.Time`.
pub fn go_time(nanos: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(nanos).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// spec.dump: the container's OCI spec with its CRI annotations and labels where CRI-O
/// looks for them, so either runtime can restore the archive.
pub fn spec_dump(
    spec: &[u8],
    annotations: &HashMap<String, String>,
    labels: &HashMap<String, String>,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut spec: serde_json::Value = serde_json::from_slice(spec)?;
    let sorted =
        |m: &HashMap<String, String>| serde_json::to_string(&m.iter().collect::<std::collections::BTreeMap<_, _>>());
    let (annotations, labels) = (sorted(annotations)?, sorted(labels)?);
    if let Some(object) = spec.as_object_mut() {
        let entry = object.entry("annotations").or_insert_with(|| serde_json::json!({}));
        if let Some(map) = entry.as_object_mut() {
            map.insert(CRIO_ANNOTATIONS.into(), annotations.into());
            map.insert(CRIO_LABELS.into(), labels.into());
        }
    }
    serde_json::to_vec_pretty(&spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_dump_uses_the_field_names_checkpointctl_reads() {
        let dump = ConfigDump {
            id: "abc".into(),
            name: "counter".into(),
            rootfs_image_name: "docker.io/library/busybox:1.36".into(),
            oci_runtime: "runc".into(),
            created_time: go_time(1_700_000_000_123_456_789),
            ..Default::default()
        };
        let json: serde_json::Value = serde_json::to_value(&dump).unwrap();
        for key in ["id", "name", "rootfsImageName", "runtime", "createdTime", "checkpointedTime", "restored"] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
        assert_eq!(json["createdTime"], "2023-11-14T22:13:20.123456789Z");
        assert!(json.get("rootfsImageRef").is_none(), "empty strings are left out: {json}");
        // What CRI-O or containerd wrote reads back, fields this build ignores included.
        let theirs = r#"{"id":"x","name":"n","rootfsImageRef":"sha256:1","createdTime":"2024-01-01T00:00:00Z","checkpointedTime":"2024-01-02T00:00:00Z","restoredTime":"0001-01-01T00:00:00Z","restored":false,"extra":1}"#;
        let read: ConfigDump = serde_json::from_str(theirs).unwrap();
        assert_eq!(
            (read.rootfs_image_ref.as_str(), read.checkpointed_time.as_str()),
            ("sha256:1", "2024-01-02T00:00:00Z")
        );
    }

    #[test]
    fn spec_dump_carries_the_cri_annotations_crio_restores_from() {
        let cases: [(&str, &str); 3] = [
            (r#"{"ociVersion":"1.2.0","annotations":{"a":"1"}}"#, r#"{"a":"1"}"#),
            (r#"{"ociVersion":"1.2.0"}"#, "{}"),
            (r#"{"ociVersion":"1.2.0","annotations":{}}"#, "{}"),
        ];
        let annotations = HashMap::from([("io.kubernetes.container.hash".to_string(), "1a2b".to_string())]);
        let labels = HashMap::from([("app".to_string(), "counter".to_string())]);
        for (spec, kept) in cases {
            let out: serde_json::Value =
                serde_json::from_slice(&spec_dump(spec.as_bytes(), &annotations, &labels).unwrap()).unwrap();
            let map = out["annotations"].as_object().unwrap();
            let inner: HashMap<String, String> = serde_json::from_str(map[CRIO_ANNOTATIONS].as_str().unwrap()).unwrap();
            assert_eq!(inner, annotations, "{spec}");
            assert_eq!(map[CRIO_LABELS], r#"{"app":"counter"}"#, "{spec}");
            let others: serde_json::Value = serde_json::from_str(kept).unwrap();
            for (k, v) in others.as_object().unwrap() {
                assert_eq!(&map[k], v, "{spec}: the spec's own annotations stay");
            }
        }
        assert!(spec_dump(b"not json", &annotations, &labels).is_err());
    }
}
