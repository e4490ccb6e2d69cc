//! Pure conversions of sandboxes and containers to CRI messages.

use crate::cri;

use crate::model::sandbox::SandboxState;
use crate::service::{Container, Sandbox};

fn sandbox_state(state: SandboxState) -> i32 {
    match state {
        SandboxState::Ready => cri::PodSandboxState::SandboxReady as i32,
        SandboxState::NotReady => cri::PodSandboxState::SandboxNotready as i32,
    }
}

pub fn sandbox(s: &Sandbox) -> cri::PodSandbox {
    cri::PodSandbox {
        id: s.meta.id.to_string(),
        metadata: s.meta.config.metadata.clone(),
        state: sandbox_state(s.status.state),
        created_at: s.meta.created_at,
        labels: s.meta.config.labels.clone(),
        annotations: s.meta.config.annotations.clone(),
        runtime_handler: s.meta.runtime_handler.clone(),
    }
}

pub fn sandbox_status(s: &Sandbox) -> cri::PodSandboxStatus {
    let options = s
        .meta
        .config
        .linux
        .as_ref()
        .and_then(|l| l.security_context.as_ref())
        .and_then(|c| c.namespace_options.clone());
    cri::PodSandboxStatus {
        id: s.meta.id.to_string(),
        metadata: s.meta.config.metadata.clone(),
        state: sandbox_state(s.status.state),
        created_at: s.meta.created_at,
        network: Some(s.status.addresses.as_ref().map_or_else(Default::default, |a| cri::PodSandboxNetworkStatus {
            ip: a.ip.clone(),
            additional_ips: a.additional_ips.iter().map(|ip| cri::PodIp { ip: ip.clone() }).collect(),
        })),
        linux: Some(cri::LinuxPodSandboxStatus { namespaces: Some(cri::Namespace { options }) }),
        labels: s.meta.config.labels.clone(),
        annotations: s.meta.config.annotations.clone(),
        runtime_handler: s.meta.runtime_handler.clone(),
    }
}

pub fn container(c: &Container) -> cri::Container {
    cri::Container {
        id: c.meta.id.to_string(),
        pod_sandbox_id: c.meta.sandbox_id.to_string(),
        metadata: c.meta.config.metadata.clone(),
        image: Some(status_image(c)),
        image_ref: c.meta.image_id.to_string(),
        state: c.status.state.to_cri() as i32,
        created_at: c.meta.created_at,
        labels: c.meta.config.labels.clone(),
        annotations: c.meta.config.annotations.clone(),
        image_id: c.meta.image_id.to_string(),
    }
}

pub fn container_status(c: &Container) -> cri::ContainerStatus {
    cri::ContainerStatus {
        id: c.meta.id.to_string(),
        metadata: c.meta.config.metadata.clone(),
        state: c.status.state.to_cri() as i32,
        created_at: c.meta.created_at,
        started_at: c.status.started_at,
        finished_at: c.status.finished_at,
        exit_code: c.status.exit_code,
        image: Some(status_image(c)),
        image_ref: c.meta.image_id.to_string(),
        reason: c.status.reason.clone(),
        message: c.status.message.clone(),
        labels: c.meta.config.labels.clone(),
        annotations: c.meta.config.annotations.clone(),
        mounts: c.meta.config.mounts.clone(),
        log_path: c.meta.log_path.clone(),
        resources: c
            .status
            .resources
            .clone()
            .map(|linux| cri::ContainerResources { linux: Some(linux), windows: None }),
        image_id: c.meta.image_id.to_string(),
        user: c.meta.user.as_ref().map(|u| cri::ContainerUser {
            linux: Some(cri::LinuxContainerUser {
                uid: u.uid.into(),
                gid: u.gid.into(),
                supplemental_groups: u.additional_gids.iter().map(|g| i64::from(*g)).collect(),
            }),
        }),
        stop_signal: crate::model::container::cri_signal(&c.meta.stop_signal) as i32,
    }
}

pub fn event(e: &crate::service::Event) -> cri::ContainerEventResponse {
    use crate::service::EventKind;
    let kind = match e.kind {
        EventKind::Created => cri::ContainerEventType::ContainerCreatedEvent,
        EventKind::Started => cri::ContainerEventType::ContainerStartedEvent,
        EventKind::Stopped => cri::ContainerEventType::ContainerStoppedEvent,
        EventKind::Deleted => cri::ContainerEventType::ContainerDeletedEvent,
    };
    cri::ContainerEventResponse {
        container_id: e.id.clone(),
        container_event_type: kind as i32,
        created_at: e.created_at,
        pod_sandbox_status: e.sandbox.as_ref().map(sandbox_status),
        containers_statuses: e.containers.iter().map(container_status).collect(),
    }
}

/// The image of a container's status and listing: the name the pod's author wrote when
/// kubelet passed it (what `kubectl get pod` shows and kubelet compares with the pod's spec),
/// else the one the record keeps.
fn status_image(c: &Container) -> cri::ImageSpec {
    let user_specified_image = c.meta.config.image.as_ref().map(|i| i.user_specified_image.clone()).unwrap_or_default();
    let image = if user_specified_image.is_empty() { c.meta.image_ref.clone() } else { user_specified_image.clone() };
    cri::ImageSpec { image, user_specified_image, ..Default::default() }
}
