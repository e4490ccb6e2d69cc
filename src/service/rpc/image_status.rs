use serde_json::json;

use crate::error::Error;
use crate::image::ImageLookup;

use crate::service::image_service::ImageService;
use crate::service::image_service::ImageView;

impl ImageService {
    /// The image `reference` names, `None` when it is not stored (kubelet then pulls).
    /// Verbose adds the manifest and config as JSON.
    pub async fn status(&self, reference: &str, verbose: bool) -> Result<Option<(ImageView, Option<String>)>, Error> {
        let lookup = ImageLookup::parse(reference)?;
        let Some((record, size)) = self.blocking(move |s| s.find_sized(&lookup)).await? else {
            return Ok(None);
        };
        let info = if verbose {
            let (manifest, config) = (record.manifest.clone(), record.id.digest());
            let (manifest, config) =
                self.blocking(move |s| Ok((s.read_blob(&manifest)?, s.read_blob(&config)?))).await?;
            let parse =
                |bytes: &[u8]| serde_json::from_slice::<serde_json::Value>(bytes).unwrap_or(serde_json::Value::Null);
            Some(
                json!({
                    "id": record.id,
                    "manifestDigest": record.manifest,
                    "manifest": parse(&manifest),
                    "imageSpec": parse(&config),
                    "layers": record.layers,
                })
                .to_string(),
            )
        } else {
            None
        };
        Ok(Some((self.view((record, size)), info)))
    }
}
