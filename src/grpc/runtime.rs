//! CRI RuntimeService adapter. RPCs this build does not serve answer Unimplemented.

use std::sync::Arc;

use crate::cri;
use crate::cri::runtime_service_server::RuntimeService as CriRuntimeService;
use tonic::{Request, Response, Status};

use crate::config::CgroupDriver;
use crate::error::Error;
use crate::service::{PodService, RuntimeService, StreamWants, StreamingService};

use super::stream::{batched, ListStream};
use super::{convert, convert_metrics, convert_pods, convert_stats};
use crate::error::CallEnd;
use tracing::Instrument;

pub struct RuntimeApi {
    runtime: Arc<RuntimeService>,
    pods: Arc<PodService>,
    streaming: StreamingService,
}

impl RuntimeApi {
    pub fn new(runtime: Arc<RuntimeService>, pods: Arc<PodService>, streaming: StreamingService) -> Self {
        RuntimeApi { runtime, pods, streaming }
    }
}

impl RuntimeApi {
    /// Every pod's CRI metrics (List and Stream answer the same), read off the async threads.
    async fn pod_metrics(&self) -> Result<Vec<cri::PodSandboxMetrics>, Error> {
        let pods = self.pods.clone();
        let samples = blocking(move || pods.pod_metrics()).await?;
        Ok(samples.iter().map(convert_metrics::pod_metrics).collect())
    }
}

/// A required id field.
fn required(value: &str, field: &str) -> Result<String, Error> {
    if value.is_empty() {
        Err(Error::InvalidArgument(format!("{field} is required")))
    } else {
        Ok(value.to_string())
    }
}

fn info_map(info: Option<String>) -> std::collections::HashMap<String, String> {
    info.map(|i| [("info".to_string(), i)].into()).unwrap_or_default()
}

/// Runs file-reading work off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
    Ok(crate::blocking::spawn(f).await?)
}

#[tonic::async_trait]
impl CriRuntimeService for RuntimeApi {
    async fn version(&self, _request: Request<cri::VersionRequest>) -> Result<Response<cri::VersionResponse>, Status> {
        Ok(Response::new(convert::version(self.runtime.version())))
    }

    async fn status(&self, request: Request<cri::StatusRequest>) -> Result<Response<cri::StatusResponse>, Status> {
        let status = self.runtime.status(request.into_inner().verbose, &self.pods).await;
        Ok(Response::new(convert::status(status)))
    }

    async fn runtime_config(
        &self,
        _request: Request<cri::RuntimeConfigRequest>,
    ) -> Result<Response<cri::RuntimeConfigResponse>, Status> {
        let cgroup_driver = match self.runtime.cgroup_driver() {
            CgroupDriver::Cgroupfs => cri::CgroupDriver::Cgroupfs,
            CgroupDriver::Systemd => cri::CgroupDriver::Systemd,
        };
        Ok(Response::new(cri::RuntimeConfigResponse {
            linux: Some(cri::LinuxRuntimeConfiguration { cgroup_driver: cgroup_driver as i32 }),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        request: Request<cri::RunPodSandboxRequest>,
    ) -> Result<Response<cri::RunPodSandboxResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "RunPodSandbox");
        async {
            let config = req.config.ok_or_else(|| Error::InvalidArgument("sandbox config is required".into()))?;
            let id = self.pods.run_sandbox(config, &req.runtime_handler).await?;
            Ok(Response::new(cri::RunPodSandboxResponse { pod_sandbox_id: id.to_string() }))
        }
        .instrument(span)
        .await
    }

    async fn stop_pod_sandbox(
        &self,
        request: Request<cri::StopPodSandboxRequest>,
    ) -> Result<Response<cri::StopPodSandboxResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "StopPodSandbox", id = %req.pod_sandbox_id);
        async {
            self.pods.stop_sandbox(&required(&req.pod_sandbox_id, "pod_sandbox_id")?).await?;
            Ok(Response::new(cri::StopPodSandboxResponse {}))
        }
        .instrument(span)
        .await
    }

    async fn remove_pod_sandbox(
        &self,
        request: Request<cri::RemovePodSandboxRequest>,
    ) -> Result<Response<cri::RemovePodSandboxResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "RemovePodSandbox", id = %req.pod_sandbox_id);
        async {
            self.pods.remove_sandbox(&required(&req.pod_sandbox_id, "pod_sandbox_id")?).await?;
            Ok(Response::new(cri::RemovePodSandboxResponse {}))
        }
        .instrument(span)
        .await
    }

    async fn pod_sandbox_status(
        &self,
        request: Request<cri::PodSandboxStatusRequest>,
    ) -> Result<Response<cri::PodSandboxStatusResponse>, Status> {
        let req = request.into_inner();
        let view = self.pods.sandbox_status(&required(&req.pod_sandbox_id, "pod_sandbox_id")?, req.verbose).await?;
        Ok(Response::new(cri::PodSandboxStatusResponse {
            status: Some(convert_pods::sandbox_status(&view.sandbox)),
            info: info_map(view.info),
            containers_statuses: view.containers.iter().map(convert_pods::container_status).collect(),
            timestamp: view.timestamp,
        }))
    }

    async fn list_pod_sandbox(
        &self,
        request: Request<cri::ListPodSandboxRequest>,
    ) -> Result<Response<cri::ListPodSandboxResponse>, Status> {
        let req = request.into_inner();
        let items = self.pods.list_sandboxes(req.filter.as_ref()).iter().map(convert_pods::sandbox).collect();
        Ok(Response::new(cri::ListPodSandboxResponse { items }))
    }

    type StreamPodSandboxesStream = ListStream<cri::StreamPodSandboxesResponse>;

    async fn stream_pod_sandboxes(
        &self,
        request: Request<cri::StreamPodSandboxesRequest>,
    ) -> Result<Response<Self::StreamPodSandboxesStream>, Status> {
        let req = request.into_inner();
        let items = self.pods.list_sandboxes(req.filter.as_ref()).iter().map(convert_pods::sandbox).collect();
        Ok(Response::new(batched(items, |pod_sandboxes| cri::StreamPodSandboxesResponse { pod_sandboxes })))
    }

    async fn create_container(
        &self,
        request: Request<cri::CreateContainerRequest>,
    ) -> Result<Response<cri::CreateContainerResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "CreateContainer", sandbox = %req.pod_sandbox_id);
        async {
            let config = req.config.ok_or_else(|| Error::InvalidArgument("container config is required".into()))?;
            // The sandbox config kubelet sends again is not used: the one stored at
            // RunPodSandbox is authoritative.
            let id = self.pods.create_container(&required(&req.pod_sandbox_id, "pod_sandbox_id")?, config).await?;
            Ok(Response::new(cri::CreateContainerResponse { container_id: id.to_string() }))
        }
        .instrument(span)
        .await
    }

    async fn start_container(
        &self,
        request: Request<cri::StartContainerRequest>,
    ) -> Result<Response<cri::StartContainerResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "StartContainer", id = %req.container_id);
        async {
            self.pods.start_container(&required(&req.container_id, "container_id")?).await?;
            Ok(Response::new(cri::StartContainerResponse {}))
        }
        .instrument(span)
        .await
    }

    async fn stop_container(
        &self,
        request: Request<cri::StopContainerRequest>,
    ) -> Result<Response<cri::StopContainerResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "StopContainer", id = %req.container_id);
        async {
            let timeout = std::time::Duration::from_secs(req.timeout.max(0) as u64);
            self.pods.stop_container(&required(&req.container_id, "container_id")?, timeout).await?;
            Ok(Response::new(cri::StopContainerResponse {}))
        }
        .instrument(span)
        .await
    }

    async fn remove_container(
        &self,
        request: Request<cri::RemoveContainerRequest>,
    ) -> Result<Response<cri::RemoveContainerResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "RemoveContainer", id = %req.container_id);
        async {
            self.pods.remove_container(&required(&req.container_id, "container_id")?).await?;
            Ok(Response::new(cri::RemoveContainerResponse {}))
        }
        .instrument(span)
        .await
    }

    async fn list_containers(
        &self,
        request: Request<cri::ListContainersRequest>,
    ) -> Result<Response<cri::ListContainersResponse>, Status> {
        let req = request.into_inner();
        let containers = self.pods.list_containers(req.filter.as_ref()).iter().map(convert_pods::container).collect();
        Ok(Response::new(cri::ListContainersResponse { containers }))
    }

    type StreamContainersStream = ListStream<cri::StreamContainersResponse>;

    async fn stream_containers(
        &self,
        request: Request<cri::StreamContainersRequest>,
    ) -> Result<Response<Self::StreamContainersStream>, Status> {
        let req = request.into_inner();
        let items = self.pods.list_containers(req.filter.as_ref()).iter().map(convert_pods::container).collect();
        Ok(Response::new(batched(items, |containers| cri::StreamContainersResponse { containers })))
    }

    async fn container_status(
        &self,
        request: Request<cri::ContainerStatusRequest>,
    ) -> Result<Response<cri::ContainerStatusResponse>, Status> {
        let req = request.into_inner();
        let (container, info) =
            self.pods.container_status(&required(&req.container_id, "container_id")?, req.verbose)?;
        Ok(Response::new(cri::ContainerStatusResponse {
            status: Some(convert_pods::container_status(&container)),
            info: info_map(info),
        }))
    }

    async fn update_container_resources(
        &self,
        request: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Result<Response<cri::UpdateContainerResourcesResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "UpdateContainerResources", id = %req.container_id);
        async {
            self.pods.update_container(&required(&req.container_id, "container_id")?, req.linux).await?;
            Ok(Response::new(cri::UpdateContainerResourcesResponse {}))
        }
        .instrument(span)
        .await
    }

    async fn reopen_container_log(
        &self,
        request: Request<cri::ReopenContainerLogRequest>,
    ) -> Result<Response<cri::ReopenContainerLogResponse>, Status> {
        let req = request.into_inner();
        self.pods.reopen_log(&required(&req.container_id, "container_id")?).await?;
        Ok(Response::new(cri::ReopenContainerLogResponse {}))
    }

    async fn exec_sync(
        &self,
        request: Request<cri::ExecSyncRequest>,
    ) -> Result<Response<cri::ExecSyncResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::debug_span!("rpc", method = "ExecSync", id = %req.container_id);
        async {
            let timeout = (req.timeout > 0).then(|| std::time::Duration::from_secs(req.timeout as u64));
            let out = self.pods.exec_sync(&required(&req.container_id, "container_id")?, req.cmd, timeout).await?;
            Ok(Response::new(cri::ExecSyncResponse {
                stdout: out.stdout,
                stderr: out.stderr,
                exit_code: out.exit_code,
            }))
        }
        .instrument(span)
        .await
    }

    async fn exec(&self, request: Request<cri::ExecRequest>) -> Result<Response<cri::ExecResponse>, Status> {
        let r = request.into_inner();
        let wants = StreamWants { tty: r.tty, stdin: r.stdin, stdout: r.stdout, stderr: r.stderr };
        let url = self.streaming.exec(&required(&r.container_id, "container_id")?, r.cmd, wants)?;
        Ok(Response::new(cri::ExecResponse { url }))
    }

    async fn attach(&self, request: Request<cri::AttachRequest>) -> Result<Response<cri::AttachResponse>, Status> {
        let r = request.into_inner();
        let wants = StreamWants { tty: r.tty, stdin: r.stdin, stdout: r.stdout, stderr: r.stderr };
        let url = self.streaming.attach(&required(&r.container_id, "container_id")?, wants)?;
        Ok(Response::new(cri::AttachResponse { url }))
    }

    async fn port_forward(
        &self,
        request: Request<cri::PortForwardRequest>,
    ) -> Result<Response<cri::PortForwardResponse>, Status> {
        let r = request.into_inner();
        let url = self.streaming.port_forward(&required(&r.pod_sandbox_id, "pod_sandbox_id")?, &r.port)?;
        Ok(Response::new(cri::PortForwardResponse { url }))
    }

    async fn container_stats(
        &self,
        request: Request<cri::ContainerStatsRequest>,
    ) -> Result<Response<cri::ContainerStatsResponse>, Status> {
        let id = required(&request.into_inner().container_id, "container_id")?;
        let pods = self.pods.clone();
        let sample = blocking(move || pods.container_stats(&id)).await??;
        Ok(Response::new(cri::ContainerStatsResponse { stats: Some(convert_stats::container_stats(&sample)) }))
    }

    async fn list_container_stats(
        &self,
        request: Request<cri::ListContainerStatsRequest>,
    ) -> Result<Response<cri::ListContainerStatsResponse>, Status> {
        let filter = request.into_inner().filter;
        let pods = self.pods.clone();
        let samples = blocking(move || pods.list_container_stats(filter.as_ref())).await?;
        Ok(Response::new(cri::ListContainerStatsResponse {
            stats: samples.iter().map(convert_stats::container_stats).collect(),
        }))
    }

    type StreamContainerStatsStream = ListStream<cri::StreamContainerStatsResponse>;

    async fn stream_container_stats(
        &self,
        request: Request<cri::StreamContainerStatsRequest>,
    ) -> Result<Response<Self::StreamContainerStatsStream>, Status> {
        let filter = request.into_inner().filter;
        let pods = self.pods.clone();
        let samples = blocking(move || pods.list_container_stats(filter.as_ref())).await?;
        let stats = samples.iter().map(convert_stats::container_stats).collect();
        Ok(Response::new(batched(stats, |container_stats| cri::StreamContainerStatsResponse { container_stats })))
    }

    async fn pod_sandbox_stats(
        &self,
        request: Request<cri::PodSandboxStatsRequest>,
    ) -> Result<Response<cri::PodSandboxStatsResponse>, Status> {
        let id = required(&request.into_inner().pod_sandbox_id, "pod_sandbox_id")?;
        let pods = self.pods.clone();
        let sample = blocking(move || pods.pod_stats(&id)).await??;
        Ok(Response::new(cri::PodSandboxStatsResponse { stats: Some(convert_stats::pod_stats(&sample)) }))
    }

    async fn list_pod_sandbox_stats(
        &self,
        request: Request<cri::ListPodSandboxStatsRequest>,
    ) -> Result<Response<cri::ListPodSandboxStatsResponse>, Status> {
        let filter = request.into_inner().filter;
        let pods = self.pods.clone();
        let samples = blocking(move || pods.list_pod_stats(filter.as_ref())).await?;
        Ok(Response::new(cri::ListPodSandboxStatsResponse {
            stats: samples.iter().map(convert_stats::pod_stats).collect(),
        }))
    }

    type StreamPodSandboxStatsStream = ListStream<cri::StreamPodSandboxStatsResponse>;

    async fn stream_pod_sandbox_stats(
        &self,
        request: Request<cri::StreamPodSandboxStatsRequest>,
    ) -> Result<Response<Self::StreamPodSandboxStatsStream>, Status> {
        let filter = request.into_inner().filter;
        let pods = self.pods.clone();
        let samples = blocking(move || pods.list_pod_stats(filter.as_ref())).await?;
        let stats = samples.iter().map(convert_stats::pod_stats).collect();
        Ok(Response::new(batched(stats, |pod_sandbox_stats| cri::StreamPodSandboxStatsResponse { pod_sandbox_stats })))
    }

    async fn update_runtime_config(
        &self,
        request: Request<cri::UpdateRuntimeConfigRequest>,
    ) -> Result<Response<cri::UpdateRuntimeConfigResponse>, Status> {
        let cidr = request.into_inner().runtime_config.and_then(|c| c.network_config).map(|n| n.pod_cidr);
        self.pods.set_pod_cidr(cidr.as_deref().unwrap_or(""))?;
        Ok(Response::new(cri::UpdateRuntimeConfigResponse {}))
    }

    async fn checkpoint_container(
        &self,
        request: Request<cri::CheckpointContainerRequest>,
    ) -> Result<Response<cri::CheckpointContainerResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "CheckpointContainer", id = %req.container_id);
        async {
            let id = required(&req.container_id, "container_id")?;
            self.pods.checkpoint_container(&id, &req.location, req.timeout).await?;
            Ok(Response::new(cri::CheckpointContainerResponse {}))
        }
        .instrument(span)
        .await
    }

    type GetContainerEventsStream = futures::stream::BoxStream<'static, Result<cri::ContainerEventResponse, Status>>;

    /// Lifecycle events until the client goes away; a client that falls more than the
    /// buffer behind is dropped with ResourceExhausted (and may subscribe again).
    async fn get_container_events(
        &self,
        _request: Request<cri::GetEventsRequest>,
    ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
        let receiver = self.pods.subscribe_events();
        tracing::info!("container events subscriber connected");
        let stream = futures::stream::unfold(Some(receiver), |receiver| async move {
            let mut receiver = receiver?;
            match receiver.recv().await {
                Ok(event) => Some((Ok(convert_pods::event(&event)), Some(receiver))),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "container events subscriber too slow: dropped");
                    let status = Status::from(CallEnd::EventsLagged(missed));
                    Some((Err(status), None))
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => None,
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_metric_descriptors(
        &self,
        _request: Request<cri::ListMetricDescriptorsRequest>,
    ) -> Result<Response<cri::ListMetricDescriptorsResponse>, Status> {
        Ok(Response::new(cri::ListMetricDescriptorsResponse { descriptors: convert_metrics::descriptors() }))
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _request: Request<cri::ListPodSandboxMetricsRequest>,
    ) -> Result<Response<cri::ListPodSandboxMetricsResponse>, Status> {
        Ok(Response::new(cri::ListPodSandboxMetricsResponse { pod_metrics: self.pod_metrics().await? }))
    }

    type StreamPodSandboxMetricsStream = ListStream<cri::StreamPodSandboxMetricsResponse>;

    async fn stream_pod_sandbox_metrics(
        &self,
        _request: Request<cri::StreamPodSandboxMetricsRequest>,
    ) -> Result<Response<Self::StreamPodSandboxMetricsStream>, Status> {
        Ok(Response::new(batched(self.pod_metrics().await?, |pod_sandbox_metrics| {
            cri::StreamPodSandboxMetricsResponse { pod_sandbox_metrics }
        })))
    }

    async fn update_pod_sandbox_resources(
        &self,
        request: Request<cri::UpdatePodSandboxResourcesRequest>,
    ) -> Result<Response<cri::UpdatePodSandboxResourcesResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("rpc", method = "UpdatePodSandboxResources", id = %req.pod_sandbox_id);
        async {
            let id = required(&req.pod_sandbox_id, "pod_sandbox_id")?;
            self.pods.update_sandbox_resources(&id, req.overhead, req.resources).await?;
            Ok(Response::new(cri::UpdatePodSandboxResourcesResponse {}))
        }
        .instrument(span)
        .await
    }
}
