//! systemd's manager over D-Bus, for the units swapcri creates under the systemd cgroup
//! driver: pod slices of its own, the scopes of monitors and namespace holders, and unit
//! properties (memory reservations) that systemd keeps across its reloads.

use std::time::Duration;

use tokio::sync::Mutex;
use zbus::{Connection, Variant};

const DESTINATION: &str = "org.freedesktop.systemd1";
const PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
/// A call systemd does not answer in this long fails (systemd may be reloading).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// systemd's own socket for root, which systemctl and runc use as root: it needs no bus daemon,
/// which kind's node image (like other minimal systemd hosts) does not run.
const PRIVATE_SOCKET: &str = "/run/systemd/private";

#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    #[error("connecting to systemd over D-Bus: {0}")]
    Connect(zbus::Error),
    #[error("systemd {method} {unit}: {source}")]
    Call { method: &'static str, unit: String, source: zbus::Error },
    #[error("systemd {method} {unit}: no answer in {CALL_TIMEOUT:?}")]
    Timeout { method: &'static str, unit: String },
}

impl SystemdError {
    /// systemd refused to create a unit because one of that name is loaded.
    pub fn unit_exists(&self) -> bool {
        matches!(self, SystemdError::Call { source: zbus::Error::MethodError(name, ..), .. }
            if name.as_str() == "org.freedesktop.systemd1.UnitExists")
    }

    /// The unit is not loaded (nothing to stop).
    pub fn no_such_unit(&self) -> bool {
        matches!(self, SystemdError::Call { source: zbus::Error::MethodError(name, ..), .. }
            if name.as_str() == "org.freedesktop.systemd1.NoSuchUnit")
    }
}

/// A unit property as systemd's D-Bus API names and types it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Property {
    MemoryMin(u64),
    MemoryLow(u64),
    Description(String),
    /// The slice a scope goes in.
    Slice(String),
    /// The processes a new scope starts with.
    Pids(Vec<u32>),
    /// Collect the unit once inactive or failed, so a failed scope leaves no trace.
    CollectInactiveOrFailed,
    /// `cpu.weight` (1–10000).
    CpuWeight(u64),
    /// `io.weight`'s default (1–10000).
    IoWeight(u64),
    /// `cpu.max`'s quota as CPU time a second, µs (`u64::MAX`: none).
    CpuQuotaPerSecUSec(u64),
}

impl Property {
    fn pair(&self) -> (&'static str, Variant<'_>) {
        match self {
            Property::MemoryMin(v) => ("MemoryMin", Variant::from(*v)),
            Property::MemoryLow(v) => ("MemoryLow", Variant::from(*v)),
            Property::Description(d) => ("Description", Variant::from(d.as_str())),
            Property::Slice(s) => ("Slice", Variant::from(s.as_str())),
            Property::Pids(p) => ("PIDs", Variant::from(p.clone())),
            Property::CollectInactiveOrFailed => ("CollectMode", Variant::from("inactive-or-failed")),
            Property::CpuWeight(w) => ("CPUWeight", Variant::from(*w)),
            Property::IoWeight(w) => ("IOWeight", Variant::from(*w)),
            Property::CpuQuotaPerSecUSec(q) => ("CPUQuotaPerSecUSec", Variant::from(*q)),
        }
    }
}

/// The system bus where a bus daemon serves it; systemd's private socket otherwise.
async fn connect() -> Result<Connection, SystemdError> {
    let bus_error = match Connection::system().await {
        Ok(c) => return Ok(c),
        Err(e) => e,
    };
    let private = zbus::connection::Builder::address(format!("unix:path={PRIVATE_SOCKET}").as_str()).p2p().build();
    private.await.map_err(|e| {
        tracing::debug!(error = %e, "systemd's private socket refused too");
        SystemdError::Connect(bus_error)
    })
}

/// A connection to systemd's manager, made on first use and remade after a failure (systemd
/// re-executing itself, the bus restarting).
#[derive(Default)]
pub struct Systemd {
    connection: Mutex<Option<Connection>>,
}

impl Systemd {
    async fn call<B>(&self, method: &'static str, unit: &str, body: &B) -> Result<(), SystemdError>
    where
        B: serde::Serialize + zbus::DynamicType,
    {
        let mut guard = self.connection.lock().await;
        let connection = match guard.as_ref() {
            Some(c) => c.clone(),
            None => {
                let c = connect().await?;
                *guard = Some(c.clone());
                c
            }
        };
        drop(guard);
        let call = connection.call_method(Some(DESTINATION), PATH, Some(MANAGER), method, body);
        let result = tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| SystemdError::Timeout { method, unit: unit.to_string() })?;
        match result {
            Ok(_) => Ok(()),
            Err(source) => {
                if !matches!(source, zbus::Error::MethodError(..)) {
                    // A transport failure: the next call connects afresh.
                    *self.connection.lock().await = None;
                }
                Err(SystemdError::Call { method, unit: unit.to_string(), source })
            }
        }
    }

    /// Creates and starts a transient unit (a slice, or a scope holding `Property::Pids`).
    pub async fn start_transient(&self, unit: &str, properties: &[Property]) -> Result<(), SystemdError> {
        let props: Vec<(&str, Variant<'_>)> = properties.iter().map(Property::pair).collect();
        let aux: Vec<(&str, Vec<(&str, Variant<'_>)>)> = Vec::new();
        self.call("StartTransientUnit", unit, &(unit, "fail", props, aux)).await
    }

    /// Sets properties of a loaded unit until the next boot (a runtime drop-in, which
    /// survives `systemctl daemon-reload`).
    pub async fn set_properties(&self, unit: &str, properties: &[Property]) -> Result<(), SystemdError> {
        let props: Vec<(&str, Variant<'_>)> = properties.iter().map(Property::pair).collect();
        self.call("SetUnitProperties", unit, &(unit, true, props)).await
    }

    /// Stops a unit; one that is not loaded is already stopped.
    pub async fn stop(&self, unit: &str) -> Result<(), SystemdError> {
        match self.call("StopUnit", unit, &(unit, "replace")).await {
            Err(e) if e.no_such_unit() => Ok(()),
            other => other,
        }
    }
}

/// Whether systemd is the node's service manager (what `sd_booted` checks).
pub fn booted(fs_root: &std::path::Path) -> bool {
    fs_root.join("run/systemd/system").is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_have_systemds_names_and_types() {
        let cases = [
            (Property::MemoryMin(4096), "MemoryMin", "t"),
            (Property::MemoryLow(1), "MemoryLow", "t"),
            (Property::Description("x".into()), "Description", "s"),
            (Property::Slice("a.slice".into()), "Slice", "s"),
            (Property::Pids(vec![1, 2]), "PIDs", "au"),
            (Property::CollectInactiveOrFailed, "CollectMode", "s"),
            (Property::CpuWeight(10), "CPUWeight", "t"),
            (Property::IoWeight(10), "IOWeight", "t"),
            (Property::CpuQuotaPerSecUSec(100_000), "CPUQuotaPerSecUSec", "t"),
        ];
        for (property, name, signature) in cases {
            let (n, v) = property.pair();
            assert_eq!(n, name);
            assert_eq!(v.value_signature().to_string(), signature, "{name}");
        }
    }
}
