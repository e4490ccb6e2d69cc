//! The container as the next plugin sees it at CreateContainer: the request's container with
//! the adjustments of the plugins called before it (as containerd passes it on).

use super::adjust::{append_hooks, marked};
use super::api;

/// `container` with one plugin's `adjust` in it.
pub fn adjusted(container: &api::Container, adjust: &api::ContainerAdjustment) -> api::Container {
    let mut c = container.clone();
    for (key, value) in &adjust.annotations {
        match marked(key) {
            (k, true) => c.annotations.remove(k),
            (k, false) => c.annotations.insert(k.to_string(), value.clone()),
        };
    }
    for kv in &adjust.env {
        let (key, removed) = marked(&kv.key);
        let prefix = format!("{key}=");
        c.env.retain(|e| !e.starts_with(&prefix) && e != key);
        if !removed {
            c.env.push(format!("{key}={}", kv.value));
        }
    }
    for mount in &adjust.mounts {
        let (destination, removed) = marked(&mount.destination);
        c.mounts.retain(|m| m.destination != destination);
        if !removed {
            c.mounts.push(mount.clone());
        }
    }
    if !adjust.args.is_empty() {
        c.args = adjust.args.clone();
    }
    for rlimit in &adjust.rlimits {
        c.rlimits.retain(|r| r.r#type != rlimit.r#type);
        c.rlimits.push(rlimit.clone());
    }
    if let Some(hooks) = &adjust.hooks {
        append_hooks(c.hooks.get_or_insert_with(Default::default), hooks);
    }
    c.cdi_devices.extend(adjust.cdi_devices.iter().cloned());
    if let Some(linux) = &adjust.linux {
        adjust_linux(c.linux.get_or_insert_with(Default::default), linux);
    }
    c
}

fn adjust_linux(l: &mut api::LinuxContainer, a: &api::LinuxContainerAdjustment) {
    for device in &a.devices {
        let (path, removed) = marked(&device.path);
        l.devices.retain(|d| d.path != path);
        if !removed {
            l.devices.push(device.clone());
        }
    }
    if a.oom_score_adj.is_some() {
        l.oom_score_adj = a.oom_score_adj.clone();
    }
    for (key, value) in &a.sysctl {
        match marked(key) {
            (k, true) => l.sysctl.remove(k),
            (k, false) => l.sysctl.insert(k.to_string(), value.clone()),
        };
    }
    if let Some(r) = &a.resources {
        overlay(l.resources.get_or_insert_with(Default::default), r);
    }
}

/// The values `r` sets, over those of `into`.
pub fn overlay(into: &mut api::LinuxResources, r: &api::LinuxResources) {
    macro_rules! take {
        ($to:expr, $from:expr, $($f:ident),*) => { $( if $from.$f.is_some() { $to.$f = $from.$f.clone(); } )* };
    }
    if let Some(m) = &r.memory {
        let to = into.memory.get_or_insert_with(Default::default);
        take!(to, m, limit, reservation, swap, kernel, kernel_tcp, swappiness, disable_oom_killer, use_hierarchy);
    }
    if let Some(cpu) = &r.cpu {
        let to = into.cpu.get_or_insert_with(Default::default);
        take!(to, cpu, shares, quota, period, realtime_runtime, realtime_period);
        if !cpu.cpus.is_empty() {
            to.cpus = cpu.cpus.clone();
        }
        if !cpu.mems.is_empty() {
            to.mems = cpu.mems.clone();
        }
    }
    for h in &r.hugepage_limits {
        into.hugepage_limits.retain(|x| x.page_size != h.page_size);
        into.hugepage_limits.push(h.clone());
    }
    into.unified.extend(r.unified.iter().map(|(k, v)| (k.clone(), v.clone())));
    if r.pids.is_some() {
        into.pids = r.pids.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_plugin_sees_what_the_earlier_ones_changed() {
        let before = api::Container {
            env: vec!["PATH=/bin".into(), "DROP=1".into()],
            annotations: [("a".to_string(), "1".to_string())].into(),
            linux: Some(api::LinuxContainer {
                resources: Some(api::LinuxResources {
                    memory: Some(api::LinuxMemory {
                        limit: Some(api::OptionalInt64 { value: 100 }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let adjust = api::ContainerAdjustment {
            env: vec![
                api::KeyValue { key: "-DROP".into(), value: String::new() },
                api::KeyValue { key: "NEW".into(), value: "2".into() },
            ],
            annotations: [("-a".to_string(), String::new()), ("b".to_string(), "2".to_string())].into(),
            linux: Some(api::LinuxContainerAdjustment {
                resources: Some(api::LinuxResources {
                    memory: Some(api::LinuxMemory {
                        swap: Some(api::OptionalInt64 { value: 150 }),
                        ..Default::default()
                    }),
                    unified: [("memory.high".to_string(), "90".to_string())].into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let after = adjusted(&before, &adjust);
        assert_eq!(after.env, ["PATH=/bin", "NEW=2"]);
        assert_eq!(after.annotations, [("b".to_string(), "2".to_string())].into());
        let memory = after.linux.unwrap().resources.unwrap();
        assert_eq!(memory.memory.as_ref().unwrap().limit.as_ref().unwrap().value, 100, "kept");
        assert_eq!(memory.memory.unwrap().swap.unwrap().value, 150);
        assert_eq!(memory.unified["memory.high"], "90");
    }
}
