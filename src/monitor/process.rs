//! The monitor process itself (`swapcri monitor CONFIG`, or a spare `swapcri monitor -` that
//! waits for its job). Synchronous: threads for the
//! output pipes and the control socket, the main thread reaps.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{pipe2, setsid, Pid};

use crate::cgroup;
use crate::model::container::{runtime_deleted_mark, ExitRecord};
use crate::oci::{CreateIo, OciRuntime};

use super::attach;
use super::handoff::{MonitorConfig, MonitorReport, SpareJob};
use super::log::{CriLog, LineFramer, Stream};

type SharedLog = Arc<Mutex<Option<CriLog>>>;

/// Why the monitor could not create or keep its container.
#[derive(Debug, thiserror::Error)]
enum ProcessError {
    #[error("{what} {}: {source}", path.display())]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("{what}: {source}")]
    Sys { what: &'static str, source: nix::errno::Errno },
    #[error("{}: {source}", path.display())]
    Config { path: PathBuf, source: serde_json::Error },
    #[error(transparent)]
    Runtime(#[from] crate::oci::OciError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{handler} sent no console: {reason}")]
    Console { handler: String, reason: String },
}

fn io_error(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ProcessError {
    let path = path.to_path_buf();
    move |source| ProcessError::Io { what, path, source }
}

fn sys_error(what: &'static str) -> impl FnOnce(nix::errno::Errno) -> ProcessError {
    move |source| ProcessError::Sys { what, source }
}

pub fn main(config_path: &Path) -> ! {
    let code = match run(config_path) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("swapcri monitor: {e}");
            1
        }
    };
    std::process::exit(code)
}

/// A spare monitor (`swapcri monitor -`): waits for its job on stdin, then runs as
/// `swapcri monitor CONFIG` does, its errors into the job's log. Its stdin ending first (the
/// daemon is gone or has no more use for it) ends it.
pub fn spare_main() -> ! {
    let mut line = String::new();
    if !matches!(std::io::stdin().lock().read_line(&mut line), Ok(n) if n > 0) {
        std::process::exit(0)
    }
    let job: SpareJob = match serde_json::from_str(line.trim()) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("swapcri monitor: not a job: {e}");
            std::process::exit(2)
        }
    };
    let stderr = std::fs::OpenOptions::new().create(true).append(true).open(&job.stderr_log);
    let null = std::fs::File::open("/dev/null");
    match (stderr, null) {
        (Ok(stderr), Ok(null))
            if nix::unistd::dup2_stderr(&stderr).is_ok() && nix::unistd::dup2_stdin(&null).is_ok() =>
        {
            main(&job.config)
        }
        _ => {
            report(&MonitorReport::Failed { error: format!("cannot open {}", job.stderr_log.display()) });
            std::process::exit(1)
        }
    }
}

fn run(config_path: &Path) -> Result<(), ProcessError> {
    let text = std::fs::read(config_path).map_err(io_error("reading", config_path))?;
    let cfg: MonitorConfig = serde_json::from_slice(&text)
        .map_err(|source| ProcessError::Config { path: config_path.to_path_buf(), source })?;
    // Its own session: signals to the daemon's process group do not reach it.
    setsid().map_err(sys_error("setsid"))?;
    nix::sys::prctl::set_child_subreaper(true).map_err(sys_error("becoming a subreaper"))?;
    let hierarchies = cgroup::hierarchies();
    let runtime = crate::oci::runtime_for(&cfg.runtime);
    let created = match create(&cfg, runtime.as_ref()) {
        Ok(c) => c,
        Err(error) => {
            report(&MonitorReport::Failed { error: error.to_string() });
            return Err(error);
        }
    };
    // Counted from now on: under the systemd driver the cgroup can be gone by the reap.
    let oom = cgroup::memory_cgroup_dir(created.pid, &hierarchies).map(|dir| cgroup::oom::OomWatch::start(&dir));
    report(&MonitorReport::Created { pid: created.pid, monitor_pid: std::process::id() as i32 });

    let log: SharedLog = Arc::new(Mutex::new(match &cfg.log_path {
        Some(path) => {
            Some(CriLog::open(path, cfg.log_directory.as_deref()).map_err(io_error("opening the log", path))?)
        }
        None => None,
    }));
    let (done_tx, done_rx) = mpsc::channel();
    let readers = created.outputs.len();
    let hub = attach::Hub::new(created.stdin, cfg.stdin_once);
    for (fd, stream) in created.outputs {
        let (log, done, hub) = (log.clone(), done_tx.clone(), hub.clone());
        let max = cfg.max_log_line;
        std::thread::spawn(move || {
            copy_output(fd, stream, max, &log, &hub);
            let _ = done.send(());
        });
    }
    serve_control(&cfg.ctl_socket, log.clone());
    if let Some(path) = &cfg.attach_socket {
        hub.serve(path);
    }

    let exit_code = reap(created.pid);
    let finished_at = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
    // Output still buffered in the pipes is drained before the exit is recorded.
    for _ in 0..readers {
        if done_rx.recv_timeout(Duration::from_secs(2)).is_err() {
            break;
        }
    }
    hub.finish(Duration::from_secs(2));
    let oom_killed = oom.is_some_and(|watch| watch.finish(exit_code));
    let mut record = ExitRecord { exit_code, finished_at, oom_killed, runtime_deleted: false };
    // Into the container's record only while it exists: a removed one stays removed.
    let write = |record: &ExitRecord| {
        crate::store::replace_atomic(&cfg.exit_file, &serde_json::to_vec(record).unwrap_or_default())
    };
    // With a PID namespace of its own nothing of the container outlives its init (the kernel
    // ends the namespace's processes before the init's exit is reaped): the exit is recorded
    // at once, written once, and a successful delete is marked beside it afterwards
    // (`runtime_deleted_mark`). Otherwise, as a shim does, the runtime's state (its cgroup, any
    // process left in it, the state directory) is released first, so a stop that has returned
    // left nothing running. Either way a removal that finds the delete done runs no runtime.
    if own_pid_namespace(&cfg.bundle) {
        write(&record)?;
        if delete_within(runtime, &cfg.id, DELETE_WAIT) {
            // Only its existence counts (a lost mark costs a second delete that finds nothing).
            // A removal meanwhile took the record's directory with it: nothing to mark.
            let _ = std::fs::File::create(runtime_deleted_mark(&cfg.exit_file));
        }
    } else {
        record.runtime_deleted = delete_within(runtime, &cfg.id, DELETE_WAIT);
        write(&record)?;
    }
    let _ = std::fs::remove_file(&cfg.ctl_socket);
    if let Some(path) = &cfg.attach_socket {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Whether the bundle's container has a PID namespace of its own (one it creates, not one it
/// joins by path); false when the spec cannot be read.
fn own_pid_namespace(bundle: &Path) -> bool {
    let Ok(spec) = oci_spec::runtime::Spec::load(bundle.join("config.json")) else { return false };
    let namespaces = spec.linux().as_ref().and_then(|l| l.namespaces().clone()).unwrap_or_default();
    namespaces.iter().any(|ns| ns.typ() == oci_spec::runtime::LinuxNamespaceType::Pid && ns.path().is_none())
}

/// How long the exit record waits for the runtime's delete: a hung runtime must not hide
/// the exit (removal then deletes the container itself).
const DELETE_WAIT: Duration = Duration::from_secs(10);

/// Deletes the container from the runtime on a thread of its own; false when it failed or
/// did not finish within `wait`.
fn delete_within(runtime: std::sync::Arc<dyn crate::oci::OciRuntime>, id: &str, wait: Duration) -> bool {
    let (tx, rx) = mpsc::channel();
    let id = id.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(runtime.delete_blocking(&id).is_ok());
    });
    rx.recv_timeout(wait).unwrap_or(false)
}

/// Writes the report line on the daemon's pipe (our stdout), then lets go of the pipe.
fn report(report: &MonitorReport) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", serde_json::to_string(report).unwrap_or_default());
    let _ = out.flush();
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdout(&null);
    }
}

struct Created {
    pid: i32,
    outputs: Vec<(OwnedFd, Stream)>,
    /// Held open so a container asked for stdin does not see end-of-file; attach writes here.
    stdin: attach::Stdin,
}

fn create(cfg: &MonitorConfig, runtime: &dyn OciRuntime) -> Result<Created, ProcessError> {
    let mut outputs = Vec::new();
    let mut stdin = attach::Stdin::None;
    let mut io = CreateIo::null();
    let console = if cfg.tty {
        let path = cfg.console_socket.clone();
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(io_error("binding the console socket", &path))?;
        io.console_socket = Some(path);
        Some(receive_console(listener))
    } else {
        let (out_r, out_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys_error("stdout pipe"))?;
        let (err_r, err_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys_error("stderr pipe"))?;
        io.stdout = Stdio::from(out_w);
        io.stderr = Stdio::from(err_w);
        outputs.push((out_r, Stream::Stdout));
        outputs.push((err_r, Stream::Stderr));
        if cfg.stdin {
            let (in_r, in_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys_error("stdin pipe"))?;
            io.stdin = Stdio::from(in_r);
            stdin = attach::Stdin::Pipe(Mutex::new(Some(std::fs::File::from(in_w))));
        }
        None
    };
    // `io` (our copies of the pipes' write ends) is consumed: the readers see EOF at the end.
    let pid = match &cfg.restore {
        Some(from) => runtime.restore(&cfg.id, &cfg.bundle, &cfg.work_dir, from, io)?,
        None => runtime.create(&cfg.id, &cfg.bundle, &cfg.work_dir, io)?,
    };
    if let Some(console) = console {
        let console_error = |reason: String| ProcessError::Console { handler: runtime.name().to_string(), reason };
        let master = console
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| console_error("nothing within 10 s".into()))?
            .map_err(console_error)?;
        // Attach writes keystrokes and sizes to the master, whether or not stdin was asked for
        // (without it, only sizes are accepted: see the daemon's attach checks).
        let input = master.try_clone().map_err(io_error("duplicating the pty", &cfg.console_socket))?;
        stdin = attach::Stdin::Terminal(std::fs::File::from(input));
        outputs.push((master, Stream::Stdout));
    }
    Ok(Created { pid, outputs, stdin })
}

/// Accepts the runtime's connection on the console socket and receives the pty master.
fn receive_console(listener: UnixListener) -> mpsc::Receiver<Result<OwnedFd, String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let result = (|| {
            let (stream, _) = listener.accept().map_err(|e| e.to_string())?;
            let mut buf = [0u8; 4096];
            let mut iov = [std::io::IoSliceMut::new(&mut buf)];
            let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
            let msg = nix::sys::socket::recvmsg::<()>(
                stream.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                nix::sys::socket::MsgFlags::empty(),
            )
            .map_err(|e| e.to_string())?;
            for cmsg in msg.cmsgs().map_err(|e| e.to_string())? {
                if let nix::sys::socket::ControlMessageOwned::ScmRights(fds) = cmsg {
                    if let Some(&fd) = fds.first() {
                        // SAFETY: the fd was just received and is owned by nobody else.
                        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
                    }
                }
            }
            Err("no fd in the console message".to_string())
        })();
        let _ = tx.send(result);
    });
    rx
}

/// Copies one output of the container into its log and to attached clients.
fn copy_output(fd: OwnedFd, stream: Stream, max_line: usize, log: &SharedLog, hub: &attach::Hub) {
    let mut file = std::fs::File::from(fd);
    let mut framer = LineFramer::new(max_line);
    let mut buf = vec![0u8; 32 * 1024];
    let mut write = |content: &[u8], partial: bool| {
        if let Some(log) = log.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            if let Err(e) = log.record(stream, content, partial) {
                eprintln!("cannot write the container log: {e}");
            }
        }
    };
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                framer.feed(&buf[..n], &mut write);
                hub.broadcast(stream, &buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break, // EIO on a pty whose other side closed
        }
    }
    framer.finish(&mut write);
}

/// Control socket: one command per connection, one reply line.
fn serve_control(path: &Path, log: SharedLog) {
    let _ = std::fs::remove_file(path);
    let listener = match UnixListener::bind(path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("control socket {}: {e}", path.display());
            return;
        }
    };
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            handle_control(stream, &log);
        }
    });
}

fn handle_control(stream: UnixStream, log: &SharedLog) {
    let mut line = String::new();
    let mut reader = BufReader::new(&stream);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let reply = match line.trim() {
        "reopen" => match log.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(l) => l.reopen().map(|_| "ok".to_string()).unwrap_or_else(|e| format!("error: {e}")),
            None => "ok".to_string(),
        },
        other => format!("error: unknown command {other:?}"),
    };
    let _ = (&stream).write_all(format!("{reply}\n").as_bytes());
}

/// Reaps children until the container's init exits; returns its exit code (128+signal
/// when killed).
fn reap(pid: i32) -> i32 {
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(WaitStatus::Exited(p, code)) if p.as_raw() == pid => return code,
            Ok(WaitStatus::Signaled(p, signal, _)) if p.as_raw() == pid => return 128 + signal as i32,
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => {
                // Not our child (should not happen with a subreaper): wait for it to vanish.
                while crate::model::sandbox::ProcessRef::of(pid).is_some() {
                    std::thread::sleep(Duration::from_millis(100));
                }
                return 255;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::fake::FakeRuntime;

    fn config(dir: &Path, args: &[&str], stdin: bool) -> MonitorConfig {
        let bundle = dir.join("bundle");
        std::fs::create_dir_all(&bundle).unwrap();
        std::fs::write(bundle.join("config.json"), serde_json::json!({"process": {"args": args}}).to_string()).unwrap();
        MonitorConfig {
            id: "c1".into(),
            bundle,
            runtime: crate::model::handler::HandlerSpec {
                name: "fake".into(),
                engine: crate::model::handler::Engine::Runc,
                binary: "/nonexistent".into(),
                root: dir.join("root"),
                no_pivot: false,
                systemd_cgroup: false,
                allowed_annotations: vec![],
            },
            log_path: Some(dir.join("c1.log")),
            log_directory: Some(dir.to_path_buf()),
            max_log_line: 1024,
            exit_file: dir.join("exit.json"),
            ctl_socket: dir.join("ctl"),
            console_socket: dir.join("console"),
            work_dir: dir.join("work"),
            tty: false,
            stdin,
            stdin_once: false,
            attach_socket: None,
            restore: None,
        }
    }

    #[test]
    fn create_hands_the_container_its_pipes_and_the_log_gets_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), &["sh", "-c", "read line; echo \"got $line\"; echo oops >&2"], true);
        let fake = FakeRuntime::default();
        let created = create(&cfg, &fake).unwrap();
        assert_eq!(fake.calls(), ["create c1"]);
        let pid_file = std::fs::read_to_string(cfg.work_dir.join("pid")).unwrap();
        assert_eq!(pid_file.trim(), created.pid.to_string());
        let log: SharedLog = Arc::new(Mutex::new(Some(
            CriLog::open(cfg.log_path.as_ref().unwrap(), cfg.log_directory.as_deref()).unwrap(),
        )));
        let attach::Stdin::Pipe(stdin) = created.stdin else { panic!("stdin was asked for") };
        stdin.lock().unwrap().take().unwrap().write_all(b"hello\n").unwrap();
        let hub = attach::Hub::new(attach::Stdin::None, false);
        let readers: Vec<_> = created
            .outputs
            .into_iter()
            .map(|(fd, stream)| {
                let (log, hub) = (log.clone(), hub.clone());
                std::thread::spawn(move || copy_output(fd, stream, 1024, &log, &hub))
            })
            .collect();
        assert_eq!(reap(created.pid), 0);
        for r in readers {
            r.join().unwrap();
        }
        let text = std::fs::read_to_string(cfg.log_path.as_ref().unwrap()).unwrap();
        assert!(text.lines().any(|l| l.ends_with(" stdout F got hello")), "{text}");
        assert!(text.lines().any(|l| l.ends_with(" stderr F oops")), "{text}");
    }

    #[test]
    fn a_pid_namespace_of_its_own_is_one_the_spec_creates() {
        let dir = tempfile::tempdir().unwrap();
        let spec = |namespaces: serde_json::Value| {
            let json = serde_json::json!({"ociVersion": "1.0.2", "root": {"path": "rootfs"}, "linux": {"namespaces": namespaces}});
            std::fs::write(dir.path().join("config.json"), json.to_string()).unwrap();
            own_pid_namespace(dir.path())
        };
        assert!(spec(serde_json::json!([{"type": "mount"}, {"type": "pid"}])));
        assert!(!spec(serde_json::json!([{"type": "pid", "path": "/proc/42/ns/pid"}])), "the pod's, joined");
        assert!(!spec(serde_json::json!([{"type": "mount"}])), "the host's");
        std::fs::write(dir.path().join("config.json"), "{").unwrap();
        assert!(!own_pid_namespace(dir.path()), "unreadable");
    }

    #[test]
    fn a_failed_create_names_the_handler_and_leaves_no_process() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), &[], false);
        let err = create(&cfg, &FakeRuntime::default()).err().unwrap();
        let err = err.to_string();
        assert!(err.contains("fake") && err.contains("no process args"), "{err}");
    }
}
