//! Running one CNI plugin: the operation in CNI_* environment variables, the configuration
//! on stdin, the result or an error object on stdout.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("CNI plugin {plugin:?} not found in {dirs}")]
    NotFound { plugin: String, dirs: String },
    #[error("CNI plugin {plugin} {command}: {message}")]
    Failed { plugin: String, command: &'static str, message: String },
    #[error("CNI plugin {plugin} {command} did not finish within {seconds} s")]
    Timeout { plugin: String, command: &'static str, seconds: u64 },
}

/// What every plugin of one operation gets in its environment.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub command: &'static str,
    pub container_id: &'a str,
    /// Empty when the namespace is already gone (DEL after a reboot).
    pub netns: &'a str,
    pub ifname: &'a str,
    pub args: &'a str,
    pub plugin_dirs: &'a [PathBuf],
    pub timeout: Duration,
}

pub fn find(plugin: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(plugin)).find(|p| p.is_file())
}

fn cni_path(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":")
}

/// Runs `plugin` with `config` on stdin; the parsed stdout (Null when empty, as DEL may be).
pub async fn run(plugin: &str, call: &Call<'_>, config: &Value) -> Result<Value, PluginError> {
    let binary = find(plugin, call.plugin_dirs)
        .ok_or_else(|| PluginError::NotFound { plugin: plugin.into(), dirs: cni_path(call.plugin_dirs) })?;
    let failed = |message: String| PluginError::Failed { plugin: plugin.into(), command: call.command, message };
    let mut child = tokio::process::Command::new(&binary)
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("CNI_COMMAND", call.command)
        .env("CNI_CONTAINERID", call.container_id)
        .env("CNI_NETNS", call.netns)
        .env("CNI_IFNAME", call.ifname)
        .env("CNI_ARGS", call.args)
        .env("CNI_PATH", cni_path(call.plugin_dirs))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group: a plugin that times out is killed with whatever it started.
        .process_group(0)
        .spawn()
        .map_err(|e| failed(format!("cannot start {}: {e}", binary.display())))?;
    let group = child.id().map(|pid| nix::unistd::Pid::from_raw(pid as i32));
    let input = serde_json::to_vec(config).expect("a JSON value serializes");
    let mut stdin = child.stdin.take().expect("piped");
    let work = async move {
        // A plugin may exit without reading its input; that is its answer, not our error.
        let _ = stdin.write_all(&input).await;
        drop(stdin);
        child.wait_with_output().await
    };
    let output = match tokio::time::timeout(call.timeout, work).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(failed(e.to_string())),
        Err(_) => {
            if let Some(group) = group {
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            }
            return Err(PluginError::Timeout {
                plugin: plugin.into(),
                command: call.command,
                seconds: call.timeout.as_secs(),
            });
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(failed(error_message(&stdout, &String::from_utf8_lossy(&output.stderr), output.status)));
    }
    if stdout.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&stdout).map_err(|e| failed(format!("result is not JSON ({e}): {}", stdout.trim())))
}

/// The spec's error object (`code`, `msg`, `details`), else stderr, else the exit status.
fn error_message(stdout: &str, stderr: &str, status: std::process::ExitStatus) -> String {
    if let Ok(err) = serde_json::from_str::<Value>(stdout) {
        if let Some(msg) = err.get("msg").and_then(Value::as_str) {
            let code = err.get("code").and_then(Value::as_u64).map(|c| format!(" (code {c})")).unwrap_or_default();
            let details = err.get("details").and_then(Value::as_str).filter(|d| !d.is_empty());
            return match details {
                Some(d) => format!("{msg}: {d}{code}"),
                None => format!("{msg}{code}"),
            };
        }
    }
    let text = if stderr.trim().is_empty() { stdout.trim() } else { stderr.trim() };
    if text.is_empty() {
        format!("exited with {status}")
    } else {
        format!("{text} ({status})")
    }
}
