//! Pod and container events, relayed to every subscribed plugin in index order. Events
//! whose outcome the runtime waits on (run, create, start, update) fail with the first
//! plugin that fails them; the rest are told and their failures logged.

use std::sync::Arc;
use std::time::Instant;

use super::adaptation::Nri;
use super::adjust::Adjustment;
use super::api::{self, Event};
use super::error::NriError;
use super::plugin::{Plugin, PluginId};
use super::rpc::CallError;

/// What the plugins made of a container being created.
#[derive(Debug, Default)]
pub struct Created {
    pub adjustment: Adjustment,
    /// Updates and evictions for other containers, applied once this one is recorded.
    pub updates: Vec<(PluginId, api::ContainerUpdate)>,
    pub evictions: Vec<(PluginId, api::ContainerEviction)>,
}

type Pod<'a> = &'a api::PodSandbox;
type Ctr<'a> = &'a api::Container;

impl Nri {
    fn subscribed(&self, event: Event) -> Vec<Arc<Plugin>> {
        if !self.enabled() {
            return Vec::new();
        }
        self.connected().into_iter().filter(|p| p.subscribed(event)).collect()
    }

    /// Counts the call; a plugin that timed out or went away is dropped. One dropped while
    /// the call waited its turn is passed over, as if it had gone before the event.
    async fn outcome<T: Default>(
        &self,
        plugin: &Arc<Plugin>,
        event: &'static str,
        started: Instant,
        result: Result<T, CallError>,
    ) -> Result<T, NriError> {
        if let Err(CallError::Closed) = result {
            return Ok(T::default());
        }
        self.stats.observe(&plugin.id, event, started.elapsed(), result.is_err());
        let e = match result {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let name = plugin.id.to_string();
        if e.is_fatal() {
            self.remove(plugin, &format!("{event}: {e}"));
        }
        Err(match e {
            CallError::Timeout(timeout) => NriError::Timeout { plugin: name, event, timeout },
            e if e.is_fatal() => NriError::Lost { plugin: name, event, message: e.to_string() },
            e => NriError::Plugin { plugin: name, event, message: e.to_string() },
        })
    }

    /// An event without a reply: each subscribed plugin is told in turn.
    async fn notify<Req: prost::Message>(
        &self,
        event: Event,
        method: &'static str,
        request: &Req,
        pod: Pod<'_>,
        container: Option<Ctr<'_>>,
        fail_fast: bool,
    ) -> Result<(), NriError> {
        for plugin in self.subscribed(event) {
            let started = Instant::now();
            let result = plugin.notify(method, request, event, Some(pod), container).await;
            if let Err(e) = self.outcome(&plugin, method, started, result).await {
                if fail_fast {
                    return Err(e);
                }
                tracing::warn!(error = %e, "NRI event");
            }
        }
        Ok(())
    }

    pub async fn run_pod_sandbox(&self, pod: Pod<'_>) -> Result<(), NriError> {
        let request = api::RunPodSandboxRequest { pod: Some(pod.clone()) };
        self.notify(Event::RunPodSandbox, "RunPodSandbox", &request, pod, None, true).await
    }

    pub async fn stop_pod_sandbox(&self, pod: Pod<'_>) {
        let request = api::StopPodSandboxRequest { pod: Some(pod.clone()) };
        let _ = self.notify(Event::StopPodSandbox, "StopPodSandbox", &request, pod, None, false).await;
    }

    pub async fn remove_pod_sandbox(&self, pod: Pod<'_>) {
        let request = api::RemovePodSandboxRequest { pod: Some(pod.clone()) };
        let _ = self.notify(Event::RemovePodSandbox, "RemovePodSandbox", &request, pod, None, false).await;
    }

    pub async fn update_pod_sandbox(
        &self,
        pod: Pod<'_>,
        overhead: Option<api::LinuxResources>,
        resources: Option<api::LinuxResources>,
    ) -> Result<(), NriError> {
        let request = api::UpdatePodSandboxRequest {
            pod: Some(pod.clone()),
            overhead_linux_resources: overhead,
            linux_resources: resources,
        };
        for plugin in self.subscribed(Event::UpdatePodSandbox) {
            let started = Instant::now();
            let result = plugin.call::<_, api::UpdatePodSandboxResponse>("UpdatePodSandbox", &request, None).await;
            self.outcome(&plugin, "UpdatePodSandbox", started, result).await?;
        }
        let request = api::PostUpdatePodSandboxRequest { pod: Some(pod.clone()) };
        self.notify(Event::PostUpdatePodSandbox, "PostUpdatePodSandbox", &request, pod, None, false).await
    }

    /// CreateContainer: each plugin's adjustment merged in order (a conflict fails the
    /// create), each plugin seeing the container as those before it left it; then checked
    /// by the plugins that validate adjustments.
    pub async fn create_container(&self, pod: Pod<'_>, container: Ctr<'_>) -> Result<Created, NriError> {
        let mut request = api::CreateContainerRequest { pod: Some(pod.clone()), container: Some(container.clone()) };
        let mut created = Created::default();
        for plugin in self.subscribed(Event::CreateContainer) {
            let started = Instant::now();
            let result = plugin.call::<_, api::CreateContainerResponse>("CreateContainer", &request, None).await;
            let reply = self.outcome(&plugin, "CreateContainer", started, result).await?;
            let seen = request.container.get_or_insert_with(Default::default);
            if let Some(adjust) = &reply.adjust {
                created.adjustment.merge(&plugin.id, adjust)?;
                *seen = super::view::adjusted(seen, adjust);
            }
            for update in reply.update {
                // An update of the container being created is part of its adjustment.
                match (update.container_id == container.id, update.linux.as_ref().and_then(|l| l.resources.as_ref())) {
                    (true, Some(resources)) => {
                        created.adjustment.merge_resources(&plugin.id, resources)?;
                        let linux = seen.linux.get_or_insert_with(Default::default);
                        super::view::overlay(linux.resources.get_or_insert_with(Default::default), resources);
                    }
                    (true, None) => {}
                    (false, _) => created.updates.push((plugin.id.clone(), update)),
                }
            }
            created.evictions.extend(reply.evict.into_iter().map(|e| (plugin.id.clone(), e)));
        }
        self.validate(pod, container, &created).await?;
        Ok(created)
    }

    async fn validate(&self, pod: Pod<'_>, container: Ctr<'_>, created: &Created) -> Result<(), NriError> {
        let validators = self.subscribed(Event::ValidateContainerAdjustment);
        if validators.is_empty() {
            return Ok(());
        }
        let request = api::ValidateContainerAdjustmentRequest {
            pod: Some(pod.clone()),
            container: Some(container.clone()),
            adjust: Some(super::validate::to_api(&created.adjustment)),
            update: created.updates.iter().map(|(_, u)| u.clone()).collect(),
            owners: Some(super::validate::owners(&container.id, &created.adjustment)),
            plugins: self
                .connected()
                .iter()
                .map(|p| api::PluginInstance { name: p.id.name.clone(), index: p.id.index.clone() })
                .collect(),
        };
        for plugin in validators {
            let started = Instant::now();
            let result = plugin
                .call::<_, api::ValidateContainerAdjustmentResponse>("ValidateContainerAdjustment", &request, None)
                .await;
            let reply = self.outcome(&plugin, "ValidateContainerAdjustment", started, result).await?;
            if reply.reject {
                return Err(NriError::Refused {
                    plugin: plugin.id.to_string(),
                    field: "the adjustment".into(),
                    reason: reply.reason,
                });
            }
        }
        Ok(())
    }

    /// After the container is recorded: the other containers' updates and evictions.
    pub async fn created(&self, created: Created) {
        for (plugin, update) in created.updates {
            self.apply_updates(&plugin, vec![update], Vec::new()).await;
        }
        for (plugin, eviction) in created.evictions {
            self.apply_updates(&plugin, Vec::new(), vec![eviction]).await;
        }
    }

    pub async fn post_create_container(&self, pod: Pod<'_>, container: Ctr<'_>) {
        let request = api::PostCreateContainerRequest { pod: Some(pod.clone()), container: Some(container.clone()) };
        let _ =
            self.notify(Event::PostCreateContainer, "PostCreateContainer", &request, pod, Some(container), false).await;
    }

    pub async fn start_container(&self, pod: Pod<'_>, container: Ctr<'_>) -> Result<(), NriError> {
        let request = api::StartContainerRequest { pod: Some(pod.clone()), container: Some(container.clone()) };
        self.notify(Event::StartContainer, "StartContainer", &request, pod, Some(container), true).await
    }

    pub async fn post_start_container(&self, pod: Pod<'_>, container: Ctr<'_>) {
        let request = api::PostStartContainerRequest { pod: Some(pod.clone()), container: Some(container.clone()) };
        let _ =
            self.notify(Event::PostStartContainer, "PostStartContainer", &request, pod, Some(container), false).await;
    }

    /// UpdateContainer: plugins may change this update (returned merged, by owner) and ask
    /// for updates of other containers (applied here, after).
    pub async fn update_container(
        &self,
        pod: Pod<'_>,
        container: Ctr<'_>,
        resources: &api::LinuxResources,
    ) -> Result<(Adjustment, Vec<(PluginId, api::ContainerUpdate)>), NriError> {
        let request = api::UpdateContainerRequest {
            pod: Some(pod.clone()),
            container: Some(container.clone()),
            linux_resources: Some(resources.clone()),
        };
        let (mut own, mut others) = (Adjustment::default(), Vec::new());
        for plugin in self.subscribed(Event::UpdateContainer) {
            let started = Instant::now();
            let result = plugin.call::<_, api::UpdateContainerResponse>("UpdateContainer", &request, None).await;
            let reply = self.outcome(&plugin, "UpdateContainer", started, result).await?;
            for update in reply.update {
                match (update.container_id == container.id, update.linux.as_ref().and_then(|l| l.resources.as_ref())) {
                    (true, Some(r)) => own.merge_resources(&plugin.id, r)?,
                    (true, None) => {}
                    (false, _) => others.push((plugin.id.clone(), update)),
                }
            }
            if !reply.evict.is_empty() {
                self.apply_updates(&plugin.id, Vec::new(), reply.evict).await;
            }
        }
        Ok((own, others))
    }

    pub async fn post_update_container(&self, pod: Pod<'_>, container: Ctr<'_>) {
        let request = api::PostUpdateContainerRequest { pod: Some(pod.clone()), container: Some(container.clone()) };
        let _ =
            self.notify(Event::PostUpdateContainer, "PostUpdateContainer", &request, pod, Some(container), false).await;
    }

    /// StopContainer: plugins may answer with updates of the remaining containers.
    pub async fn stop_container(&self, pod: Pod<'_>, container: Ctr<'_>) {
        let request = api::StopContainerRequest { pod: Some(pod.clone()), container: Some(container.clone()) };
        for plugin in self.subscribed(Event::StopContainer) {
            let started = Instant::now();
            let result = plugin
                .notify_with_reply::<_, api::StopContainerResponse>(
                    "StopContainer",
                    &request,
                    Event::StopContainer,
                    Some(pod),
                    Some(container),
                )
                .await;
            match self.outcome(&plugin, "StopContainer", started, result).await {
                Ok(reply) if !reply.update.is_empty() => {
                    self.apply_updates(&plugin.id, reply.update, Vec::new()).await;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "NRI event"),
            }
        }
    }

    pub async fn remove_container(&self, pod: Pod<'_>, container: Ctr<'_>) {
        let request = api::RemoveContainerRequest { pod: Some(pod.clone()), container: Some(container.clone()) };
        let _ = self.notify(Event::RemoveContainer, "RemoveContainer", &request, pod, Some(container), false).await;
    }
}
