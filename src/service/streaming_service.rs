use crate::error::Error;
use crate::streaming::attach::AttachRequest;
use crate::streaming::exec::ExecRequest;
use crate::streaming::{Pending, StreamingServer};
use std::sync::Arc;

use crate::service::pod_service::PodService;

/// Exec, Attach and PortForward: the request is checked against the pod or container, then
/// the streaming server issues the single-use URL the client connects to.
pub struct StreamingService {
    pods: Arc<PodService>,
    server: Arc<StreamingServer>,
}

/// What an Exec or Attach asks for on the stream.
#[derive(Debug, Clone, Copy)]
pub struct StreamWants {
    pub tty: bool,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

impl StreamingService {
    pub fn new(pods: Arc<PodService>, server: Arc<StreamingServer>) -> Self {
        StreamingService { pods, server }
    }

    pub fn exec(&self, container_id: &str, cmd: Vec<String>, w: StreamWants) -> Result<String, Error> {
        let pending = self.pods.exec_stream(container_id, cmd, w.tty, w.stdin, w.stdout, w.stderr)?;
        Ok(self.server.issue(pending)?)
    }

    pub fn attach(&self, container_id: &str, w: StreamWants) -> Result<String, Error> {
        let pending = self.pods.attach_stream(container_id, w.tty, w.stdin, w.stdout, w.stderr)?;
        Ok(self.server.issue(pending)?)
    }

    pub fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> Result<String, Error> {
        let pending = self.pods.port_forward_stream(sandbox_id, ports)?;
        Ok(self.server.issue(pending)?)
    }
}

impl PodService {
    /// Validates an Exec request and prepares what its streaming session runs.
    pub fn exec_stream(
        &self,
        id: &str,
        cmd: Vec<String>,
        tty: bool,
        stdin: bool,
        stdout: bool,
        stderr: bool,
    ) -> Result<Pending, Error> {
        if cmd.is_empty() {
            return Err(Error::InvalidArgument("exec needs a command".into()));
        }
        if !stdin && !stdout && !stderr {
            return Err(Error::InvalidArgument("one of stdin, stdout and stderr must be set".into()));
        }
        if tty && stderr {
            return Err(Error::InvalidArgument("tty and stderr cannot both be set (a terminal merges them)".into()));
        }
        let (container, process) = self.exec_process(id, &cmd, tty)?;
        let sandbox = self.registry.find_sandbox(container.meta.sandbox_id.as_str())?;
        Ok(Pending::Exec(ExecRequest {
            container_id: container.meta.id.to_string(),
            runtime: self.runtimes.runtime(&sandbox.meta.runtime_handler)?,
            process_json: process.to_string().into_bytes(),
            tty,
            stdin,
            stdout,
            stderr,
        }))
    }

    /// Validates an Attach request: the container must be running and reachable through its
    /// monitor. Whether there is a terminal is the container's choice, not the request's.
    pub fn attach_stream(
        &self,
        id: &str,
        tty: bool,
        stdin: bool,
        stdout: bool,
        stderr: bool,
    ) -> Result<Pending, Error> {
        if !stdin && !stdout && !stderr {
            return Err(Error::InvalidArgument("one of stdin, stdout and stderr must be set".into()));
        }
        if tty && stderr {
            return Err(Error::InvalidArgument("tty and stderr cannot both be set (a terminal merges them)".into()));
        }
        let container = self.registry.find_container(id)?;
        if !container.status.state.can_exec() {
            return Err(Error::FailedPrecondition(format!("container {} is not running", container.meta.id)));
        }
        let config = &container.meta.config;
        if stdin && !config.stdin {
            return Err(Error::FailedPrecondition(format!(
                "container {} was created without stdin; attach without stdin",
                container.meta.id
            )));
        }
        let socket = self.registry.socket_path(&container.meta.id, "attach");
        if !socket.exists() {
            return Err(Error::FailedPrecondition(format!(
                "container {} has no attach socket (its monitor predates attach support, or it is exiting)",
                container.meta.id
            )));
        }
        Ok(Pending::Attach(AttachRequest {
            container_id: container.meta.id.to_string(),
            socket,
            tty: config.tty,
            stdin,
            stdout,
            stderr: stderr && !config.tty,
        }))
    }

    /// Validates a PortForward request: the pod must be ready; connections are made in its
    /// network namespace (the node's, for a host-network pod).
    pub fn port_forward_stream(&self, sandbox_id: &str, ports: &[i32]) -> Result<Pending, Error> {
        if let Some(port) = ports.iter().find(|p| !(1..=65535).contains(*p)) {
            return Err(Error::InvalidArgument(format!("port {port} is not a TCP port")));
        }
        let most = crate::streaming::portforward::MAX_WEBSOCKET_PORTS;
        if ports.len() > most {
            return Err(Error::InvalidArgument(format!("at most {most} ports per session")));
        }
        let ports = ports.iter().map(|p| *p as u16).collect();
        let sandbox = self.registry.find_sandbox(sandbox_id)?;
        if !sandbox.status.state.can_start_containers() {
            return Err(Error::FailedPrecondition(format!("pod sandbox {} is not ready", sandbox.meta.id)));
        }
        let netns = self
            .ns_request(&sandbox.meta.id, &sandbox.meta.config)
            .net
            .unwrap_or_else(|| std::path::PathBuf::from("/proc/self/ns/net"));
        Ok(Pending::PortForward { netns, ports })
    }
}
