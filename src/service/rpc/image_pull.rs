use oci_client::secrets::RegistryAuth;

use crate::error::Error;
use crate::image::ImageName;
use crate::model::image::ImageId;

use crate::service::image_service::ImageService;

impl ImageService {
    /// Pulls `reference` and returns the image id (kubelet's image ref).
    pub async fn pull(&self, reference: &str, auth: RegistryAuth) -> Result<ImageId, Error> {
        let name = ImageName::parse(reference)?;
        self.puller.pull(name, auth).await.map_err(Error::from)
    }
}
