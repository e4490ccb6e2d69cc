//! What pod and container requests do to the node beyond swapcri's own files: namespaces,
//! mounts and monitor processes. The daemon acts on the node (`NodeHost`); the CRI fuzzer
//! puts a recording stand-in here, so any request can be driven in-process.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::model::sandbox::ProcessRef;
use crate::monitor::MonitorError;
use crate::sandbox::{self, NsRequest, Shared};

#[async_trait]
pub trait Host: Send + Sync {
    /// Makes the pod's namespaces, pinned at the request's paths; returns the PID holder.
    fn create_namespaces(&self, request: &NsRequest, work_dir: &Path) -> Result<Option<ProcessRef>, String>;
    /// Unpins the pod's namespaces and stops its holder. Idempotent.
    fn release_namespaces(&self, request: &NsRequest, holder: Option<ProcessRef>);
    fn mount_tmpfs(&self, target: &Path, options: &[String]) -> io::Result<()>;
    /// overlayfs at `target` with `data` (`lowerdir=…[,upperdir=…,workdir=…]`).
    fn mount_overlay(&self, target: &Path, data: &str, read_only: bool) -> io::Result<()>;
    /// A bind mount of `source` id-mapped through the user namespace `userns`.
    fn bind_mapped(&self, source: &Path, target: &Path, userns: &File, read_only: bool) -> io::Result<()>;
    /// Makes the mount holding `path` shared (see `sandbox::ensure_shared`).
    fn ensure_shared(&self, path: &Path) -> io::Result<Shared>;
    /// Unmounts `target`; a path that is not mounted is fine.
    fn unmount(&self, target: &Path) -> io::Result<()>;
    /// Starts a container's monitor with its configuration file; returns the monitor and
    /// the container's init pid once the runtime created it.
    async fn spawn_monitor(
        &self,
        config: &Path,
        stderr_log: &Path,
        timeout: Duration,
    ) -> Result<(ProcessRef, i32), MonitorError>;
}

/// The node itself, with the monitors started ahead of need.
pub struct NodeHost {
    spares: Arc<crate::monitor::Spares>,
}

impl NodeHost {
    /// `spare_monitors`: how many monitors wait, started, for a container to create.
    pub fn new(spare_monitors: usize) -> NodeHost {
        NodeHost { spares: crate::monitor::Spares::new(spare_monitors) }
    }
}

#[async_trait]
impl Host for NodeHost {
    fn create_namespaces(&self, request: &NsRequest, work_dir: &Path) -> Result<Option<ProcessRef>, String> {
        crate::blocking::check("creating namespaces");
        sandbox::create(request, work_dir)
    }

    fn release_namespaces(&self, request: &NsRequest, holder: Option<ProcessRef>) {
        crate::blocking::check("releasing namespaces");
        sandbox::release(request, holder)
    }

    fn mount_tmpfs(&self, target: &Path, options: &[String]) -> io::Result<()> {
        crate::blocking::check("a tmpfs mount");
        sandbox::mount_tmpfs(target, options)
    }

    fn mount_overlay(&self, target: &Path, data: &str, read_only: bool) -> io::Result<()> {
        crate::blocking::check("an overlay mount");
        let flags = if read_only { nix::mount::MsFlags::MS_RDONLY } else { nix::mount::MsFlags::empty() };
        nix::mount::mount(Some("overlay"), target, Some("overlay"), flags, Some(data)).map_err(io::Error::from)
    }

    fn bind_mapped(&self, source: &Path, target: &Path, userns: &File, read_only: bool) -> io::Result<()> {
        crate::blocking::check("an id-mapped bind mount");
        sandbox::bind_mapped(source, target, userns, read_only)
    }

    fn ensure_shared(&self, path: &Path) -> io::Result<Shared> {
        crate::blocking::check("a shared mount");
        sandbox::ensure_shared(path)
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        crate::blocking::check("an unmount");
        sandbox::unmount(target)
    }

    async fn spawn_monitor(
        &self,
        config: &Path,
        stderr_log: &Path,
        timeout: Duration,
    ) -> Result<(ProcessRef, i32), MonitorError> {
        crate::monitor::spawn(&self.spares, config, stderr_log, timeout).await
    }
}
