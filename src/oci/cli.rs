//! runc and crun driven through their common command line.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use tokio::process::Command;

use super::features::Features;
use super::runtime::{
    CheckpointPaths, CreateIo, ExecOutput, OciError, OciRuntime, RestoreFrom, RuntimeState, PID_FILE,
};
use crate::model::handler::HandlerSpec;

/// The runtime's log inside a work directory (`--log`).
const LOG_FILE: &str = "runtime.log";

#[derive(Debug, Clone)]
pub struct CliRuntime {
    spec: HandlerSpec,
}

impl CliRuntime {
    pub fn new(spec: HandlerSpec) -> Self {
        CliRuntime { spec }
    }

    /// The global options every call starts with.
    fn base_args(&self, log: Option<&Path>) -> Vec<std::ffi::OsString> {
        let mut args = vec!["--root".into(), self.spec.root.clone().into_os_string()];
        if self.spec.systemd_cgroup {
            args.push("--systemd-cgroup".into());
        }
        if let Some(log) = log {
            args.extend(["--log".into(), log.as_os_str().to_owned(), "--log-format".into(), "json".into()]);
        }
        args
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.spec.binary);
        cmd.args(self.base_args(None));
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        cmd
    }

    fn spawn_error(&self, source: std::io::Error) -> OciError {
        OciError::Spawn { handler: self.spec.name.clone(), binary: self.spec.binary.clone(), source }
    }

    fn failed(&self, command: &'static str, id: &str, message: String) -> OciError {
        OciError::Failed { handler: self.spec.name.clone(), command, id: id.to_string(), message }
    }

    /// A checkpoint or restore the runtime reported failed, with what CRIU's log in
    /// `work_dir` says of the cause.
    fn criu_failed(&self, command: &'static str, id: &str, message: String, work_dir: &Path) -> OciError {
        let criu = criu_errors(work_dir);
        let message = if criu.is_empty() { message } else { format!("{message}; CRIU: {criu}") };
        OciError::Criu { handler: self.spec.name.clone(), command, id: id.to_string(), message }
    }

    async fn run(&self, command: &'static str, id: &str, args: &[&str]) -> Result<Vec<u8>, OciError> {
        let mut cmd = self.command();
        cmd.arg(command).args(args).arg(id);
        let out = cmd.output().await.map_err(|e| self.spawn_error(e))?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(self.failed(command, id, runtime_message(&out.stderr)))
        }
    }

    /// `create` or `restore`: the container of `bundle` made (restore: and running), its
    /// pid written to `work_dir`; `options` adds the subcommand's own.
    fn launch(
        &self,
        command: &'static str,
        id: &str,
        bundle: &Path,
        work_dir: &Path,
        io: CreateIo,
        options: impl FnOnce(&mut std::process::Command),
    ) -> Result<i32, OciError> {
        let io_error =
            |path: &Path, source| OciError::Io { handler: self.spec.name.clone(), path: path.into(), source };
        crate::store::private::create_dir_all(work_dir).map_err(|e| io_error(work_dir, e))?;
        let (pid_file, log) = (work_dir.join(PID_FILE), work_dir.join(LOG_FILE));
        let mut cmd = std::process::Command::new(&self.spec.binary);
        cmd.args(self.base_args(Some(&log)));
        cmd.arg(command).arg("--bundle").arg(bundle).arg("--pid-file").arg(&pid_file);
        if self.spec.no_pivot {
            cmd.arg("--no-pivot");
        }
        if let Some(socket) = &io.console_socket {
            cmd.arg("--console-socket").arg(socket);
        }
        options(&mut cmd);
        cmd.arg(id).stdin(io.stdin).stdout(io.stdout).stderr(io.stderr);
        let status = cmd.status().map_err(|e| self.spawn_error(e))?;
        drop(cmd); // closes our copies of the pipes' write ends
        if !status.success() {
            let mut message = runtime_message(&std::fs::read(&log).unwrap_or_default());
            if message.is_empty() {
                // Its stderr was the container's: whatever it printed is in the container's log.
                message = format!("{status}, and logged nothing to {}", log.display());
            }
            return Err(self.failed(command, id, message));
        }
        read_pid(&pid_file).ok_or_else(|| self.failed(command, id, format!("no pid in {}", pid_file.display())))
    }
}

/// runc and crun log JSON or logfmt lines; keep the last message.
pub fn runtime_message(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    if let Some(panic) = text.lines().find(|l| l.starts_with("panic:")) {
        return panic.to_string();
    }
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    // What the runtime's early stage said before the final error (runc's nsexec logs why it
    // could not join a namespace on lines of its own).
    let earlier: Vec<String> = text
        .lines()
        .filter(|l| l.trim() != last)
        .filter_map(|l| line_message(l.trim()).filter(|(level, _)| matches!(level.as_str(), "error" | "fatal")))
        .map(|(_, msg)| msg)
        .collect();
    let message = line_message(last).map(|(_, msg)| msg).unwrap_or_else(|| last.to_string());
    match earlier.is_empty() {
        true => message,
        false => format!("{message} ({})", earlier.join("; ")),
    }
}

/// The level and message of one runtime log line, JSON or logfmt.
fn line_message(line: &str) -> Option<(String, String)> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
        let msg = v.get("msg").and_then(|m| m.as_str())?;
        let level = v.get("level").and_then(|l| l.as_str()).unwrap_or("");
        return Some((level.to_string(), msg.to_string()));
    }
    let (head, msg) = line.strip_prefix("time=")?.split_once("msg=")?;
    let level = head.split_once("level=").map(|(_, l)| l.split_whitespace().next().unwrap_or("")).unwrap_or("");
    Some((level.to_string(), msg.trim_matches('"').to_string()))
}

/// CRIU's own log in a work directory (dump.log, restore.log).
const CRIU_LOGS: [&str; 2] = ["dump.log", "restore.log"];

/// What CRIU said went wrong: the first error lines of its log in `work_dir` (the cause; the
/// later ones say what gave up because of it) and the last ("" when none).
pub(super) fn criu_errors(work_dir: &Path) -> String {
    let mut errors = Vec::new();
    for log in CRIU_LOGS {
        let text = std::fs::read(work_dir.join(log)).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let found: Vec<usize> = (0..lines.len()).filter(|&i| lines[i].contains("Error (")).collect();
        // A lone error (CRIU's "Dumping FAILED.") says nothing of the cause: what it logged
        // just before does.
        if let [only] = found[..] {
            errors.extend(lines[only.saturating_sub(3)..only].iter().map(|l| l.to_string()));
        }
        errors.extend(found.iter().map(|&i| lines[i].to_string()));
    }
    if errors.len() > 4 {
        errors.drain(3..errors.len() - 1);
    }
    errors.join("; ")
}

/// PATH with the directory of an absolute `criu` first (the runtimes look it up by name).
fn path_with_criu(criu: &Path) -> Option<std::ffi::OsString> {
    let dir = criu.parent().filter(|d| criu.is_absolute() && !d.as_os_str().is_empty())?;
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(dirs).ok()
}

/// Whether a failed `state` or `delete` means the runtime does not know the container
/// (runc: "does not exist"; crun: the status file is missing).
fn unknown_container(message: &str) -> bool {
    message.contains("does not exist") || message.contains("No such file or directory")
}

pub(super) fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok())
}

#[async_trait]
impl OciRuntime for CliRuntime {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn probe_features(&self) -> Features {
        super::features::probe(self.spec.engine, &self.spec.binary)
    }

    fn create(&self, id: &str, bundle: &Path, work_dir: &Path, io: CreateIo) -> Result<i32, OciError> {
        self.launch("create", id, bundle, work_dir, io, |_| {})
    }

    fn restore(
        &self,
        id: &str,
        bundle: &Path,
        work_dir: &Path,
        from: &RestoreFrom,
        io: CreateIo,
    ) -> Result<i32, OciError> {
        let launched = self.launch("restore", id, bundle, work_dir, io, |cmd| {
            cmd.arg("--detach").arg("--image-path").arg(&from.image_dir).arg("--work-path").arg(work_dir);
            if let Some(path) = path_with_criu(&from.criu) {
                cmd.env("PATH", path);
            }
        });
        launched.map_err(|e| match e {
            OciError::Failed { message, .. } => self.criu_failed("restore", id, message, work_dir),
            other => other,
        })
    }

    fn exec_command(&self, id: &str, process: &Path, work_dir: &Path) -> Command {
        let mut cmd = Command::new(&self.spec.binary);
        cmd.args(self.base_args(Some(&work_dir.join(LOG_FILE))));
        cmd.arg("exec").arg("--process").arg(process).arg("--pid-file").arg(work_dir.join(PID_FILE));
        cmd.arg(id).kill_on_drop(true);
        cmd
    }

    fn exec_outcome(
        &self,
        id: &str,
        status: std::process::ExitStatus,
        work_dir: &Path,
        stderr: &[u8],
    ) -> Result<i32, OciError> {
        super::runtime::exec_exit_code(status, work_dir).ok_or_else(|| {
            let log = std::fs::read(work_dir.join(LOG_FILE)).unwrap_or_default();
            self.failed("exec", id, runtime_message(if log.is_empty() { stderr } else { &log }))
        })
    }

    fn delete_blocking(&self, id: &str) -> Result<(), OciError> {
        let out = std::process::Command::new(&self.spec.binary)
            .args(self.base_args(None))
            .args(["delete", "--force", id])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| self.spawn_error(e))?;
        match runtime_message(&out.stderr) {
            _ if out.status.success() => Ok(()),
            m if unknown_container(&m) => Ok(()),
            m => Err(self.failed("delete", id, m)),
        }
    }

    fn list_blocking(&self) -> Result<Vec<String>, OciError> {
        if !self.spec.root.exists() {
            return Ok(Vec::new()); // nothing created yet
        }
        let out = std::process::Command::new(&self.spec.binary)
            .args(self.base_args(None))
            .args(["list", "--quiet"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| self.spawn_error(e))?;
        if !out.status.success() {
            return Err(self.failed("list", "", runtime_message(&out.stderr)));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    async fn start(&self, id: &str) -> Result<(), OciError> {
        match self.run("start", id, &[]).await {
            Err(OciError::Failed { message, .. }) if started_then_deleted(&message) => {
                tracing::debug!(
                    container = id,
                    "the process started and exited before the runtime removed its start fifo"
                );
                Ok(())
            }
            other => other.map(drop),
        }
    }

    async fn pause(&self, id: &str) -> Result<(), OciError> {
        self.run("pause", id, &[]).await.map(drop)
    }

    async fn resume(&self, id: &str) -> Result<(), OciError> {
        self.run("resume", id, &[]).await.map(drop)
    }

    async fn kill(&self, id: &str, signal: &str, all: bool) -> Result<(), OciError> {
        let mut cmd = self.command();
        cmd.arg("kill");
        if all {
            cmd.arg("--all");
        }
        cmd.arg(id).arg(signal);
        let out = cmd.output().await.map_err(|e| self.spawn_error(e))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(self.failed("kill", id, runtime_message(&out.stderr)))
        }
    }

    async fn delete(&self, id: &str) -> Result<(), OciError> {
        self.run("delete", id, &["--force"]).await.map(drop)
    }

    async fn state(&self, id: &str) -> Result<Option<RuntimeState>, OciError> {
        match self.run("state", id, &[]).await {
            Ok(out) => serde_json::from_slice(&out).map(Some).map_err(|e| self.failed("state", id, e.to_string())),
            Err(OciError::Failed { message, .. }) if unknown_container(&message) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn update(&self, id: &str, resources_json: &[u8]) -> Result<(), OciError> {
        // A file, not stdin: crun reads `--resources` only from a path.
        let io = |path: PathBuf| {
            let handler = self.spec.name.clone();
            move |source| OciError::Io { handler, path, source }
        };
        let dir = crate::blocking::run(tempfile::tempdir).map_err(io(std::env::temp_dir()))?;
        let path = dir.path().join("resources.json");
        crate::blocking::run(|| std::fs::write(&path, resources_json)).map_err(io(path.clone()))?;
        let path = path.display().to_string();
        let updated = self.run("update", id, &["--resources", &path]).await.map(drop);
        crate::blocking::run(|| drop(dir));
        updated
    }

    async fn checkpoint(&self, id: &str, paths: &CheckpointPaths<'_>) -> Result<(), OciError> {
        let io_error =
            |path: &Path, source| OciError::Io { handler: self.spec.name.clone(), path: path.into(), source };
        for dir in [paths.image_dir, paths.work_dir] {
            crate::store::private::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        }
        let mut cmd = Command::new(&self.spec.binary);
        cmd.args(self.base_args(None)).stdin(Stdio::null());
        if let Some(path) = path_with_criu(paths.criu) {
            cmd.env("PATH", path);
        }
        cmd.arg("checkpoint").arg("--leave-running");
        cmd.arg("--image-path").arg(paths.image_dir).arg("--work-path").arg(paths.work_dir).arg(id);
        // Never killed with a dropped call: CRIU must thaw and cure what it seized.
        let out = cmd.kill_on_drop(false).output().await.map_err(|e| self.spawn_error(e))?;
        match out.status.success() {
            true => Ok(()),
            false => Err(self.criu_failed("checkpoint", id, runtime_message(&out.stderr), paths.work_dir)),
        }
    }

    async fn exec(
        &self,
        id: &str,
        process_json: &[u8],
        timeout: Option<Duration>,
        cap: usize,
    ) -> Result<ExecOutput, OciError> {
        super::exec::run(self, id, process_json, timeout, cap).await
    }
}

/// runc's `start` releases the process by reading its `exec.fifo`, then removes the fifo. A
/// process that exits at once can be reaped and its state deleted (the monitor does, as a
/// shim would) in between: the removal then fails though the process did start.
fn started_then_deleted(message: &str) -> bool {
    message.starts_with("remove ") && message.contains("/exec.fifo: no such file or directory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criu_errors_name_the_first_errors_and_the_last() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(criu_errors(dir.path()), "");
        let log: String =
            (1..=6).map(|n| format!("(00.{n}) Error (criu/x.c:{n}): failure {n}\n(00.{n}) info\n")).collect();
        std::fs::write(dir.path().join("dump.log"), log).unwrap();
        let got = criu_errors(dir.path());
        let names: Vec<&str> = got.split("; ").map(|e| e.rsplit(": ").next().unwrap()).collect();
        assert_eq!(names, ["failure 1", "failure 2", "failure 3", "failure 6"]);
        std::fs::write(
            dir.path().join("dump.log"),
            "(00.0) a\n(00.0) b\n(00.0) cause\n(00.1) Error (criu/x.c:1): only\n",
        )
        .unwrap();
        assert_eq!(criu_errors(dir.path()), "(00.0) a; (00.0) b; (00.0) cause; (00.1) Error (criu/x.c:1): only");
    }

    #[test]
    fn runtime_messages() {
        let cases = [
            (
                &b"{\"level\":\"error\",\"msg\":\"container does not exist\",\"time\":\"x\"}\n"[..],
                "container does not exist",
            ),
            (b"time=\"2024\" level=error msg=\"container not running\"\n", "container not running"),
            (b"plain failure\n\n", "plain failure"),
            (
                &b"{\"level\":\"error\",\"msg\":\"nsenter: failed to open /proc/9/ns/ipc: No such file or directory\"}\n{\"level\":\"error\",\"msg\":\"exec failed: unable to start container process: error executing setns process: exit status 1\"}\n"[..],
                "exec failed: unable to start container process: error executing setns process: exit status 1 (nsenter: failed to open /proc/9/ns/ipc: No such file or directory)",
            ),
            (b"{\"level\":\"info\",\"msg\":\"noise\"}\n{\"level\":\"error\",\"msg\":\"final\"}\n", "final"),
            (
                b"{\"msg\":\"error opening file `/run/crun/x/status`: No such file or directory\",\"level\":\"error\"}\n",
                "error opening file `/run/crun/x/status`: No such file or directory",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(runtime_message(input), expected);
        }
        assert!(unknown_container("container does not exist"));
        assert!(unknown_container("error opening file `/run/crun/x/status`: No such file or directory"));
        assert!(!unknown_container("permission denied"));
    }

    #[test]
    fn a_start_whose_process_was_gone_before_the_fifo() {
        let cases = [
            ("remove /run/swapcri/runc/abc/exec.fifo: no such file or directory", true),
            // The fifo could not be opened: the process was never released.
            ("open /run/swapcri/runc/abc/exec.fifo: no such file or directory", false),
            ("cannot start an already running container", false),
            ("container process is already dead", false),
            ("remove /run/swapcri/runc/abc/exec.fifo: permission denied", false),
        ];
        for (message, started) in cases {
            assert_eq!(started_then_deleted(message), started, "{message}");
        }
    }

    #[test]
    fn messages_name_the_handler() {
        let runtime = CliRuntime::new(HandlerSpec {
            name: "crun".into(),
            engine: crate::model::handler::Engine::Crun,
            binary: PathBuf::from("/nonexistent/crun"),
            root: PathBuf::from("/tmp/x"),
            no_pivot: false,
            systemd_cgroup: false,
            allowed_annotations: vec![],
        });
        let work = tempfile::tempdir().unwrap();
        let err = runtime.create("abc", Path::new("/b"), work.path(), CreateIo::null()).unwrap_err();
        assert!(err.to_string().starts_with("runtime handler crun: cannot run /nonexistent/crun"), "{err}");
        let err = runtime.delete_blocking("abc").unwrap_err();
        assert!(err.to_string().contains("runtime handler crun"), "{err}");
    }
}
