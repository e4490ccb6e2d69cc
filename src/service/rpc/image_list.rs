use crate::error::Error;
use crate::image::ImageLookup;

use crate::service::image_service::ImageService;
use crate::service::image_service::ImageView;

impl ImageService {
    /// All images, or the one `filter` names (none when it names nothing stored).
    pub async fn list(&self, filter: Option<&str>) -> Result<Vec<ImageView>, Error> {
        let records = match filter {
            Some(reference) => {
                let lookup = ImageLookup::parse(reference)?;
                self.blocking(move |s| s.find_sized(&lookup)).await?.into_iter().collect()
            }
            None => self.blocking(|s| s.list_sized()).await?,
        };
        Ok(records.into_iter().map(|r| self.view(r)).collect())
    }
}
