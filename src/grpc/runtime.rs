//! CRI RuntimeService adapter. RPCs this build does not serve answer Unimplemented.

use std::sync::Arc;

use k8s_cri::v1 as cri;
use k8s_cri::v1::runtime_service_server::RuntimeService as CriRuntimeService;
use tonic::{Request, Response, Status};

use crate::config::CgroupDriver;
use crate::error::Error;
use crate::service::RuntimeService;

use super::convert;

pub struct RuntimeApi {
    runtime: Arc<RuntimeService>,
}

impl RuntimeApi {
    pub fn new(runtime: Arc<RuntimeService>) -> Self {
        RuntimeApi { runtime }
    }
}

fn unimplemented(method: &'static str) -> Status {
    tracing::debug!(method, "unimplemented RPC called");
    Error::Unimplemented(method).into()
}

#[tonic::async_trait]
impl CriRuntimeService for RuntimeApi {
    async fn version(
        &self,
        _request: Request<cri::VersionRequest>,
    ) -> Result<Response<cri::VersionResponse>, Status> {
        Ok(Response::new(convert::version(self.runtime.version())))
    }

    async fn status(
        &self,
        request: Request<cri::StatusRequest>,
    ) -> Result<Response<cri::StatusResponse>, Status> {
        Ok(Response::new(convert::status(
            self.runtime.status(request.into_inner().verbose),
        )))
    }

    async fn runtime_config(
        &self,
        _request: Request<cri::RuntimeConfigRequest>,
    ) -> Result<Response<cri::RuntimeConfigResponse>, Status> {
        let cgroup_driver = match self.runtime.cgroup_driver() {
            CgroupDriver::Cgroupfs => cri::CgroupDriver::Cgroupfs,
        };
        Ok(Response::new(cri::RuntimeConfigResponse {
            linux: Some(cri::LinuxRuntimeConfiguration {
                cgroup_driver: cgroup_driver as i32,
            }),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        _request: Request<cri::RunPodSandboxRequest>,
    ) -> Result<Response<cri::RunPodSandboxResponse>, Status> {
        Err(unimplemented("RunPodSandbox"))
    }

    async fn stop_pod_sandbox(
        &self,
        _request: Request<cri::StopPodSandboxRequest>,
    ) -> Result<Response<cri::StopPodSandboxResponse>, Status> {
        Err(unimplemented("StopPodSandbox"))
    }

    async fn remove_pod_sandbox(
        &self,
        _request: Request<cri::RemovePodSandboxRequest>,
    ) -> Result<Response<cri::RemovePodSandboxResponse>, Status> {
        Err(unimplemented("RemovePodSandbox"))
    }

    async fn pod_sandbox_status(
        &self,
        _request: Request<cri::PodSandboxStatusRequest>,
    ) -> Result<Response<cri::PodSandboxStatusResponse>, Status> {
        Err(unimplemented("PodSandboxStatus"))
    }

    async fn list_pod_sandbox(
        &self,
        _request: Request<cri::ListPodSandboxRequest>,
    ) -> Result<Response<cri::ListPodSandboxResponse>, Status> {
        Err(unimplemented("ListPodSandbox"))
    }

    async fn create_container(
        &self,
        _request: Request<cri::CreateContainerRequest>,
    ) -> Result<Response<cri::CreateContainerResponse>, Status> {
        Err(unimplemented("CreateContainer"))
    }

    async fn start_container(
        &self,
        _request: Request<cri::StartContainerRequest>,
    ) -> Result<Response<cri::StartContainerResponse>, Status> {
        Err(unimplemented("StartContainer"))
    }

    async fn stop_container(
        &self,
        _request: Request<cri::StopContainerRequest>,
    ) -> Result<Response<cri::StopContainerResponse>, Status> {
        Err(unimplemented("StopContainer"))
    }

    async fn remove_container(
        &self,
        _request: Request<cri::RemoveContainerRequest>,
    ) -> Result<Response<cri::RemoveContainerResponse>, Status> {
        Err(unimplemented("RemoveContainer"))
    }

    async fn list_containers(
        &self,
        _request: Request<cri::ListContainersRequest>,
    ) -> Result<Response<cri::ListContainersResponse>, Status> {
        Err(unimplemented("ListContainers"))
    }

    async fn container_status(
        &self,
        _request: Request<cri::ContainerStatusRequest>,
    ) -> Result<Response<cri::ContainerStatusResponse>, Status> {
        Err(unimplemented("ContainerStatus"))
    }

    async fn update_container_resources(
        &self,
        _request: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Result<Response<cri::UpdateContainerResourcesResponse>, Status> {
        Err(unimplemented("UpdateContainerResources"))
    }

    async fn reopen_container_log(
        &self,
        _request: Request<cri::ReopenContainerLogRequest>,
    ) -> Result<Response<cri::ReopenContainerLogResponse>, Status> {
        Err(unimplemented("ReopenContainerLog"))
    }

    async fn exec_sync(
        &self,
        _request: Request<cri::ExecSyncRequest>,
    ) -> Result<Response<cri::ExecSyncResponse>, Status> {
        Err(unimplemented("ExecSync"))
    }

    async fn exec(
        &self,
        _request: Request<cri::ExecRequest>,
    ) -> Result<Response<cri::ExecResponse>, Status> {
        Err(unimplemented("Exec"))
    }

    async fn attach(
        &self,
        _request: Request<cri::AttachRequest>,
    ) -> Result<Response<cri::AttachResponse>, Status> {
        Err(unimplemented("Attach"))
    }

    async fn port_forward(
        &self,
        _request: Request<cri::PortForwardRequest>,
    ) -> Result<Response<cri::PortForwardResponse>, Status> {
        Err(unimplemented("PortForward"))
    }

    async fn container_stats(
        &self,
        _request: Request<cri::ContainerStatsRequest>,
    ) -> Result<Response<cri::ContainerStatsResponse>, Status> {
        Err(unimplemented("ContainerStats"))
    }

    async fn list_container_stats(
        &self,
        _request: Request<cri::ListContainerStatsRequest>,
    ) -> Result<Response<cri::ListContainerStatsResponse>, Status> {
        Err(unimplemented("ListContainerStats"))
    }

    async fn pod_sandbox_stats(
        &self,
        _request: Request<cri::PodSandboxStatsRequest>,
    ) -> Result<Response<cri::PodSandboxStatsResponse>, Status> {
        Err(unimplemented("PodSandboxStats"))
    }

    async fn list_pod_sandbox_stats(
        &self,
        _request: Request<cri::ListPodSandboxStatsRequest>,
    ) -> Result<Response<cri::ListPodSandboxStatsResponse>, Status> {
        Err(unimplemented("ListPodSandboxStats"))
    }

    async fn update_runtime_config(
        &self,
        _request: Request<cri::UpdateRuntimeConfigRequest>,
    ) -> Result<Response<cri::UpdateRuntimeConfigResponse>, Status> {
        Err(unimplemented("UpdateRuntimeConfig"))
    }

    async fn checkpoint_container(
        &self,
        _request: Request<cri::CheckpointContainerRequest>,
    ) -> Result<Response<cri::CheckpointContainerResponse>, Status> {
        Err(unimplemented("CheckpointContainer"))
    }

    type GetContainerEventsStream =
        futures::stream::BoxStream<'static, Result<cri::ContainerEventResponse, Status>>;

    async fn get_container_events(
        &self,
        _request: Request<cri::GetEventsRequest>,
    ) -> Result<Response<Self::GetContainerEventsStream>, Status> {
        Err(unimplemented("GetContainerEvents"))
    }

    async fn list_metric_descriptors(
        &self,
        _request: Request<cri::ListMetricDescriptorsRequest>,
    ) -> Result<Response<cri::ListMetricDescriptorsResponse>, Status> {
        Err(unimplemented("ListMetricDescriptors"))
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _request: Request<cri::ListPodSandboxMetricsRequest>,
    ) -> Result<Response<cri::ListPodSandboxMetricsResponse>, Status> {
        Err(unimplemented("ListPodSandboxMetrics"))
    }
}
