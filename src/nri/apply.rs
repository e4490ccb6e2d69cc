//! A merged adjustment written into the container's OCI spec, as containerd applies one:
//! through the spec's JSON, so that every field keeps the OCI shape runc reads. Memory and
//! swap arrive already reviewed by the swap policy, as the plan's `unified` files.

use std::collections::BTreeMap;

use oci_spec::runtime::Spec;
use serde_json::{json, Map, Value};

use super::adjust::{Adjustment, Resources};
use super::api;
use crate::model::memory::PLAN_FILES;
use crate::policy::NodeFacts;

/// Writes `adjust` into `spec`. `plan_files` are the reviewed plan's files (cgroup v2).
/// Returns what could not be applied as asked.
/// CDI devices are resolved from the CDI specs in `cdi_dirs`.
pub fn apply_to_spec(
    spec: &mut Spec,
    adjust: &Adjustment,
    plan_files: &BTreeMap<String, String>,
    node: &NodeFacts,
    cdi_dirs: &[String],
) -> Result<Vec<String>, String> {
    crate::blocking::check("applying an NRI adjustment");
    let mut warnings = Vec::new();
    let mut v = serde_json::to_value(&*spec).map_err(|e| e.to_string())?;
    let root = v.as_object_mut().ok_or("the spec is not an object")?;
    set_keyed(object(root, "annotations"), &adjust.annotations);
    let process = object(root, "process");
    apply_env(process, &adjust.env);
    if let Some(args) = &adjust.args {
        process.insert("args".into(), json!(args));
    }
    apply_rlimits(process, &adjust.rlimits);
    if let Some(oom) = adjust.oom_score_adj {
        process.insert("oomScoreAdj".into(), json!(crate::policy::spec::oom_score_adj(oom, node, &mut warnings)));
    }
    apply_mounts(root, adjust);
    apply_hooks(object(root, "hooks"), &adjust.hooks);
    let linux = object(root, "linux");
    apply_devices(linux, adjust);
    set_keyed(object(linux, "sysctl"), &adjust.sysctl);
    apply_resources(object(linux, "resources"), &adjust.resources, plan_files, node, &mut warnings)?;
    *spec = serde_json::from_value(v).map_err(|e| format!("the adjusted spec: {e}"))?;
    if !adjust.cdi_devices.is_empty() {
        inject_cdi(spec, &adjust.cdi_devices, cdi_dirs)?;
    }
    Ok(warnings)
}

/// The devices' edits (device nodes, mounts, environment, hooks) from the node's CDI specs;
/// a name no spec defines is refused.
fn inject_cdi(spec: &mut Spec, devices: &[String], dirs: &[String]) -> Result<(), String> {
    use container_device_interface::cache::new_cache;
    use container_device_interface::spec_dirs::with_spec_dirs;
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    let cache = new_cache(vec![with_spec_dirs(&dirs)]);
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    cache.inject_devices(Some(spec), devices.to_vec()).map(|_| ()).map_err(|e| format!("CDI devices: {e}"))
}

/// A plugin's resources written into an update's resources (UpdateContainerResources).
pub fn apply_to_resources(
    resources: &mut oci_spec::runtime::LinuxResources,
    adjust: &Adjustment,
    plan_files: &BTreeMap<String, String>,
    node: &NodeFacts,
) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    let mut v = serde_json::to_value(&*resources).map_err(|e| e.to_string())?;
    let map = v.as_object_mut().ok_or("the resources are not an object")?;
    apply_resources(map, &adjust.resources, plan_files, node, &mut warnings)?;
    *resources = serde_json::from_value(v).map_err(|e| format!("the adjusted resources: {e}"))?;
    Ok(warnings)
}

fn object<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = parent.entry(key.to_string()).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("made an object above")
}

fn array<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Vec<Value> {
    let slot = parent.entry(key.to_string()).or_insert_with(|| json!([]));
    if !slot.is_array() {
        *slot = json!([]);
    }
    slot.as_array_mut().expect("made an array above")
}

fn set_keyed(map: &mut Map<String, Value>, values: &BTreeMap<String, Option<String>>) {
    for (key, value) in values {
        match value {
            Some(v) => map.insert(key.clone(), json!(v)),
            None => map.remove(key),
        };
    }
}

fn apply_env(process: &mut Map<String, Value>, env: &[(String, Option<String>)]) {
    let list = array(process, "env");
    for (key, value) in env {
        let prefix = format!("{key}=");
        list.retain(|e| !e.as_str().is_some_and(|s| s.starts_with(&prefix) || s == key));
        if let Some(value) = value {
            list.push(json!(format!("{key}={value}")));
        }
    }
}

fn apply_rlimits(process: &mut Map<String, Value>, rlimits: &BTreeMap<String, (u64, u64)>) {
    if rlimits.is_empty() {
        return;
    }
    let list = array(process, "rlimits");
    for (kind, (hard, soft)) in rlimits {
        list.retain(|r| r.get("type").and_then(Value::as_str) != Some(kind));
        list.push(json!({"type": kind, "hard": hard, "soft": soft}));
    }
}

fn apply_mounts(root: &mut Map<String, Value>, adjust: &Adjustment) {
    let list = array(root, "mounts");
    let gone = |m: &Value| {
        let dst = m.get("destination").and_then(Value::as_str).unwrap_or_default();
        adjust.removed_mounts.iter().any(|r| r == dst) || adjust.mounts.iter().any(|a| a.destination == dst)
    };
    list.retain(|m| !gone(m));
    for m in &adjust.mounts {
        list.push(json!({"destination": m.destination, "type": m.r#type, "source": m.source, "options": m.options}));
    }
}

fn apply_hooks(hooks: &mut Map<String, Value>, add: &api::Hooks) {
    let kinds = [
        ("prestart", &add.prestart),
        ("createRuntime", &add.create_runtime),
        ("createContainer", &add.create_container),
        ("startContainer", &add.start_container),
        ("poststart", &add.poststart),
        ("poststop", &add.poststop),
    ];
    for (kind, list) in kinds {
        for hook in list {
            let mut h = json!({"path": hook.path});
            if !hook.args.is_empty() {
                h["args"] = json!(hook.args);
            }
            if !hook.env.is_empty() {
                h["env"] = json!(hook.env);
            }
            if let Some(t) = &hook.timeout {
                h["timeout"] = json!(t.value);
            }
            array(hooks, kind).push(h);
        }
    }
}

fn apply_devices(linux: &mut Map<String, Value>, adjust: &Adjustment) {
    let list = array(linux, "devices");
    list.retain(|d| {
        let path = d.get("path").and_then(Value::as_str).unwrap_or_default();
        !adjust.removed_devices.iter().any(|r| r == path) && !adjust.devices.iter().any(|a| a.path == path)
    });
    let mut rules = Vec::new();
    for d in &adjust.devices {
        let mut dev = json!({"path": d.path, "type": d.r#type, "major": d.major, "minor": d.minor});
        if let Some(mode) = &d.file_mode {
            dev["fileMode"] = json!(mode.value);
        }
        if let Some(uid) = &d.uid {
            dev["uid"] = json!(uid.value);
        }
        if let Some(gid) = &d.gid {
            dev["gid"] = json!(gid.value);
        }
        list.push(dev);
        rules.push(json!({"allow": true, "type": d.r#type, "major": d.major, "minor": d.minor, "access": "rwm"}));
    }
    array(object(linux, "resources"), "devices").extend(rules);
}

fn apply_resources(
    res: &mut Map<String, Value>,
    r: &Resources,
    plan_files: &BTreeMap<String, String>,
    node: &NodeFacts,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    let set = |map: &mut Map<String, Value>, key: &str, value: Option<Value>| {
        if let Some(v) = value {
            map.insert(key.into(), v);
        }
    };
    let cpu = object(res, "cpu");
    set(cpu, "shares", r.cpu_shares.map(|v| json!(v)));
    set(cpu, "quota", r.cpu_quota.map(|v| json!(v)));
    set(cpu, "period", r.cpu_period.map(|v| json!(v)));
    set(cpu, "cpus", r.cpus.as_ref().map(|v| json!(v)));
    set(cpu, "mems", r.mems.as_ref().map(|v| json!(v)));
    let memory = object(res, "memory");
    set(memory, "limit", r.memory_limit.map(|v| json!(v)));
    set(memory, "reservation", r.memory_reservation.map(|v| json!(v)));
    set(memory, "disableOOMKiller", r.disable_oom_killer.map(|v| json!(v)));
    if node.cgroup_v2() {
        // Swap is the plan's memory.swap.max; v2 has no per-cgroup swappiness.
        if r.swappiness.is_some() {
            warnings.push("memory.swappiness ignored: cgroup v2 has no per-cgroup swappiness".into());
        }
    } else if r.memory_swap.is_some() || r.swappiness.is_some() {
        // The swap policy has nothing to enforce on a memory controller on cgroup v1.
        warnings.push("memory swap and swappiness ignored: the memory controller is not on cgroup v2".into());
    }
    if let Some(limit) = r.pids_limit {
        object(res, "pids").insert("limit".into(), json!(limit));
    }
    if !r.hugepages.is_empty() {
        let list = array(res, "hugepageLimits");
        for (size, limit) in &r.hugepages {
            list.retain(|h| h.get("pageSize").and_then(Value::as_str) != Some(size));
            list.push(json!({"pageSize": size, "limit": limit}));
        }
    }
    apply_unified(res, r, plan_files, node)
}

fn apply_unified(
    res: &mut Map<String, Value>,
    r: &Resources,
    plan_files: &BTreeMap<String, String>,
    node: &NodeFacts,
) -> Result<(), String> {
    let others: Vec<(&String, &String)> = r.unified.iter().filter(|(k, _)| !PLAN_FILES.contains(&k.as_str())).collect();
    if !node.cgroup_v2() {
        return match others.first() {
            Some((key, _)) => Err(format!("unified {key}: this node's memory cgroup is not on cgroup v2")),
            None => Ok(()),
        };
    }
    let unified = object(res, "unified");
    for (key, value) in others {
        if key.contains('/') || key.starts_with('.') {
            return Err(format!("unified {key:?} is not a cgroup file name"));
        }
        unified.insert(key.clone(), json!(value));
    }
    for file in PLAN_FILES {
        match plan_files.get(file) {
            Some(v) => unified.insert(file.to_string(), json!(v)),
            None => unified.remove(file),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests;
