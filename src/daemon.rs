//! Wiring: directories, stores, services, the unix socket, and shutdown on signals.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cri::image_service_server::ImageServiceServer;
use crate::cri::runtime_service_server::RuntimeServiceServer;
use tokio::net::UnixListener;

use crate::service_manager::ServiceManager;
use tokio_stream::wrappers::UnixListenerStream;

use crate::config::Config;
use crate::grpc::{ImageApi, RuntimeApi};
use crate::image::{ImageError, ImageLookup, ImageStore, Puller, Registries};
use crate::service::{ImageService, PodService, RuntimeService, StreamingService};

/// kubelet sends and accepts messages up to 16 MiB.
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// How long connections may stay open after SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// How long calls still running (their clients gone or not) may take to end after SIGTERM:
/// a call cut short could leave half its work.
const CALLS_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot prepare {path}: {source}")]
    Prepare { path: PathBuf, source: std::io::Error },
    #[error("another process is serving on {0}; stop it or choose another socket")]
    SocketInUse(PathBuf),
    #[error("{0} exists and is not a socket")]
    NotASocket(PathBuf),
    #[error("invalid config value for `image.pinned`: {0}")]
    Pinned(ImageError),
    #[error("image store: {0}")]
    Images(#[from] ImageError),
    #[error("recovering pods and containers: {0}")]
    Recovery(#[from] crate::error::Error),
    #[error("streaming server TLS: {0}")]
    StreamingTls(std::io::Error),
    #[error("gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
}

/// Builds the services from the configuration and recovers the state on disk.
pub fn build(config: Arc<Config>) -> Result<(Arc<RuntimeService>, Arc<ImageService>, Arc<PodService>), DaemonError> {
    crate::store::private::secure_roots(&config.state_root, &config.run_root)
        .map_err(|source| DaemonError::Prepare { path: config.state_root.clone(), source })?;
    let node = crate::node::probe(&config);
    let store = Arc::new(ImageStore::open(&config.image_root())?);
    store.collect_garbage()?;
    let pinned = config
        .image
        .pinned
        .iter()
        .map(|p| ImageLookup::parse(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(DaemonError::Pinned)?;
    let registries = Arc::new(Registries::new(&config));
    let puller = Arc::new(Puller::new(store.clone(), registries, config.image.max_concurrent_downloads));
    let runtimes = Arc::new(crate::service::Runtimes::probe(&config));
    let pods = Arc::new(PodService::new(config.clone(), node.clone(), store.clone(), runtimes.clone())?);
    pods.recover()?;
    let images = Arc::new(ImageService::new(store, puller, pinned, pods.clone()));
    let runtime = Arc::new(RuntimeService::new(config, node, runtimes));
    Ok((runtime, images, pods))
}

/// How often memory the daemon freed is handed back to the kernel.
const TRIM_PERIOD: std::time::Duration = std::time::Duration::from_secs(30);

/// glibc keeps what threads free in their arenas (an image pull's buffers stay resident
/// after it, a few MiB); trimming them now and then hands that memory back to the node.
async fn return_freed_memory() {
    let mut tick = tokio::time::interval(TRIM_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only releases free heap pages; it takes the allocator's locks.
        let _ = crate::blocking::spawn(|| unsafe { nix::libc::malloc_trim(0) }).await;
    }
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(config: Config, mut manager: ServiceManager) -> Result<(), DaemonError> {
    let config = Arc::new(config);
    let (runtime, images, pods) = build(config.clone())?;
    pods.recover_network().await;
    pods.adopt_survivors();
    pods.start_background();
    tokio::spawn(return_freed_memory());
    let nri = start_nri(&pods, &config).await?;
    let activated = manager.activated_socket.is_some();
    let listener = listen(&config, &mut manager)?;
    tracing::info!(socket = %config.socket.display(), version = env!("CARGO_PKG_VERSION"), "swapcri serving the CRI");
    let stopping = Arc::new(tokio::sync::Notify::new());
    let signalled = stopping.clone();
    let signal = shutdown_signal();
    let shutdown = async move {
        signal.await;
        signalled.notify_one();
    };
    let metrics = Arc::new(crate::metrics::Metrics::new());
    if !config.metrics.address.is_empty() {
        let address: std::net::SocketAddr = config.metrics.address.parse().expect("validated with the config");
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| DaemonError::Prepare { path: config.metrics.address.clone().into(), source })?;
        let (metrics, pods) = (metrics.clone(), pods.clone());
        tokio::spawn(async move {
            if let Err(e) =
                crate::metrics::serve(listener, metrics, pods as Arc<dyn crate::metrics::MetricsSource>).await
            {
                tracing::error!(error = %e, "the metrics endpoint stopped");
            }
        });
    }
    let tls = if config.streaming.tls_cert_file.as_os_str().is_empty() {
        None
    } else {
        let (cert, key) = (&config.streaming.tls_cert_file, &config.streaming.tls_key_file);
        Some(crate::streaming::tls::acceptor(cert, key).map_err(DaemonError::StreamingTls)?)
    };
    let streaming = crate::streaming::StreamingServer::start(&config.streaming, tls, metrics.streaming())
        .await
        .map_err(|source| DaemonError::Prepare { path: config.streaming.address.clone().into(), source })?;
    let calls = tokio_util::task::TaskTracker::new();
    let server = tonic::transport::Server::builder()
        .layer(crate::grpc::GrpcMetricsLayer(metrics))
        .layer(crate::grpc::DeadlineLayer { calls: calls.clone() })
        .add_service(
            RuntimeServiceServer::new(RuntimeApi::new(runtime, pods.clone(), StreamingService::new(pods, streaming)))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(
            ImageServiceServer::new(ImageApi::new(images))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown);
    // Clients such as kubelet keep connections open; in-flight calls get a grace period.
    manager.ready("serving the CRI");
    let result = tokio::select! {
        result = server => result,
        _ = async { stopping.notified().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            tracing::info!(grace_secs = SHUTDOWN_GRACE.as_secs(), "closing connections still open after the grace period");
            Ok(())
        }
    };
    manager.stopping();
    finish_calls(calls).await;
    nri.shutdown().await;
    if !activated {
        // An activated socket is the service manager's: it keeps it, and queues clients.
        let _ = std::fs::remove_file(&config.socket);
    }
    tracing::info!("swapcri stopped");
    Ok(result?)
}

/// NRI (with `[nri] enable`): its socket, the pre-installed plugins, and the relay of exits.
async fn start_nri(pods: &Arc<PodService>, config: &Config) -> Result<Arc<crate::nri::Nri>, DaemonError> {
    pods.start_nri().await.map_err(|source| DaemonError::Prepare { path: config.nri.socket_path.clone(), source })
}

/// Lets the calls still running end, for at most CALLS_GRACE.
async fn finish_calls(calls: tokio_util::task::TaskTracker) {
    calls.close();
    if !calls.is_empty() {
        tracing::info!(calls = calls.len(), "waiting for the calls still running");
        if tokio::time::timeout(CALLS_GRACE, calls.wait()).await.is_err() {
            tracing::warn!(calls = calls.len(), grace_secs = CALLS_GRACE.as_secs(), "calls still running at exit");
        }
    }
}

/// The CRI socket: the one socket activation handed over, else one of our own.
fn listen(config: &Config, manager: &mut ServiceManager) -> Result<UnixListener, DaemonError> {
    let Some(fd) = manager.activated_socket.take() else {
        return bind_socket(&config.socket, config.socket_gid);
    };
    let listener = std::os::unix::net::UnixListener::from(fd);
    let err = |source| DaemonError::Prepare { path: config.socket.clone(), source };
    listener.set_nonblocking(true).map_err(err)?;
    UnixListener::from_std(listener).map_err(err)
}

/// Binds the socket: a stale one is replaced, a live one refused; mode 0660.
fn bind_socket(path: &Path, gid: Option<u32>) -> Result<UnixListener, DaemonError> {
    let err = |source| DaemonError::Prepare { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        // The socket's group must pass through its directory to connect.
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(crate::store::private::TRAVERSE).create(dir).map_err(err)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(DaemonError::SocketInUse(path.to_path_buf()));
            }
            tracing::info!(socket = %path.display(), "replacing stale socket");
            std::fs::remove_file(path).map_err(err)?;
        }
        Ok(_) => return Err(DaemonError::NotASocket(path.to_path_buf())),
        Err(_) => {}
    }
    // Bound under a temporary name, given its mode and group, then renamed into place: no
    // client ever sees the socket with looser permissions.
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staging = path.with_file_name(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_file(&staging);
    let listener = std::os::unix::net::UnixListener::bind(&staging).map_err(err)?;
    let placed = std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o660))
        .and_then(|()| gid.map_or(Ok(()), |gid| std::os::unix::fs::chown(&staging, None, Some(gid))))
        .and_then(|()| std::fs::rename(&staging, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&staging);
        return Err(err(e));
    }
    listener.set_nonblocking(true).map_err(err)?;
    UnixListener::from_std(listener).map_err(err)
}

/// SIGTERM or SIGINT. The handlers are installed when this is called, not when the future is
/// first polled: a stop right after READY=1 must find them in place.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
            _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
        }
    }
}
