//! `swapcri client`: a small CRI client over the daemon's socket, for operators and
//! scripts on nodes without crictl. Prints the CRI responses as JSON.

use std::path::{Path, PathBuf};

use crate::cri;
use crate::cri::image_service_client::ImageServiceClient;
use crate::cri::runtime_service_client::RuntimeServiceClient;
use clap::Subcommand;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

mod output;
mod pods;
mod stream;
pub mod top;

use output::to_json;
pub use output::CommandExit;

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Runtime name and versions.
    Version,
    /// Runtime conditions and handlers (with --verbose, the node facts).
    Status {
        #[arg(long)]
        verbose: bool,
    },
    /// Pull an image (e.g. 127.0.0.1:5000/busybox:latest).
    Pull {
        image: String,
        /// Registry user name.
        #[arg(long, requires = "password")]
        username: Option<String>,
        /// Registry password.
        #[arg(long)]
        password: Option<String>,
    },
    /// List images, or the one named.
    Images { image: Option<String> },
    /// Status of one image (verbose: manifest and config).
    Inspecti {
        image: String,
        #[arg(long)]
        verbose: bool,
    },
    /// Remove an image by tag, digest reference or id.
    Rmi { image: String },
    /// Usage of the image filesystem.
    Imagefsinfo,
    #[command(flatten)]
    Pods(pods::PodCommand),
}

pub async fn connect(socket: &Path) -> Result<Channel, tonic::transport::Error> {
    let socket = socket.to_path_buf();
    Endpoint::from_static("http://[::]:50051")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(socket).await?)) }
        }))
        .await
}

/// Runs one command and returns the response as pretty JSON.
/// `streaming_ca`: the certificates to trust for `https://` streaming URLs (default: the system's).
pub async fn run(socket: &Path, streaming_ca: Option<PathBuf>, command: ClientCommand) -> anyhow::Result<String> {
    let channel = connect(socket).await.map_err(|e| anyhow::anyhow!("cannot connect to {}: {e}", socket.display()))?;
    let mut runtime = RuntimeServiceClient::new(channel.clone());
    let mut images = ImageServiceClient::new(channel);
    let spec = |image: String| Some(cri::ImageSpec { image, ..Default::default() });
    let json = match command {
        ClientCommand::Version => to_json(runtime.version(cri::VersionRequest { version: "v1".into() }).await?),
        ClientCommand::Status { verbose } => to_json(runtime.status(cri::StatusRequest { verbose }).await?),
        ClientCommand::Pull { image, username, password } => {
            let auth = username.map(|username| cri::AuthConfig {
                username,
                password: password.unwrap_or_default(),
                ..Default::default()
            });
            to_json(images.pull_image(cri::PullImageRequest { image: spec(image), auth, sandbox_config: None }).await?)
        }
        ClientCommand::Images { image } => {
            let filter = image.map(|i| cri::ImageFilter { image: spec(i) });
            to_json(images.list_images(cri::ListImagesRequest { filter }).await?)
        }
        ClientCommand::Inspecti { image, verbose } => {
            to_json(images.image_status(cri::ImageStatusRequest { image: spec(image), verbose }).await?)
        }
        ClientCommand::Rmi { image } => {
            to_json(images.remove_image(cri::RemoveImageRequest { image: spec(image) }).await?)
        }
        ClientCommand::Imagefsinfo => to_json(images.image_fs_info(cri::ImageFsInfoRequest {}).await?),
        ClientCommand::Pods(command) => return pods::run(runtime, stream::Connector::new(streaming_ca), command).await,
    };
    Ok(json?)
}
