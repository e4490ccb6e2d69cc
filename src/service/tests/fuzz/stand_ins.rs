//! The fuzzer's stand-ins for what would touch the node: a host that records namespaces,
//! mounts and monitors, an OCI runtime that runs nothing, and the one stored image.

use super::*;

/// Namespaces, mounts and monitors, recorded instead of made. A monitor is a `sleep` child
/// standing in for the container's monitor and init (signalled as they would be).
#[derive(Default)]
pub(super) struct FakeHost {
    monitors: Mutex<Vec<std::process::Child>>,
}

#[async_trait]
impl Host for FakeHost {
    fn create_namespaces(&self, request: &NsRequest, _: &Path) -> Result<Option<ProcessRef>, String> {
        crate::blocking::check("creating namespaces");
        Ok(request.pid_holder.then(|| self.stand_in()))
    }

    fn release_namespaces(&self, _: &NsRequest, holder: Option<ProcessRef>) {
        crate::blocking::check("releasing namespaces");
        if let Some(holder) = holder {
            // Never a pid one of our stand-ins left behind: it may be anyone's by now.
            holder.signal(nix::sys::signal::Signal::SIGKILL);
        }
    }

    fn mount_tmpfs(&self, target: &Path, _: &[String]) -> std::io::Result<()> {
        crate::blocking::check("a tmpfs mount");
        std::fs::create_dir_all(target)
    }

    fn mount_overlay(&self, _: &Path, _: &str, _: bool) -> std::io::Result<()> {
        crate::blocking::check("an overlay mount");
        Ok(())
    }

    fn bind_mapped(&self, _: &Path, _: &Path, _: &std::fs::File, _: bool) -> std::io::Result<()> {
        crate::blocking::check("an id-mapped bind mount");
        Ok(())
    }

    fn ensure_shared(&self, _: &Path) -> std::io::Result<Shared> {
        crate::blocking::check("a shared mount");
        Ok(Shared::Already)
    }

    fn unmount(&self, _: &Path) -> std::io::Result<()> {
        crate::blocking::check("an unmount");
        Ok(())
    }

    async fn spawn_monitor(&self, _: &Path, _: &Path, _: Duration) -> Result<(ProcessRef, i32), MonitorError> {
        let monitor = self.stand_in();
        Ok((monitor, monitor.pid))
    }
}

impl FakeHost {
    /// A `sleep` standing in for a monitor or a PID-namespace holder.
    fn stand_in(&self) -> ProcessRef {
        let child = std::process::Command::new("sleep")
            .arg("3600")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("sleep runs");
        let pid = child.id() as i32;
        let mut monitors = self.monitors.lock().unwrap();
        // Reap the stand-ins that were killed (a stop escalating to SIGKILL, a rollback).
        monitors.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        monitors.push(child);
        ProcessRef::of(pid).expect("the stand-in runs")
    }
}

impl Drop for FakeHost {
    fn drop(&mut self) {
        for mut child in self.monitors.lock().unwrap().drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An OCI runtime that runs nothing: every container exits at its first signal (as the
/// monitor would record it), an exec answers at once.
pub(super) struct InertRuntime {
    pub(super) containers_dir: PathBuf,
}

#[async_trait]
impl OciRuntime for InertRuntime {
    fn name(&self) -> &str {
        "inert"
    }

    fn probe_features(&self) -> Features {
        Features { version: "inert".into(), usable: true, probed_by: "version", ..Features::default() }
    }

    fn create(&self, id: &str, _: &Path, _: &Path, _: CreateIo) -> Result<i32, OciError> {
        Err(OciError::Failed { handler: "inert".into(), command: "create", id: id.into(), message: "inert".into() })
    }

    fn restore(&self, id: &str, _: &Path, _: &Path, _: &crate::oci::RestoreFrom, _: CreateIo) -> Result<i32, OciError> {
        Err(OciError::Failed { handler: "inert".into(), command: "restore", id: id.into(), message: "inert".into() })
    }

    fn exec_command(&self, _: &str, _: &Path, _: &Path) -> tokio::process::Command {
        tokio::process::Command::new("true")
    }

    fn exec_outcome(&self, _: &str, status: std::process::ExitStatus, _: &Path, _: &[u8]) -> Result<i32, OciError> {
        Ok(status.code().unwrap_or(-1))
    }

    fn delete_blocking(&self, _: &str) -> Result<(), OciError> {
        Ok(())
    }

    fn list_blocking(&self) -> Result<Vec<String>, OciError> {
        Ok(Vec::new())
    }

    async fn start(&self, _: &str) -> Result<(), OciError> {
        Ok(())
    }

    async fn pause(&self, _: &str) -> Result<(), OciError> {
        Ok(())
    }

    async fn resume(&self, _: &str) -> Result<(), OciError> {
        Ok(())
    }

    async fn checkpoint(&self, id: &str, _: &crate::oci::CheckpointPaths<'_>) -> Result<(), OciError> {
        let message = "inert".into();
        Err(OciError::Criu { handler: "inert".into(), command: "checkpoint", id: id.into(), message })
    }

    async fn kill(&self, id: &str, signal: &str, _: bool) -> Result<(), OciError> {
        let dir = self.containers_dir.join(id);
        if dir.is_dir() {
            let code = if signal == "SIGKILL" { 137 } else { 143 };
            let exit = crate::model::container::ExitRecord {
                exit_code: code,
                finished_at: objects::now_nanos(),
                oom_killed: false,
                runtime_deleted: false,
            };
            let _ = std::fs::write(dir.join("exit.json"), serde_json::to_vec(&exit).unwrap_or_default());
        }
        Ok(())
    }

    async fn delete(&self, _: &str) -> Result<(), OciError> {
        Ok(())
    }

    async fn state(&self, _: &str) -> Result<Option<RuntimeState>, OciError> {
        Ok(None)
    }

    async fn update(&self, _: &str, _: &[u8]) -> Result<(), OciError> {
        Ok(())
    }

    async fn exec(&self, _: &str, _: &[u8], _: Option<Duration>, _: usize) -> Result<ExecOutput, OciError> {
        Ok(ExecOutput { stdout: b"ok\n".to_vec(), stderr: Vec::new(), exit_code: 0 })
    }
}

/// A one-layer image with a config, stored as a pull would store it.
pub(super) fn store_image(store: &ImageStore) {
    let layer = Digest::of(b"fuzz layer");
    if !store.has_layer(&layer) {
        let work = store.scratch_dir().unwrap();
        let dir = work.path().join("fs");
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        store.install_layer(&dir, &layer).unwrap();
    }
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": { "Cmd": ["sh"], "Env": ["PATH=/bin"], "User": "0", "Volumes": { "/data": {} } },
        "rootfs": { "type": "layers", "diff_ids": [layer.as_str()] },
    }))
    .unwrap();
    let manifest = b"{}".to_vec();
    let record = ImageRecord {
        id: ImageId::from_config_digest(&Digest::of(&config)),
        repo_tags: [IMAGE.to_string()].into(),
        repo_digests: Default::default(),
        manifest: Digest::of(&manifest),
        layers: vec![layer.clone()],
        user: "0".into(),
        created_at: 0,
    };
    let blobs = [(record.id.digest(), config), (record.manifest.clone(), manifest)];
    let layers = vec![LayerRecord { diff_id: layer, disk_bytes: 4096, inodes: 2 }];
    crate::blocking::run(|| store.commit(record, layers, &blobs)).unwrap();
}
