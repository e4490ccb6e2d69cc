//! Pre-installed plugins: executables in `plugin_path` named `<index>-<name>`, started at
//! start-up with one end of a socket pair (NRI_PLUGIN_SOCKET), their name and index, and
//! their configuration handed over at Configure.

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::adaptation::Nri;
use super::plugin::PluginId;

/// A plugin's configuration is read up to this size.
const MAX_CONFIG: u64 = 1 << 20;
/// The descriptor the plugin finds its socket on.
const PLUGIN_FD: i32 = 3;

/// A launched plugin: who it must register as, its process and its configuration.
pub struct Launched {
    pub id: PluginId,
    pub child: tokio::process::Child,
    pub config: String,
}

/// Starts every plugin in `plugin_path`, in index order.
pub async fn start_all(nri: &Arc<Nri>) {
    let dir = nri.config.plugin_path.clone();
    let found = crate::blocking::spawn(move || executables(&dir)).await.unwrap_or_default();
    for (id, path) in found {
        let config_dir = nri.config.plugin_config_path.clone();
        let config_id = id.clone();
        let config = crate::blocking::spawn(move || config_for(&config_dir, &config_id)).await.unwrap_or_default();
        match start(&id, &path) {
            Ok((child, stream)) => {
                tracing::info!(plugin = %id, path = %path.display(), "NRI plugin started");
                tokio::spawn(nri.clone().handshake(stream, Some(Launched { id, child, config })));
            }
            Err(e) => tracing::warn!(plugin = %id, path = %path.display(), error = %e, "NRI plugin not started"),
        }
    }
}

/// The directory's executables with a plugin's name, sorted by index and name.
fn executables(dir: &Path) -> Vec<(PluginId, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<(PluginId, PathBuf)> = entries
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            match PluginId::parse_file_name(&name) {
                Ok(id) => Some((id, e.path())),
                Err(why) => {
                    tracing::warn!(file = %e.path().display(), "NRI plugin skipped: {why}");
                    None
                }
            }
        })
        .collect();
    found.sort();
    found
}

/// `<index>-<name>.conf`, else `<name>.conf`, else nothing.
pub fn config_for(dir: &Path, id: &PluginId) -> String {
    use std::io::Read;
    for file in [format!("{id}.conf"), format!("{}.conf", id.name)] {
        if let Ok(f) = std::fs::File::open(dir.join(&file)) {
            let mut text = String::new();
            if f.take(MAX_CONFIG).read_to_string(&mut text).is_ok() {
                return text;
            }
        }
    }
    String::new()
}

fn start(id: &PluginId, path: &Path) -> std::io::Result<(tokio::process::Child, tokio::net::UnixStream)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let fd = theirs.as_raw_fd();
    let mut command = tokio::process::Command::new(path);
    command
        .env("NRI_PLUGIN_NAME", &id.name)
        .env("NRI_PLUGIN_IDX", &id.index)
        .env("NRI_PLUGIN_SOCKET", PLUGIN_FD.to_string())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    // SAFETY: dup2 is async-signal-safe; the child gets the socket on a known descriptor,
    // without close-on-exec.
    unsafe {
        command.pre_exec(move || {
            if nix::libc::dup2(fd, PLUGIN_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    drop(theirs);
    ours.set_nonblocking(true)?;
    Ok((child, tokio::net::UnixStream::from_std(ours)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executables_and_configs_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, mode: u32| {
            let p = dir.path().join(name);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("20-b", 0o755);
        write("10-a", 0o700);
        write("10-notexec", 0o644);
        write("noindex", 0o755);
        let names: Vec<String> = executables(dir.path()).iter().map(|(id, _)| id.to_string()).collect();
        assert_eq!(names, ["10-a", "20-b"]);
        let id = PluginId::new("10", "a").unwrap();
        assert_eq!(config_for(dir.path(), &id), "");
        std::fs::write(dir.path().join("a.conf"), "by name").unwrap();
        assert_eq!(config_for(dir.path(), &id), "by name");
        std::fs::write(dir.path().join("10-a.conf"), "by index").unwrap();
        assert_eq!(config_for(dir.path(), &id), "by index");
    }
}
