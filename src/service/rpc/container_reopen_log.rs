use crate::error::Error;

use crate::service::pod_service::PodService;

impl PodService {
    /// Asks the container's monitor to reopen its log file (after kubelet rotated it).
    pub async fn reopen_log(&self, id: &str) -> Result<(), Error> {
        let container = self.registry.find_container(id)?;
        if container.status.state != crate::model::container::ContainerState::Running {
            return Err(Error::FailedPrecondition(format!("container {} is not running", container.meta.id)));
        }
        let socket = self.registry.socket_path(&container.meta.id, "ctl");
        crate::monitor::reopen_log(&socket).await?;
        Ok(())
    }
}
