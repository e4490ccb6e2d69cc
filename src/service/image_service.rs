//! Image operations: the store, the puller, which images are pinned, and who uses them.

use std::sync::Arc;

use crate::image::{ImageLookup, ImageStore, Puller};
use crate::model::image::ImageRecord;

/// Image operations: the store, the puller, which images are pinned, and who uses them.
pub struct ImageService {
    pub(super) store: Arc<ImageStore>,
    pub(super) puller: Arc<Puller>,
    pub(super) pinned: Vec<ImageLookup>,
    pub(super) users: Arc<dyn ImageUsers>,
}

/// Who uses an image: RemoveImage refuses while anyone does.
pub trait ImageUsers: Send + Sync {
    fn containers_using(&self, image: &crate::model::image::ImageId) -> Vec<String>;
}

/// An image as reported to clients.
#[derive(Debug, Clone)]
pub struct ImageView {
    pub record: ImageRecord,
    pub size: u64,
    pub pinned: bool,
}

impl ImageService {
    pub fn new(
        store: Arc<ImageStore>,
        puller: Arc<Puller>,
        pinned: Vec<ImageLookup>,
        users: Arc<dyn ImageUsers>,
    ) -> Self {
        ImageService { store, puller, pinned, users }
    }

    pub(super) fn view(&self, (record, size): (ImageRecord, u64)) -> ImageView {
        let pinned = self.pinned.iter().any(|p| match p {
            ImageLookup::Id(id) => *id == record.id,
            ImageLookup::Tag(t) => record.repo_tags.contains(t),
            ImageLookup::Digest(d) => record.repo_digests.contains(d),
        });
        ImageView { record, size, pinned }
    }

    /// Runs store work off the async threads (it takes a file lock and may fsync).
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ImageStore) -> Result<T, crate::image::ImageError> + Send + 'static,
    ) -> Result<T, crate::error::Error> {
        let store = self.store.clone();
        Ok(crate::blocking::spawn(move || f(&store)).await??)
    }
}
