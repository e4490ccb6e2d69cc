//! A fake OCI runtime for tests: it records every call, "creates" a container by running its
//! process on the host (no namespaces, no cgroups), and execs by running the command on the
//! host with the same pid-file contract as runc. What the services and the monitor do with a
//! runtime's answers is then tested without runc.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::runtime::PID_FILE;
use super::{CheckpointPaths, CreateIo, ExecOutput, Features, OciError, OciRuntime, RestoreFrom, RuntimeState};
use crate::model::container::ExitRecord;

#[derive(Default)]
pub struct FakeRuntime {
    calls: Mutex<Vec<String>>,
    /// Writes the monitor's exit record to `exit_file` when this signal is sent, or at once
    /// on start when it is "start"; "SIGKILL init" exits on a SIGKILL to the init only (a
    /// runtime whose kill of every process finds none).
    pub exit_on: &'static str,
    pub exit_file: PathBuf,
    pub fail_update: bool,
    /// An exec's process starts outside the exec command's own tree (as runc init joins the
    /// container) and only after this many milliseconds (as on a loaded node); 0: at once.
    pub exec_setup_ms: std::sync::atomic::AtomicU32,
    /// What `list` answers: the containers the runtime holds.
    pub listed: Mutex<Vec<String>>,
    /// How many execs fail as runc's does when it cannot join the container's namespaces
    /// (before any process of the command exists).
    pub exec_setns_failures: std::sync::atomic::AtomicU32,
    /// A checkpoint fails as CRIU's does on a file it cannot dump, after writing part of
    /// its images.
    pub checkpoint_fails: std::sync::atomic::AtomicBool,
}

/// The images a fake checkpoint writes: what CRIU's would hold, in miniature.
pub const FAKE_CHECKPOINT_IMAGES: [(&str, &str); 3] =
    [("inventory.img", "inventory"), ("pages-1.img", "pages"), ("descriptors.json", "[\"/dev/null\"]")];

impl FakeRuntime {
    pub fn new(exit_on: &'static str, exit_file: PathBuf, fail_update: bool) -> Self {
        FakeRuntime {
            calls: Mutex::default(),
            exit_on,
            exit_file,
            fail_update,
            exec_setup_ms: Default::default(),
            listed: Mutex::default(),
            exec_setns_failures: Default::default(),
            checkpoint_fails: Default::default(),
        }
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    /// Writes the exit record the monitor would write.
    pub fn exit(&self, exit_code: i32, finished_at: i64) {
        let exit = ExitRecord { exit_code, finished_at, oom_killed: false, runtime_deleted: false };
        std::fs::create_dir_all(self.exit_file.parent().unwrap()).unwrap();
        std::fs::write(&self.exit_file, serde_json::to_vec(&exit).unwrap()).unwrap();
    }

    fn failed(&self, command: &'static str, id: &str, message: &str) -> OciError {
        OciError::Failed { handler: "fake".into(), command, id: id.into(), message: message.into() }
    }
}

/// The `args` of an OCI spec or process document.
fn args_of(doc: &serde_json::Value) -> Vec<String> {
    let args = doc.get("process").unwrap_or(doc).get("args").and_then(|a| a.as_array());
    args.map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// `sh -c` that writes its pid where runc would, then becomes the command.
const WRITE_PID_THEN_EXEC: &str = "echo $$ > \"$0\"; exec \"$@\"";
/// runc's answer when it cannot join the container's namespaces: no pid file, no process.
const SETNS_FAILURE: &str =
    "echo 'exec failed: unable to start container process: error executing setns process: exit status 1' >&2; exit 1";
/// The same in a session of its own started after a delay (`$SETUP` seconds); the exec
/// command waits for it.
const SLOW_DETACHED_EXEC: &str = "setsid sh -c 'sleep \"$SETUP\"; echo $$ > \"$0\"; exec \"$@\"' \"$0\" \"$@\" & wait";

#[async_trait]
impl OciRuntime for FakeRuntime {
    fn name(&self) -> &str {
        "fake"
    }

    fn probe_features(&self) -> Features {
        Features { version: "fake".into(), usable: true, probed_by: "version", ..Features::default() }
    }

    fn create(&self, id: &str, bundle: &Path, work_dir: &Path, io: CreateIo) -> Result<i32, OciError> {
        self.record(format!("create {id}"));
        if io.console_socket.is_some() {
            return Err(self.failed("create", id, "the fake runtime has no terminals"));
        }
        let spec: serde_json::Value = std::fs::read(bundle.join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| self.failed("create", id, "no readable config.json in the bundle"))?;
        let args = args_of(&spec);
        if args.is_empty() {
            return Err(self.failed("create", id, "the spec has no process args"));
        }
        std::fs::create_dir_all(work_dir).map_err(|e| self.failed("create", id, &e.to_string()))?;
        let child = std::process::Command::new(&args[0])
            .args(&args[1..])
            .stdin(io.stdin)
            .stdout(io.stdout)
            .stderr(io.stderr)
            .spawn()
            .map_err(|e| self.failed("create", id, &e.to_string()))?;
        std::fs::write(work_dir.join(PID_FILE), child.id().to_string()).unwrap();
        Ok(child.id() as i32)
    }

    /// Runs the spec's process as `create` does (a restore with nothing to restore), once the
    /// images a fake checkpoint writes are there.
    fn restore(
        &self,
        id: &str,
        bundle: &Path,
        work_dir: &Path,
        from: &RestoreFrom,
        io: CreateIo,
    ) -> Result<i32, OciError> {
        self.record(format!("restore {id}"));
        if !from.image_dir.join(FAKE_CHECKPOINT_IMAGES[0].0).is_file() {
            return Err(self.failed("restore", id, "no checkpoint images"));
        }
        let pid = self.create(id, bundle, work_dir, io)?;
        self.calls.lock().unwrap().retain(|c| c != &format!("create {id}"));
        Ok(pid)
    }

    fn exec_command(&self, id: &str, process: &Path, work_dir: &Path) -> tokio::process::Command {
        self.record(format!("exec {id}"));
        let doc = std::fs::read(process).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        let mut cmd = tokio::process::Command::new("sh");
        use std::sync::atomic::Ordering::Relaxed;
        let setup_ms = self.exec_setup_ms.load(Relaxed);
        let fail = self.exec_setns_failures.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1)).is_ok();
        let script = match (fail, setup_ms) {
            (true, _) => SETNS_FAILURE,
            (false, 0) => WRITE_PID_THEN_EXEC,
            (false, _) => SLOW_DETACHED_EXEC,
        };
        cmd.env("SETUP", format!("{}.{:03}", setup_ms / 1000, setup_ms % 1000));
        cmd.arg("-c").arg(script).arg(work_dir.join(PID_FILE)).args(args_of(&doc));
        cmd.kill_on_drop(true);
        cmd
    }

    fn exec_outcome(
        &self,
        id: &str,
        status: std::process::ExitStatus,
        work_dir: &Path,
        stderr: &[u8],
    ) -> Result<i32, OciError> {
        super::runtime::exec_exit_code(status, work_dir)
            .ok_or_else(|| self.failed("exec", id, &String::from_utf8_lossy(stderr)))
    }

    fn list_blocking(&self) -> Result<Vec<String>, OciError> {
        Ok(self.listed.lock().unwrap().clone())
    }

    fn delete_blocking(&self, id: &str) -> Result<(), OciError> {
        self.record(format!("delete {id}"));
        Ok(())
    }

    async fn start(&self, id: &str) -> Result<(), OciError> {
        self.record(format!("start {id}"));
        if self.exit_on == "start" {
            // A process that is gone before runc start returns.
            self.exit(0, chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0));
        }
        Ok(())
    }

    async fn pause(&self, id: &str) -> Result<(), OciError> {
        self.record(format!("pause {id}"));
        Ok(())
    }

    async fn resume(&self, id: &str) -> Result<(), OciError> {
        self.record(format!("resume {id}"));
        Ok(())
    }

    async fn kill(&self, _id: &str, signal: &str, all: bool) -> Result<(), OciError> {
        self.record(format!("kill {signal}{}", if all { " all" } else { "" }));
        if signal == self.exit_on || (self.exit_on == "SIGKILL init" && signal == "SIGKILL" && !all) {
            self.exit(if signal == "SIGKILL" { 137 } else { 143 }, 1);
        }
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), OciError> {
        self.record(format!("delete {id}"));
        Ok(())
    }

    async fn state(&self, _id: &str) -> Result<Option<RuntimeState>, OciError> {
        Ok(None)
    }

    async fn update(&self, _id: &str, resources_json: &[u8]) -> Result<(), OciError> {
        self.record(format!("update {}", String::from_utf8_lossy(resources_json)));
        if self.fail_update {
            return Err(self.failed("update", "x", "refused"));
        }
        Ok(())
    }

    async fn checkpoint(&self, id: &str, paths: &CheckpointPaths<'_>) -> Result<(), OciError> {
        self.record(format!("checkpoint {id}"));
        for dir in [paths.image_dir, paths.work_dir] {
            std::fs::create_dir_all(dir).map_err(|e| self.failed("checkpoint", id, &e.to_string()))?;
        }
        for (name, content) in FAKE_CHECKPOINT_IMAGES {
            std::fs::write(paths.image_dir.join(name), content).unwrap();
            if self.checkpoint_fails.load(std::sync::atomic::Ordering::Relaxed) {
                let message = "Error (criu/files-ext.c:96): Can't dump file 9 of that type [60000] (unknown /dev/fake)";
                std::fs::write(paths.work_dir.join("dump.log"), message).unwrap();
                let message = format!("criu failed: type NOTIFY errno 0; CRIU: {message}");
                return Err(OciError::Criu { handler: "fake".into(), command: "checkpoint", id: id.into(), message });
            }
        }
        std::fs::write(paths.work_dir.join("dump.log"), "Dumping finished successfully").unwrap();
        Ok(())
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
