//! Running under a service manager (systemd): readiness notification (`Type=notify`) and a
//! socket handed over by socket activation (`swapcri.socket`). Both come through the
//! environment, which is read once at start and cleared, so no helper, runc or container
//! inherits it (runc would forward a NOTIFY_SOCKET into the container).

use std::ffi::OsString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The first descriptor passed by socket activation (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: i32 = 3;

#[derive(Debug, Default)]
pub struct ServiceManager {
    notify_socket: Option<OsString>,
    /// The CRI socket, already bound and listening, from socket activation.
    pub activated_socket: Option<OwnedFd>,
}

impl ServiceManager {
    /// Takes what the service manager passed and clears it from the environment. Call it
    /// before any thread starts (environment changes are not thread-safe).
    pub fn take_from_env() -> ServiceManager {
        let notify_socket = std::env::var_os("NOTIFY_SOCKET").filter(|s| !s.is_empty());
        let for_us = std::env::var("LISTEN_PID").ok().and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id());
        let count = std::env::var("LISTEN_FDS").ok().and_then(|n| n.parse::<i32>().ok()).unwrap_or(0);
        for var in ["NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
            std::env::remove_var(var);
        }
        // Only the first socket is ours to serve; any other is closed with the process.
        let activated_socket = (for_us && count >= 1).then(|| {
            // SAFETY: systemd passed this descriptor to this process (LISTEN_PID) and nothing
            // else owns it.
            let fd = unsafe { OwnedFd::from_raw_fd(LISTEN_FDS_START) };
            let _ = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC));
            fd
        });
        ServiceManager { notify_socket, activated_socket }
    }

    /// Tells the service manager the daemon serves (recovery is done).
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}\nMAINPID={}\n", std::process::id()));
    }

    pub fn stopping(&self) {
        self.send("STOPPING=1\n");
    }

    fn send(&self, message: &str) {
        let Some(path) = &self.notify_socket else {
            return;
        };
        let sent = UnixDatagram::unbound().and_then(|socket| {
            let address = match path.as_bytes().strip_prefix(b"@") {
                Some(name) => SocketAddr::from_abstract_name(name)?,
                None => SocketAddr::from_pathname(path)?,
            };
            socket.send_to_addr(message.as_bytes(), &address)
        });
        if let Err(e) = sent {
            tracing::warn!(socket = ?path, error = %e, "cannot notify the service manager");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_reach_path_and_abstract_sockets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let receiver = UnixDatagram::bind(&path).unwrap();
        let manager = ServiceManager { notify_socket: Some(path.into()), activated_socket: None };
        manager.ready("serving");
        let mut buf = [0u8; 256];
        let n = receiver.recv(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(text.starts_with("READY=1\nSTATUS=serving\nMAINPID="), "{text}");

        let name = format!("swapcri-test-{}", std::process::id());
        let receiver = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        let manager = ServiceManager { notify_socket: Some(format!("@{name}").into()), activated_socket: None };
        manager.stopping();
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1\n");
        ServiceManager::default().ready("no manager: nothing sent");
    }
}
