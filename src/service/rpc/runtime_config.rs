use crate::config::CgroupDriver;

use crate::service::runtime_service::RuntimeService;

impl RuntimeService {
    /// The cgroup driver kubelet must use with this runtime.
    pub fn cgroup_driver(&self) -> CgroupDriver {
        self.config.runtime.cgroup_driver
    }
}
