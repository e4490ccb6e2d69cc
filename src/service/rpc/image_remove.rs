use crate::error::Error;
use crate::image::ImageLookup;

use crate::service::image_service::ImageService;

impl ImageService {
    /// Removes the image with all its tags; succeeds when it is already gone; refused while a
    /// container (in any state) uses it.
    pub async fn remove(&self, reference: &str) -> Result<(), Error> {
        let lookup = ImageLookup::parse(reference)?;
        let users = self.users.clone();
        let in_use = move |id: &crate::model::image::ImageId| {
            let containers = users.containers_using(id);
            if containers.is_empty() {
                Ok(())
            } else {
                Err(crate::image::ImageError::InUse { image: id.to_string(), containers: containers.join(", ") })
            }
        };
        let removed = self.blocking(move |s| s.remove(&lookup, in_use)).await?;
        match removed {
            Some(id) => tracing::info!(image = reference, %id, "image removed"),
            None => tracing::debug!(image = reference, "image to remove was not present"),
        }
        Ok(())
    }
}
