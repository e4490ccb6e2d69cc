use crate::error::Error;
use crate::image::ImageLookup;

use super::ImageService;

impl ImageService {
    /// Removes the image with all its tags; succeeds when it is already gone.
    pub async fn remove(&self, reference: &str) -> Result<(), Error> {
        let lookup = ImageLookup::parse(reference)?;
        let removed = self
            .blocking(move |s| s.remove(&lookup, |_| Ok(())))
            .await?;
        match removed {
            Some(id) => tracing::info!(image = reference, %id, "image removed"),
            None => tracing::debug!(image = reference, "image to remove was not present"),
        }
        Ok(())
    }
}
