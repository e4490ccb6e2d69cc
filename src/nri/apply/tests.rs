use super::*;
use crate::model::node::CgroupMode;
use crate::nri::adjust::Adjustment;
use crate::nri::plugin::PluginId;

fn node(mode: CgroupMode) -> NodeFacts {
    NodeFacts { min_oom_score_adj: -500, hugepage_sizes: vec!["2MB".into()], ..NodeFacts::fixture(mode) }
}

fn spec() -> Spec {
    serde_json::from_value(json!({
        "ociVersion": "1.0.2",
        "process": {"args": ["sleep", "1"], "env": ["PATH=/bin", "DROP=1"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
        "root": {"path": "rootfs"},
        "mounts": [{"destination": "/cache", "type": "tmpfs", "source": "tmpfs"}],
        "annotations": {"keep": "1", "drop": "1"},
        "linux": {"resources": {"unified": {"memory.swap.max": "100", "cpu.weight": "5"}}}
    }))
    .unwrap()
}

fn adjustment() -> Adjustment {
    let id = PluginId::parse_file_name("10-x").unwrap();
    let mut a = Adjustment::default();
    let adjust = api::ContainerAdjustment {
        annotations: [("added".to_string(), "yes".to_string()), ("-drop".to_string(), String::new())].into(),
        env: vec![
            api::KeyValue { key: "ADDED".into(), value: "1".into() },
            api::KeyValue { key: "-DROP".into(), value: String::new() },
        ],
        mounts: vec![
            api::Mount {
                destination: "/data".into(),
                r#type: "bind".into(),
                source: "/srv".into(),
                options: vec!["rbind".into()],
            },
            api::Mount { destination: "-/cache".into(), ..Default::default() },
        ],
        rlimits: vec![api::PosixRlimit { r#type: "RLIMIT_NOFILE".into(), hard: 1024, soft: 512 }],
        linux: Some(api::LinuxContainerAdjustment {
            oom_score_adj: Some(api::OptionalInt { value: -900 }),
            devices: vec![api::LinuxDevice {
                path: "/dev/fuse".into(),
                r#type: "c".into(),
                major: 10,
                minor: 229,
                ..Default::default()
            }],
            resources: Some(api::LinuxResources {
                cpu: Some(api::LinuxCpu { shares: Some(api::OptionalUInt64 { value: 512 }), ..Default::default() }),
                unified: [("memory.high".to_string(), "999".to_string()), ("io.weight".to_string(), "50".to_string())]
                    .into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    a.merge(&id, &adjust).unwrap();
    a
}

#[test]
fn every_adjusted_field_lands_in_the_spec() {
    let mut s = spec();
    let plan = BTreeMap::from([
        ("memory.swap.max".to_string(), "50".to_string()),
        ("memory.high".to_string(), "999".to_string()),
    ]);
    let warnings = apply_to_spec(&mut s, &adjustment(), &plan, &node(CgroupMode::Unified), &[]).unwrap();
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["annotations"], json!({"keep": "1", "added": "yes"}));
    assert_eq!(v["process"]["env"], json!(["PATH=/bin", "ADDED=1"]));
    assert_eq!(v["process"]["rlimits"], json!([{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 512}]));
    assert_eq!(v["process"]["oomScoreAdj"], json!(-500), "clamped to what the daemon may set");
    assert_eq!(warnings.len(), 1);
    assert_eq!(v["mounts"].as_array().unwrap().len(), 1);
    assert_eq!(v["mounts"][0]["destination"], "/data");
    assert_eq!(v["linux"]["devices"][0]["path"], "/dev/fuse");
    assert_eq!(v["linux"]["resources"]["devices"][0]["allow"], true);
    assert_eq!(v["linux"]["resources"]["cpu"]["shares"], 512);
    // The plan's files replace the unified ones; a plugin's other files are added.
    assert_eq!(
        v["linux"]["resources"]["unified"],
        json!({"memory.swap.max": "50", "memory.high": "999", "cpu.weight": "5", "io.weight": "50"})
    );
}

#[test]
fn unified_files_on_a_node_without_cgroup_v2_are_refused() {
    let mut s = spec();
    let err = apply_to_spec(&mut s, &adjustment(), &BTreeMap::new(), &node(CgroupMode::Hybrid), &[]).unwrap_err();
    assert!(err.contains("io.weight"), "{err}");
}

#[test]
fn cdi_devices_come_from_the_node_specs_and_unknown_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cdi = json!({
        "cdiVersion": "0.6.0",
        "kind": "example.com/card",
        "devices": [{"name": "c0", "containerEdits": {
            "env": ["CARD=0"],
            "deviceNodes": [{"path": "/dev/null", "type": "c", "major": 1, "minor": 3}]
        }}]
    });
    std::fs::write(dir.path().join("card.json"), cdi.to_string()).unwrap();
    let dirs = vec![dir.path().display().to_string()];
    let id = PluginId::parse_file_name("10-x").unwrap();
    let mut a = Adjustment::default();
    let with_cdi = |name: &str| api::ContainerAdjustment {
        cdi_devices: vec![api::CdiDevice { name: name.into() }],
        ..Default::default()
    };
    a.merge(&id, &with_cdi("example.com/card=c0")).unwrap();
    assert_eq!(a.owners["cdi:example.com/card=c0"], "10-x");
    let mut s = spec();
    apply_to_spec(&mut s, &a, &BTreeMap::new(), &node(CgroupMode::Unified), &dirs).unwrap();
    let v = serde_json::to_value(&s).unwrap();
    assert!(v["process"]["env"].as_array().unwrap().contains(&json!("CARD=0")), "{}", v["process"]["env"]);
    assert!(v["linux"]["devices"].as_array().unwrap().iter().any(|d| d["path"] == "/dev/null"), "{}", v["linux"]);
    let mut unknown = Adjustment::default();
    unknown.merge(&id, &with_cdi("example.com/card=c9")).unwrap();
    let err = apply_to_spec(&mut spec(), &unknown, &BTreeMap::new(), &node(CgroupMode::Unified), &dirs).unwrap_err();
    assert!(err.contains("c9"), "{err}");
}
