//! The per-container monitor: a small process of our own binary, like conmon or a
//! containerd shim. It creates the container through the OCI runtime, holds its stdio, writes the CRI
//! log, reopens it on request, reaps the container's init as a subreaper, and records the
//! exit code, finish time and OOM kill on disk. It outlives the daemon.

pub mod attach;
pub mod log;
mod process;
mod spawn;
pub mod terminal;

pub use log::{CriLog, LineFramer, Stream};
pub use process::main;
pub use spawn::{reopen_log, spawn, MonitorError};

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Everything the monitor needs, written by the daemon beside the bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MonitorConfig {
    pub id: String,
    pub bundle: PathBuf,
    /// The runtime handler that creates the container.
    pub runtime: crate::oci::HandlerSpec,
    pub log_path: Option<PathBuf>,
    /// The pod's log directory: the log is opened beneath it, through no symbolic link
    /// (absent for monitors started before this was kept: the file alone is not followed).
    #[serde(default)]
    pub log_directory: Option<PathBuf>,
    pub max_log_line: usize,
    pub exit_file: PathBuf,
    pub ctl_socket: PathBuf,
    /// Where runc hands over the pty of a tty container (unix socket paths are short).
    pub console_socket: PathBuf,
    /// Private directory for the pid file and runc's log.
    pub work_dir: PathBuf,
    pub tty: bool,
    pub stdin: bool,
    /// The first attach session that closes stdin closes the container's stdin.
    #[serde(default)]
    pub stdin_once: bool,
    /// Where attach clients connect (absent for monitors started before attach existed).
    #[serde(default)]
    pub attach_socket: Option<PathBuf>,
}

/// The monitor's one-line answer to the daemon once the container is created.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MonitorReport {
    Created { pid: i32, monitor_pid: i32 },
    Failed { error: String },
}
