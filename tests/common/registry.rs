//! A throwaway docker-registry on 127.0.0.1, with its storage and access log on disk.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Registry {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
}

impl Registry {
    pub fn start() -> Registry {
        let dir = tempfile::Builder::new().prefix("swapcri-registry-").tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry (Debian package docker-registry) must be installed");
        let registry = Registry { dir, port, child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "registry did not start: {}", registry.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The file the registry serves a blob from (to corrupt it).
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.path().join("data/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }

    /// How many times a blob was fetched (GET requests in the access log).
    pub fn blob_gets(&self, digest: &str) -> usize {
        self.log().lines().filter(|l| l.contains("\"GET ") && l.contains(&format!("/blobs/{digest}"))).count()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
