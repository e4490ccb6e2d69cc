use super::*;

fn id(s: &str) -> PluginId {
    PluginId::parse_file_name(s).unwrap()
}

fn kv(key: &str, value: &str) -> api::KeyValue {
    api::KeyValue { key: key.into(), value: value.into() }
}

fn memory(limit: Option<i64>, swap: Option<i64>) -> api::LinuxContainerAdjustment {
    api::LinuxContainerAdjustment {
        resources: Some(api::LinuxResources {
            memory: Some(api::LinuxMemory {
                limit: limit.map(|value| api::OptionalInt64 { value }),
                swap: swap.map(|value| api::OptionalInt64 { value }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn plugins_merge_in_order_and_a_second_owner_conflicts() {
    let mut a = Adjustment::default();
    let first = api::ContainerAdjustment {
        annotations: [("team".to_string(), "x".to_string())].into(),
        env: vec![kv("A", "1"), kv("-B", "")],
        linux: Some(memory(Some(64 << 20), None)),
        ..Default::default()
    };
    a.merge(&id("10-first"), &first).unwrap();
    assert_eq!(a.annotations["team"], Some("x".into()));
    assert_eq!(a.env, vec![("A".into(), Some("1".into())), ("B".into(), None)]);
    assert_eq!(a.resources.memory_limit, Some(64 << 20));
    assert_eq!(a.owners["memory.limit"], "10-first");

    // The same plugin may come back to its own field (an update after its adjustment).
    a.merge(&id("10-first"), &api::ContainerAdjustment { env: vec![kv("A", "2")], ..Default::default() }).unwrap();
    assert_eq!(a.env[1], ("A".into(), Some("2".into())));

    // Another plugin's fields merge; one it shares conflicts, naming both.
    let second = api::ContainerAdjustment { env: vec![kv("C", "3")], ..Default::default() };
    a.merge(&id("20-second"), &second).unwrap();
    let clash = api::ContainerAdjustment { linux: Some(memory(Some(32 << 20), None)), ..Default::default() };
    let err = a.merge(&id("20-second"), &clash).unwrap_err().to_string();
    assert!(err.contains("10-first") && err.contains("20-second") && err.contains("memory.limit"), "{err}");
    let removal =
        api::ContainerAdjustment { annotations: [("-team".into(), String::new())].into(), ..Default::default() };
    assert!(matches!(a.merge(&id("30-third"), &removal), Err(NriError::Conflict { .. })));
}

#[test]
fn mounts_and_devices_replace_by_path_and_removals_are_kept() {
    let mut a = Adjustment::default();
    let mount = |dst: &str| api::Mount {
        destination: dst.into(),
        r#type: "bind".into(),
        source: "/src".into(),
        options: vec![],
    };
    let adjust = api::ContainerAdjustment { mounts: vec![mount("/data"), mount("-/cache")], ..Default::default() };
    a.merge(&id("10-m"), &adjust).unwrap();
    assert_eq!(a.mounts.len(), 1);
    assert_eq!(a.removed_mounts, ["/cache"]);
    let hooks = api::Hooks {
        prestart: vec![api::Hook { path: "/bin/true".into(), ..Default::default() }],
        ..Default::default()
    };
    let with_hooks = api::ContainerAdjustment { hooks: Some(hooks), ..Default::default() };
    a.merge(&id("10-m"), &with_hooks).unwrap();
    a.merge(&id("20-n"), &with_hooks).unwrap();
    assert_eq!(a.hooks.prestart.len(), 2, "hooks add up, never conflict");
}

#[test]
fn unsupported_fields_are_refused_by_name() {
    let cases: Vec<(api::ContainerAdjustment, &str)> = vec![
        (
            api::ContainerAdjustment {
                linux: Some(api::LinuxContainerAdjustment { cgroups_path: "/x".into(), ..Default::default() }),
                ..Default::default()
            },
            "cgroups path",
        ),
        (
            api::ContainerAdjustment {
                linux: Some(api::LinuxContainerAdjustment {
                    resources: Some(api::LinuxResources {
                        memory: Some(api::LinuxMemory {
                            kernel: Some(api::OptionalInt64 { value: 1 }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            "kernel memory",
        ),
    ];
    for (adjust, field) in cases {
        let err = Adjustment::default().merge(&id("10-x"), &adjust).unwrap_err().to_string();
        assert!(err.contains(field) && err.contains("10-x"), "{err}");
    }
}

#[test]
fn resources_list_their_fields() {
    let r = api::LinuxResources {
        cpu: Some(api::LinuxCpu {
            shares: Some(api::OptionalUInt64 { value: 2 }),
            cpus: "0-1".into(),
            ..Default::default()
        }),
        unified: [("memory.high".to_string(), "1000".to_string())].into(),
        ..Default::default()
    };
    let parsed = Resources::from_api(&id("10-x"), &r).unwrap();
    assert_eq!(parsed.fields(), ["cpu.shares", "cpuset.cpus", "unified:memory.high"]);
    assert!(Resources::default().is_empty());
}
