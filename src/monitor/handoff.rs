//! What the daemon hands a monitor (written beside the bundle) and what the monitor answers.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Everything the monitor needs, written by the daemon beside the bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MonitorConfig {
    pub id: String,
    pub bundle: PathBuf,
    /// The runtime handler that creates the container.
    pub runtime: crate::model::handler::HandlerSpec,
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
    /// Restore these checkpoint images instead of creating the container afresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<crate::oci::RestoreFrom>,
}

/// The monitor's one-line answer to the daemon once the container is created.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum MonitorReport {
    Created { pid: i32, monitor_pid: i32 },
    Failed { error: String },
}

/// What a spare monitor (started ahead, `swapcri monitor -`) reads as one line on its stdin:
/// the container it is to create, and where its own errors go.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpareJob {
    pub config: PathBuf,
    pub stderr_log: PathBuf,
}

/// The argument that makes a monitor a spare, waiting for its [`SpareJob`].
pub const SPARE_ARG: &str = "-";
