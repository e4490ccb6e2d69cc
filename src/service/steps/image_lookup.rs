//! An image of the store by the name or id a request gives (a container's image, an image
//! volume's).

use crate::error::Error;
use crate::image::ImageLookup;
use crate::model::image::ImageRecord;
use crate::service::pod_service::PodService;

impl PodService {
    /// The stored image a request names, or NotFound.
    pub(in crate::service) async fn find_image(&self, name: &str) -> Result<ImageRecord, Error> {
        let lookup = ImageLookup::parse(name)?;
        let store = self.images.clone();
        crate::blocking::spawn(move || store.find(&lookup))
            .await??
            .ok_or_else(|| Error::NotFound(format!("image {name:?} not found: pull it first")))
    }
}
