//! The merged adjustment as validating plugins receive it: the adjustment in NRI's terms
//! and which plugin owns each field (NRI's `Field` numbering).

use std::collections::HashMap;

use super::adjust::Adjustment;
use super::api::{self, Field};

/// The merged adjustment in NRI's terms.
pub fn to_api(a: &Adjustment) -> api::ContainerAdjustment {
    let removed = |k: &String| format!("-{k}");
    let keyed = |m: &std::collections::BTreeMap<String, Option<String>>| -> HashMap<String, String> {
        m.iter().map(|(k, v)| v.as_ref().map_or((removed(k), String::new()), |v| (k.clone(), v.clone()))).collect()
    };
    let r = &a.resources;
    let opt_i64 = |v: Option<i64>| v.map(|value| api::OptionalInt64 { value });
    let opt_u64 = |v: Option<u64>| v.map(|value| api::OptionalUInt64 { value });
    let resources = api::LinuxResources {
        memory: Some(api::LinuxMemory {
            limit: opt_i64(r.memory_limit),
            reservation: opt_i64(r.memory_reservation),
            swap: opt_i64(r.memory_swap),
            swappiness: opt_u64(r.swappiness),
            disable_oom_killer: r.disable_oom_killer.map(|value| api::OptionalBool { value }),
            ..Default::default()
        }),
        cpu: Some(api::LinuxCpu {
            shares: opt_u64(r.cpu_shares),
            quota: opt_i64(r.cpu_quota),
            period: opt_u64(r.cpu_period),
            cpus: r.cpus.clone().unwrap_or_default(),
            mems: r.mems.clone().unwrap_or_default(),
            ..Default::default()
        }),
        hugepage_limits: r
            .hugepages
            .iter()
            .map(|(s, l)| api::HugepageLimit { page_size: s.clone(), limit: *l })
            .collect(),
        unified: r.unified.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        pids: r.pids_limit.map(|limit| api::LinuxPids { limit }),
        ..Default::default()
    };
    let mut mounts = a.mounts.clone();
    mounts.extend(a.removed_mounts.iter().map(|d| api::Mount { destination: format!("-{d}"), ..Default::default() }));
    let mut devices = a.devices.clone();
    devices.extend(a.removed_devices.iter().map(|p| api::LinuxDevice { path: format!("-{p}"), ..Default::default() }));
    api::ContainerAdjustment {
        annotations: keyed(&a.annotations),
        mounts,
        env: a
            .env
            .iter()
            .map(|(k, v)| api::KeyValue {
                key: if v.is_some() { k.clone() } else { removed(k) },
                value: v.clone().unwrap_or_default(),
            })
            .collect(),
        hooks: Some(a.hooks.clone()),
        linux: Some(api::LinuxContainerAdjustment {
            devices,
            resources: Some(resources),
            oom_score_adj: a.oom_score_adj.map(|value| api::OptionalInt { value }),
            sysctl: keyed(&a.sysctl),
            ..Default::default()
        }),
        rlimits: a
            .rlimits
            .iter()
            .map(|(t, (hard, soft))| api::PosixRlimit { r#type: t.clone(), hard: *hard, soft: *soft })
            .collect(),
        cdi_devices: a.cdi_devices.iter().map(|name| api::CdiDevice { name: name.clone() }).collect(),
        args: a.args.clone().unwrap_or_default(),
    }
}

/// NRI's field for one of our owner keys: a simple field, or a compound one and its key.
fn field_of(owner_key: &str) -> Option<(Field, Option<&str>)> {
    if let Some((kind, key)) = owner_key.split_once(':') {
        let field = match kind {
            "annotation" => Field::Annotations,
            "env" => Field::Env,
            "mount" => Field::Mounts,
            "device" => Field::Devices,
            "rlimit" => Field::Rlimits,
            "sysctl" => Field::Sysctl,
            "unified" => Field::CgroupsUnified,
            "hugepages" => Field::HugepageLimits,
            "cdi" => Field::CdiDevices,
            _ => return None,
        };
        return Some((field, Some(key)));
    }
    let field = match owner_key {
        "memory.limit" => Field::MemLimit,
        "memory.reservation" => Field::MemReservation,
        "memory.swap" => Field::MemSwapLimit,
        "memory.swappiness" => Field::MemSwappiness,
        "memory.disable_oom_killer" => Field::MemDisableOomKiller,
        "cpu.shares" => Field::CpuShares,
        "cpu.quota" => Field::CpuQuota,
        "cpu.period" => Field::CpuPeriod,
        "cpuset.cpus" => Field::CpuSetCpUs,
        "cpuset.mems" => Field::CpuSetMems,
        "pids.limit" => Field::PidsLimit,
        "oom_score_adj" => Field::OomScoreAdj,
        "args" => Field::Args,
        "hooks" => Field::OciHooks,
        _ => return None,
    };
    Some((field, None))
}

/// Who owns each adjusted field of the container.
pub fn owners(container_id: &str, a: &Adjustment) -> api::OwningPlugins {
    let mut fields = api::FieldOwners::default();
    for (key, plugin) in &a.owners {
        match field_of(key) {
            Some((field, None)) => {
                fields.simple.insert(field as i32, plugin.clone());
            }
            Some((field, Some(k))) => {
                fields.compound.entry(field as i32).or_default().owners.insert(k.to_string(), plugin.clone());
            }
            None => {}
        }
    }
    api::OwningPlugins { owners: HashMap::from([(container_id.to_string(), fields)]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nri::plugin::PluginId;

    #[test]
    fn the_merged_adjustment_and_its_owners_in_nri_terms() {
        let mut a = Adjustment::default();
        let id = PluginId::parse_file_name("10-x").unwrap();
        let adjust = api::ContainerAdjustment {
            env: vec![
                api::KeyValue { key: "-GONE".into(), value: String::new() },
                api::KeyValue { key: "A".into(), value: "1".into() },
            ],
            linux: Some(api::LinuxContainerAdjustment {
                resources: Some(api::LinuxResources {
                    memory: Some(api::LinuxMemory {
                        limit: Some(api::OptionalInt64 { value: 5 }),
                        ..Default::default()
                    }),
                    unified: [("memory.high".to_string(), "9".to_string())].into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        a.merge(&id, &adjust).unwrap();
        let back = to_api(&a);
        let keys: Vec<&str> = back.env.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["-GONE", "A"]);
        let resources = back.linux.unwrap().resources.unwrap();
        assert_eq!(resources.memory.unwrap().limit.unwrap().value, 5);
        let owners = owners("c1", &a);
        let fields = &owners.owners["c1"];
        assert_eq!(fields.simple[&(Field::MemLimit as i32)], "10-x");
        assert_eq!(fields.compound[&(Field::Env as i32)].owners["A"], "10-x");
        assert_eq!(fields.compound[&(Field::CgroupsUnified as i32)].owners["memory.high"], "10-x");
    }
}
