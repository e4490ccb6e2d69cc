//! Plugins' container adjustments merged in call order. Each field has one owner: a second
//! plugin setting or removing what another already did is a conflict, and the container is
//! not created (containerd refuses the same way). A key prefixed with '-' removes.

use std::collections::BTreeMap;

use super::api;
use super::error::NriError;
use super::plugin::PluginId;

/// Resources as plugins ask for them; `None` leaves a value alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    pub memory_limit: Option<i64>,
    pub memory_reservation: Option<i64>,
    /// OCI's memory+swap limit (-1: unlimited).
    pub memory_swap: Option<i64>,
    pub swappiness: Option<u64>,
    pub disable_oom_killer: Option<bool>,
    pub cpu_shares: Option<u64>,
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<u64>,
    pub cpus: Option<String>,
    pub mems: Option<String>,
    pub pids_limit: Option<i64>,
    pub hugepages: BTreeMap<String, u64>,
    pub unified: BTreeMap<String, String>,
}

/// Everything the plugins changed about one container, and who changed what.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Adjustment {
    /// `None`: removed.
    pub annotations: BTreeMap<String, Option<String>>,
    pub env: Vec<(String, Option<String>)>,
    pub mounts: Vec<api::Mount>,
    pub removed_mounts: Vec<String>,
    pub hooks: api::Hooks,
    pub devices: Vec<api::LinuxDevice>,
    pub removed_devices: Vec<String>,
    pub rlimits: BTreeMap<String, (u64, u64)>,
    /// Fully qualified CDI device names ("vendor.com/class=name").
    pub cdi_devices: Vec<String>,
    pub oom_score_adj: Option<i64>,
    pub args: Option<Vec<String>>,
    pub sysctl: BTreeMap<String, Option<String>>,
    pub resources: Resources,
    /// Field -> the plugin that set it ("annotation:a", "env:X", "memory.limit", ...).
    pub owners: BTreeMap<String, String>,
}

/// `-key` removes `key`.
pub(super) fn marked(key: &str) -> (&str, bool) {
    match key.strip_prefix('-') {
        Some(k) => (k, true),
        None => (key, false),
    }
}

impl Adjustment {
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    fn claim(&mut self, plugin: &PluginId, field: String) -> Result<(), NriError> {
        let who = plugin.to_string();
        match self.owners.get(&field) {
            Some(owner) if *owner != who => Err(NriError::Conflict { field, first: owner.clone(), second: who }),
            _ => {
                self.owners.insert(field, who);
                Ok(())
            }
        }
    }

    /// Adds one plugin's adjustment.
    pub fn merge(&mut self, plugin: &PluginId, adjust: &api::ContainerAdjustment) -> Result<(), NriError> {
        refuse_unsupported(plugin, adjust)?;
        for (key, value) in &adjust.annotations {
            let (key, removed) = marked(key);
            self.claim(plugin, format!("annotation:{key}"))?;
            self.annotations.insert(key.to_string(), (!removed).then(|| value.clone()));
        }
        for kv in &adjust.env {
            let (key, removed) = marked(&kv.key);
            self.claim(plugin, format!("env:{key}"))?;
            self.env.retain(|(k, _)| k != key);
            self.env.push((key.to_string(), (!removed).then(|| kv.value.clone())));
        }
        for mount in &adjust.mounts {
            let (destination, removed) = marked(&mount.destination);
            self.claim(plugin, format!("mount:{destination}"))?;
            self.mounts.retain(|m| m.destination != destination);
            if removed {
                self.removed_mounts.push(destination.to_string());
            } else {
                self.mounts.push(mount.clone());
            }
        }
        if let Some(hooks) = &adjust.hooks {
            self.claim_hooks(plugin, hooks);
        }
        for rlimit in &adjust.rlimits {
            self.claim(plugin, format!("rlimit:{}", rlimit.r#type))?;
            self.rlimits.insert(rlimit.r#type.clone(), (rlimit.hard, rlimit.soft));
        }
        for device in &adjust.cdi_devices {
            self.claim(plugin, format!("cdi:{}", device.name))?;
            if !self.cdi_devices.contains(&device.name) {
                self.cdi_devices.push(device.name.clone());
            }
        }
        if !adjust.args.is_empty() {
            self.claim(plugin, "args".into())?;
            self.args = Some(adjust.args.clone());
        }
        if let Some(linux) = &adjust.linux {
            self.merge_linux(plugin, linux)?;
        }
        Ok(())
    }

    /// Hooks add up: every plugin's run, in call order.
    fn claim_hooks(&mut self, plugin: &PluginId, hooks: &api::Hooks) {
        append_hooks(&mut self.hooks, hooks);
        self.owners.entry("hooks".into()).or_insert_with(|| plugin.to_string());
    }

    fn merge_linux(&mut self, plugin: &PluginId, linux: &api::LinuxContainerAdjustment) -> Result<(), NriError> {
        for device in &linux.devices {
            let (path, removed) = marked(&device.path);
            self.claim(plugin, format!("device:{path}"))?;
            self.devices.retain(|d| d.path != path);
            if removed {
                self.removed_devices.push(path.to_string());
            } else {
                self.devices.push(device.clone());
            }
        }
        if let Some(oom) = &linux.oom_score_adj {
            self.claim(plugin, "oom_score_adj".into())?;
            self.oom_score_adj = Some(oom.value);
        }
        for (key, value) in &linux.sysctl {
            let (key, removed) = marked(key);
            self.claim(plugin, format!("sysctl:{key}"))?;
            self.sysctl.insert(key.to_string(), (!removed).then(|| value.clone()));
        }
        if let Some(resources) = &linux.resources {
            self.merge_resources(plugin, resources)?;
        }
        Ok(())
    }

    /// Adds a plugin's resources (from an adjustment or an update of this container).
    pub fn merge_resources(&mut self, plugin: &PluginId, r: &api::LinuxResources) -> Result<(), NriError> {
        let asked = Resources::from_api(plugin, r)?;
        for field in asked.fields() {
            self.claim(plugin, field)?;
        }
        self.resources.overlay(asked);
        Ok(())
    }
}

/// `add`'s hooks after those of `to`, kind by kind.
pub(super) fn append_hooks(to: &mut api::Hooks, add: &api::Hooks) {
    to.prestart.extend(add.prestart.iter().cloned());
    to.create_runtime.extend(add.create_runtime.iter().cloned());
    to.create_container.extend(add.create_container.iter().cloned());
    to.start_container.extend(add.start_container.iter().cloned());
    to.poststart.extend(add.poststart.iter().cloned());
    to.poststop.extend(add.poststop.iter().cloned());
}

/// Fields swapcri does not apply: a plugin relying on one gets an error, not silence.
fn refuse_unsupported(plugin: &PluginId, adjust: &api::ContainerAdjustment) -> Result<(), NriError> {
    let unsupported = |field: &str| NriError::Unsupported { plugin: plugin.to_string(), field: field.into() };
    let Some(linux) = &adjust.linux else { return Ok(()) };
    let checks = [
        (!linux.cgroups_path.is_empty(), "the cgroups path"),
        (linux.io_priority.is_some(), "the I/O priority"),
        (linux.seccomp_policy.is_some(), "the seccomp policy"),
        (!linux.namespaces.is_empty(), "namespaces"),
        (!linux.net_devices.is_empty(), "network devices"),
        (linux.scheduler.is_some(), "the scheduler"),
        (linux.rdt.is_some(), "RDT"),
        (linux.memory_policy.is_some(), "the NUMA memory policy"),
    ];
    match checks.iter().find(|(set, _)| *set) {
        Some((_, field)) => Err(unsupported(field)),
        None => Ok(()),
    }
}

impl Resources {
    pub fn from_api(plugin: &PluginId, r: &api::LinuxResources) -> Result<Resources, NriError> {
        let unsupported = |field: &str| NriError::Unsupported { plugin: plugin.to_string(), field: field.into() };
        let mut out = Resources::default();
        if let Some(m) = &r.memory {
            if m.kernel.is_some() || m.kernel_tcp.is_some() {
                return Err(unsupported("kernel memory limits"));
            }
            out.memory_limit = m.limit.as_ref().map(|v| v.value);
            out.memory_reservation = m.reservation.as_ref().map(|v| v.value);
            out.memory_swap = m.swap.as_ref().map(|v| v.value);
            out.swappiness = m.swappiness.as_ref().map(|v| v.value);
            out.disable_oom_killer = m.disable_oom_killer.as_ref().map(|v| v.value);
        }
        if let Some(c) = &r.cpu {
            if c.realtime_runtime.is_some() || c.realtime_period.is_some() {
                return Err(unsupported("real-time CPU bandwidth"));
            }
            out.cpu_shares = c.shares.as_ref().map(|v| v.value);
            out.cpu_quota = c.quota.as_ref().map(|v| v.value);
            out.cpu_period = c.period.as_ref().map(|v| v.value);
            out.cpus = (!c.cpus.is_empty()).then(|| c.cpus.clone());
            out.mems = (!c.mems.is_empty()).then(|| c.mems.clone());
        }
        if r.blockio_class.is_some() || r.rdt_class.is_some() {
            return Err(unsupported("block I/O or RDT classes"));
        }
        out.pids_limit = r.pids.as_ref().map(|p| p.limit);
        out.hugepages = r.hugepage_limits.iter().map(|h| (h.page_size.clone(), h.limit)).collect();
        out.unified = r.unified.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        Ok(out)
    }

    /// The owner keys of the values set.
    pub fn fields(&self) -> Vec<String> {
        let named = [
            (self.memory_limit.is_some(), "memory.limit"),
            (self.memory_reservation.is_some(), "memory.reservation"),
            (self.memory_swap.is_some(), "memory.swap"),
            (self.swappiness.is_some(), "memory.swappiness"),
            (self.disable_oom_killer.is_some(), "memory.disable_oom_killer"),
            (self.cpu_shares.is_some(), "cpu.shares"),
            (self.cpu_quota.is_some(), "cpu.quota"),
            (self.cpu_period.is_some(), "cpu.period"),
            (self.cpus.is_some(), "cpuset.cpus"),
            (self.mems.is_some(), "cpuset.mems"),
            (self.pids_limit.is_some(), "pids.limit"),
        ];
        let mut fields: Vec<String> = named.iter().filter(|(set, _)| *set).map(|(_, f)| f.to_string()).collect();
        fields.extend(self.hugepages.keys().map(|k| format!("hugepages:{k}")));
        fields.extend(self.unified.keys().map(|k| format!("unified:{k}")));
        fields
    }

    fn overlay(&mut self, other: Resources) {
        macro_rules! take {
            ($($f:ident),*) => { $( if other.$f.is_some() { self.$f = other.$f; } )* };
        }
        take!(memory_limit, memory_reservation, memory_swap, swappiness, disable_oom_killer);
        take!(cpu_shares, cpu_quota, cpu_period, cpus, mems, pids_limit);
        self.hugepages.extend(other.hugepages);
        self.unified.extend(other.unified);
    }

    pub fn is_empty(&self) -> bool {
        self.fields().is_empty()
    }
}

#[cfg(test)]
mod tests;
