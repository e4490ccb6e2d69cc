//! The typed services behind the gRPC adapters, one file per RPC.

mod image_fs_info;
mod image_list;
mod image_pull;
mod image_remove;
mod image_status;
mod runtime_config;
mod runtime_status;
mod runtime_version;

use std::sync::Arc;

use crate::config::Config;
use crate::image::{ImageLookup, ImageStore, Puller};
use crate::model::image::ImageRecord;

pub use runtime_status::{Condition, RuntimeStatus};
pub use runtime_version::VersionInfo;

/// Image operations: the store, the puller, and which images are pinned.
pub struct ImageService {
    store: Arc<ImageStore>,
    puller: Arc<Puller>,
    pinned: Vec<ImageLookup>,
}

/// An image as reported to clients.
#[derive(Debug, Clone)]
pub struct ImageView {
    pub record: ImageRecord,
    pub size: u64,
    pub pinned: bool,
}

/// Runtime-wide facts: configuration and what was probed at start-up.
pub struct RuntimeService {
    config: Arc<Config>,
    handlers: Vec<runtime_status::HandlerProbe>,
}

impl ImageService {
    pub fn new(store: Arc<ImageStore>, puller: Arc<Puller>, pinned: Vec<ImageLookup>) -> Self {
        ImageService {
            store,
            puller,
            pinned,
        }
    }

    fn view(&self, record: ImageRecord) -> Result<ImageView, crate::error::Error> {
        let size = self.store.image_size(&record)?;
        let pinned = self.pinned.iter().any(|p| match p {
            ImageLookup::Id(id) => *id == record.id,
            ImageLookup::Tag(t) => record.repo_tags.contains(t),
            ImageLookup::Digest(d) => record.repo_digests.contains(d),
        });
        Ok(ImageView {
            record,
            size,
            pinned,
        })
    }

    /// Runs store work off the async threads (it takes a file lock and may fsync).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ImageStore) -> Result<T, crate::image::ImageError> + Send + 'static,
    ) -> Result<T, crate::error::Error> {
        let store = self.store.clone();
        Ok(tokio::task::spawn_blocking(move || f(&store)).await??)
    }
}

impl RuntimeService {
    /// Probes each configured handler's binary once.
    pub fn new(config: Arc<Config>) -> Self {
        let handlers = runtime_status::probe_handlers(&config);
        RuntimeService { config, handlers }
    }
}
