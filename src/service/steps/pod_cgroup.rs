//! A pod's cgroup parent: the request's, or one swapcri makes (and, under systemd, starts
//! and stops as a transient slice).

use tracing::Instrument;

use crate::config::CgroupDriver;
use crate::cri;
use crate::error::Error;
use crate::model::ids::SandboxId;
use crate::service::pod_service::PodService;
use crate::service::steps::span;

impl PodService {
    pub(in crate::service) fn layout(&self) -> crate::model::cgroup_layout::Layout {
        crate::model::cgroup_layout::Layout { driver: self.config.runtime.cgroup_driver }
    }

    /// The pod's cgroup parent and whether swapcri owns it: the request's, else one of ours
    /// (`<default_cgroup_parent>/<id>`, or `<parent_slice>-pod<id>.slice` under systemd).
    pub(in crate::service) fn cgroup_parent_of(
        &self,
        id: &SandboxId,
        config: &cri::PodSandboxConfig,
    ) -> (String, bool) {
        let requested = config.linux.as_ref().map(|l| l.cgroup_parent.clone()).unwrap_or_default();
        if !requested.is_empty() {
            return (self.layout().normalize_parent(&requested), false);
        }
        (self.own_cgroup_parent(id.as_str()), true)
    }

    /// The cgroup parent swapcri makes for a pod that asks for none:
    /// `<default_cgroup_parent>/<id>`, or `<parent_slice>-pod<id>.slice` under systemd.
    pub(in crate::service) fn own_cgroup_parent(&self, id: &str) -> String {
        let runtime = &self.config.runtime;
        match runtime.cgroup_driver {
            CgroupDriver::Systemd => {
                crate::model::cgroup_layout::child_slice(&runtime.parent_slice, &format!("pod{id}"))
            }
            CgroupDriver::Cgroupfs => format!("{}/{id}", runtime.default_cgroup_parent.trim_end_matches('/')),
        }
    }

    /// Under systemd, a pod slice of swapcri's own is a transient unit, so it goes without a
    /// trace once stopped (runc would otherwise leave it loaded, made implicitly).
    pub(in crate::service) async fn start_pod_slice(
        &self,
        id: &SandboxId,
        slice: &str,
        owns: bool,
    ) -> Result<(), Error> {
        let Some(systemd) = self.systemd.as_ref().filter(|_| owns) else {
            return Ok(());
        };
        use crate::cgroup::systemd::Property;
        let properties = [Property::Description(format!("swapcri pod {id}")), Property::CollectInactiveOrFailed];
        systemd
            .start_transient(slice, &properties)
            .instrument(span::step("pod slice"))
            .await
            .map_err(|e| Error::Internal(format!("creating the pod slice: {e}")))
    }

    /// Stops a pod slice swapcri owns (systemd driver); its containers' scopes go with it.
    pub(in crate::service) async fn stop_pod_slice(&self, id: &SandboxId, slice: &str, owns: bool) {
        let Some(systemd) = self.systemd.as_ref().filter(|_| owns) else {
            return;
        };
        if let Err(e) = systemd.stop(&slice).await {
            tracing::warn!(sandbox = %id, %slice, error = %e, "cannot stop the pod slice");
        }
    }
}
