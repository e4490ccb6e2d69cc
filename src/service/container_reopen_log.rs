use crate::error::Error;

use super::pods::PodService;

impl PodService {
    /// Asks the container's monitor to reopen its log file (after kubelet rotated it).
    pub async fn reopen_log(&self, id: &str) -> Result<(), Error> {
        let container = self.find_container(id)?;
        if container.status.state != crate::model::container::ContainerState::Running {
            return Err(Error::FailedPrecondition(format!("container {} is not running", container.meta.id)));
        }
        let socket = self.container_run_dir(&container.meta.id).join("ctl.sock");
        crate::monitor::reopen_log(&socket).await?;
        Ok(())
    }
}
